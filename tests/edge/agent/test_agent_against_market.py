"""The agent against the real market service over HTTP: register, read the quote, declare, buy.

The market (services.market) runs under uvicorn on a free local port with an SQLite ledger and
the local Redis (a key prefix per test); rounds are opened the way the market's worker task does.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from edge.agent.health import agent_alive
from edge.agent.runner import Agent, Registration
from edge.agent.settings import AgentSettings
from mots.client import MarketClient, MarketError
from mots.platform import tokens
from mots.platform.api.base import Strategy
from mots.platform.api.market import ClientRegistration, NodeKeyChallenge
from mots.platform.contracts import OpenRoundPayload
from mots.platform.db import in_transaction
from mots.platform.node_proof import sign_challenge
from mots.training.pki import make_node_key
from services.market import rounds
from services.market.auth import hash_token
from services.market.core.config import Settings
from services.market.main import create_app
from services.market.models import Client

ROOT = Path(__file__).resolve().parents[3]
OPERATOR_TOKEN = "agent-test-operator-token"
UTILITY = '{"kind": "power", "scale": 1.0, "exponent": 8.0}'  # U(0.6) = 0.6^-8 ≈ 59.5
REDIS_URL = "redis://127.0.0.1:6379/0"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Market:
    """A running market: its base URL and its app (for opening rounds)."""

    def __init__(self, url: str, app: Any, settings: Settings) -> None:
        self.url = url
        self.app = app
        self.settings = settings

    def open_round(
        self, round_id: int, price: str, rewards: dict[str, str], k: int, b: int
    ) -> None:
        payload = OpenRoundPayload(
            round_id=round_id,
            mechanism="swan_robust",
            price=Decimal(price),
            rewards={t: Decimal(r) for t, r in rewards.items()},
            target_participants=dict.fromkeys(rewards, k),
            target_buyers=dict.fromkeys(rewards, b),
            epsilon=0.6,
            welfare=10.0,
            incentive_cost=Decimal(0),
        )
        in_transaction(self.app.state.sessions, lambda s: rounds.open_round(s, payload))

    def enrol(self, type_name: str, data_size: int, cost: str, uses: int = 100) -> str:
        """An enrolment code the operator issues for this type."""
        r = self.operator(
            "POST",
            "/v1/enrolments",
            json={"type_name": type_name, "data_size": data_size, "cost": cost, "uses": uses},
        )
        assert r.status_code == 201, r.text
        code: str = r.json()["code"]
        return code

    def operator(self, method: str, path: str, **kw: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {OPERATOR_TOKEN}", **kw.pop("headers", {})}
        return httpx.request(method, self.url + path, headers=headers, timeout=10, **kw)


@pytest.fixture
def market(tmp_path: Path) -> Iterator[Market]:
    """The market app served by uvicorn in a thread, stopped and its Redis keys removed after."""
    with socket.socket() as s:
        if s.connect_ex(("127.0.0.1", 6379)) != 0:
            pytest.fail("Redis is not listening on 127.0.0.1:6379: run `make system`")
    settings = Settings(
        database_url=f"sqlite:///{tmp_path / 'market.db'}",
        redis_url=REDIS_URL,
        redis_key_prefix=f"edge-agent-test-{os.getpid()}-{time.time_ns()}:",
        operator_token=OPERATOR_TOKEN,
        artifact_dir=str(tmp_path / "artifacts"),
    )
    app = create_app(settings)
    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", ws="none")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, "the market did not start"
        time.sleep(0.05)
    try:
        yield Market(url, app, settings)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        import redis

        r = redis.Redis.from_url(REDIS_URL)
        for key in r.scan_iter(f"{settings.redis_key_prefix}*"):
            r.delete(key)


@pytest.fixture
def make_agent(market: Market, tmp_path: Path) -> Iterator[Callable[..., Agent]]:
    """Agents with their own state directories, closed after the test."""
    clients: list[MarketClient] = []

    def _make(
        name: str,
        type_name: str,
        data_size: int,
        cost: str,
        utility: str = UTILITY,
        uses: int = 100,
    ) -> Agent:
        settings = AgentSettings(
            client_type=type_name,
            data_size=data_size,
            cost=Decimal(cost),
            client_name=name,
            MOTS_UTILITY=utility,
            market_url=market.url,
            enrolment_code=market.enrol(type_name, data_size, cost, uses),
            state_dir=tmp_path / "agents" / name,
            poll_interval_s=0.05,
        )
        client = MarketClient(settings.market_url)
        clients.append(client)
        return Agent(settings, client)

    yield _make
    for c in clients:
        c.close()


def test_agents_register_and_declare_their_best_responses(
    market: Market, make_agent: Callable[..., Agent]
) -> None:
    """A cheap small client joins, a costly large client buys, a client valuing little abstains.
    Both registered before the round opened (a later registrant waits for the next round)."""
    joiner = make_agent("pi-01", "small", 50, "0.5")
    buyer = make_agent("pi-02", "large", 300, "9.0")  # π(J) = U − 9 + 4 < π(B) = U − 2.5
    assert joiner.step() is None  # registers; no round yet: nothing to answer
    reg = buyer.ensure_registered()
    r = market.operator(
        "POST", "/v1/deposits", json={"client_id": reg.client_id, "amount": "10"},
        headers={"Idempotency-Key": "fund-buyer-0001"},
    )  # fmt: skip
    assert r.status_code == 201, r.text
    r = market.operator(
        "POST", "/v1/deposits",
        json={"client_id": joiner.ensure_registered().client_id, "amount": "1.25"},
        headers={"Idempotency-Key": "fund-joiner-0001"},
    )  # fmt: skip
    assert r.status_code == 201, r.text  # the small type's fee, held when it joins (issue 37)
    market.open_round(1, price="2.5", rewards={"small": "-1.25", "large": "4.0"}, k=5, b=5)

    assert joiner.step().strategy is Strategy.JOIN
    assert buyer.step().strategy is Strategy.BUY
    assert joiner.step() is None  # answered once per round

    decisions = in_transaction(market.app.state.sessions, lambda s: rounds.decisions(s, 1))
    assert decisions.participants == {"small": [joiner.ensure_registered().client_id]}
    assert decisions.buyers == {"large": [reg.client_id]}
    assert decisions.paid_buyers == {"large": [reg.client_id]}
    balance = httpx.get(
        market.url + "/v1/me/balance", headers={"Authorization": f"Bearer {reg.token}"}, timeout=10
    )
    assert Decimal(balance.json()["balance"]) == Decimal("7.5")  # 10 deposited − p = 2.5

    recorded = json.loads((joiner.state_dir / "decision.json").read_text())
    assert recorded["round_id"] == 1 and recorded["strategy"] == "join"
    assert recorded["payoffs"]["join"] == pytest.approx(recorded["utility"] - 0.5 - 1.25)


def test_unfunded_joiner_abstains(market: Market, make_agent: Callable[..., Agent]) -> None:
    """A client whose best response is to join for a fee its wallet cannot hold (402) declares
    abstain (issue 37: no model on credit)."""
    agent = make_agent("pi-05", "small", 50, "0.5")
    agent.ensure_registered()
    market.open_round(1, price="2.5", rewards={"small": "-1.25"}, k=1, b=0)
    choice = agent.step()
    assert choice is not None and choice.strategy is Strategy.ABSTAIN
    assert "cannot pay the fee" in choice.reason


def test_unfunded_buyer_abstains(market: Market, make_agent: Callable[..., Agent]) -> None:
    """A client whose best response is to buy but cannot pay (402) declares abstain."""
    agent = make_agent("pi-03", "large", 300, "9.0")
    agent.ensure_registered()  # before the round opens: in its population
    market.open_round(1, price="2.5", rewards={"large": "4.0"}, k=1, b=1)
    choice = agent.step()
    assert choice is not None and choice.strategy is Strategy.ABSTAIN
    assert "cannot pay" in choice.reason
    token = agent.ensure_registered().token
    declared = agent.market.with_token(token).decision(1)
    assert declared is not None and declared.strategy is Strategy.ABSTAIN and not declared.paid


def test_registration_is_kept_across_restarts(
    market: Market, make_agent: Callable[..., Agent]
) -> None:
    """The credential is stored 0600 and reused by a restarted agent; changed facts re-register."""
    first = make_agent("pi-04", "small", 50, "0.5").ensure_registered()
    path = make_agent("pi-04", "small", 50, "0.5").state_dir / "registration.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    again = make_agent("pi-04", "small", 50, "0.5").ensure_registered()
    assert again == first
    moved = make_agent("pi-04", "tiny", 10, "0.1").ensure_registered()  # node re-labelled
    assert moved.client_id != first.client_id
    clients = market.operator("GET", "/v1/clients").json()["items"]
    assert sorted(c["type_name"] for c in clients) == ["small", "tiny"]


def test_agent_registers_again_when_the_market_forgets_it(
    market: Market, make_agent: Callable[..., Agent]
) -> None:
    """A token the market refuses (401) is dropped, and the next poll registers anew."""
    agent = make_agent("pi-06", "small", 50, "0.5")
    first = agent.ensure_registered()
    forged = type(first)(first.client_id, "not-a-valid-token")
    agent._registration = forged
    with pytest.raises(MarketError) as err:
        agent.step()
    assert err.value.status == 401
    assert not (agent.state_dir / "registration.json").exists()
    assert agent.step() is None  # registers again; no round is open
    assert agent.ensure_registered().client_id != first.client_id


def test_market_errors_carry_the_markets_detail(market: Market) -> None:
    """A refused registration surfaces the market's own message (field and rule)."""
    code = market.enrol("small", 50, "0.5")
    with MarketClient(market.url) as client:
        client.register(ClientRegistration(name="a", enrolment_code=code))
        with pytest.raises(MarketError, match="data_size") as err:
            client.register(ClientRegistration(name="b", enrolment_code=code, data_size=60))
        assert err.value.status == 409


def test_sdk_round_trip_against_the_market(market: Market, tmp_path: Path) -> None:
    """The SDK's calls against the real market: register, fund, quote, buy (replayed by its key),
    balance, the operator's client list, and the download refused before publication."""
    with MarketClient(market.url) as sdk:
        code = market.enrol("large", 300, "9", uses=1)
        me = sdk.register(ClientRegistration(name="sdk", enrolment_code=code))
        operator = sdk.with_token(OPERATOR_TOKEN)
        assert operator.deposit(me.id, Decimal(10), idempotency_key="fund-sdk").balance == 10
        assert operator.deposit(me.id, Decimal(10), idempotency_key="fund-sdk").balance == 10
        mine = sdk.with_token(me.token)
        assert mine.quote() is None
        market.open_round(1, price="2.5", rewards={"large": "4.0"}, k=1, b=1)
        quote = mine.wait_for_quote(1, timeout_s=10)
        assert quote.price == Decimal("2.5") and quote.types[0].target_buyers == 1
        first = mine.buy(1, idempotency_key="buy-sdk-1")
        assert mine.buy(1, idempotency_key="buy-sdk-1") == first  # a retry books nothing more
        assert first.balance == Decimal("7.5") and mine.balance().balance == Decimal("7.5")
        with pytest.raises(MarketError) as err:
            mine.buy(1)  # another key: a second purchase of the round is refused
        assert err.value.status == 409 and "already bought" in err.value.detail
        assert [c.id for c in operator.clients()] == [me.id]
        with pytest.raises(MarketError) as err:
            mine.download_model(1, tmp_path / "model.pt")
        assert err.value.status == 409 and not (tmp_path / "model.pt").exists()


def test_heartbeat_tracks_polls(market: Market, make_agent: Callable[..., Agent]) -> None:
    """The agent's health check passes after a poll and fails when polls stop."""
    agent = make_agent("pi-05", "small", 50, "0.5")
    assert not agent_alive(agent.state_dir, 0.05)
    agent.run(max_steps=2, sleep=lambda _: None)
    assert agent_alive(agent.state_dir, 0.05)
    assert not agent_alive(agent.state_dir, 0.05, now=time.time() + 3600)


def test_cli_run_answers_a_round(market: Market, tmp_path: Path) -> None:
    """``python -m edge.agent run``, configured by MOTS_EDGE_* variables, answers an open round
    (the device registered before the round opened: the CLI reuses its stored credential)."""
    code = market.enrol("small", 50, "0.5")
    settings = AgentSettings(
        client_type="small", data_size=50, cost=Decimal("0.5"), client_name="pi-cli",
        MOTS_UTILITY=UTILITY, market_url=market.url, enrolment_code=code,
        state_dir=tmp_path / "cli-agent", poll_interval_s=0.05,
    )  # fmt: skip
    with MarketClient(market.url) as client:
        device = Agent(settings, client).ensure_registered()
    r = market.operator(
        "POST", "/v1/deposits", json={"client_id": device.client_id, "amount": "1.25"},
        headers={"Idempotency-Key": "fund-cli-0001"},
    )  # fmt: skip
    assert r.status_code == 201, r.text  # the fee, held when it joins
    market.open_round(1, price="2.5", rewards={"small": "-1.25"}, k=1, b=0)
    env = {
        **os.environ,
        "MOTS_UTILITY": UTILITY,
        "MOTS_EDGE_CLIENT_TYPE": "small",
        "MOTS_EDGE_DATA_SIZE": "50",
        "MOTS_EDGE_COST": "0.5",
        "MOTS_EDGE_CLIENT_NAME": "pi-cli",
        "MOTS_EDGE_MARKET_URL": market.url,
        "MOTS_EDGE_ENROLMENT_CODE": code,
        "MOTS_EDGE_STATE_DIR": str(tmp_path / "cli-agent"),
        "MOTS_EDGE_POLL_INTERVAL_S": "0.05",
        "PYTHONPATH": f"{ROOT / 'shared'}{os.pathsep}{ROOT}",
    }
    result = subprocess.run(
        [sys.executable, "-m", "edge.agent", "run", "--max-steps", "2"],
        env=env, capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "round 1: join" in result.stderr
    decision = json.loads((tmp_path / "cli-agent" / "decision.json").read_text())
    assert decision["strategy"] == "join"
    health = subprocess.run(
        [sys.executable, "-m", "edge.agent", "health", "agent"],
        env=env, capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert health.returncode == 0, health.stderr


def test_cli_refuses_missing_facts(tmp_path: Path) -> None:
    """Without MOTS_EDGE_CLIENT_TYPE the CLI stops with an error naming the variable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MOTS_")}
    env.update({"MOTS_UTILITY": UTILITY, "MOTS_EDGE_DATA_SIZE": "50", "MOTS_EDGE_COST": "0.5"})
    result = subprocess.run(
        [sys.executable, "-m", "edge.agent", "run", "--max-steps", "1"],
        env=env, capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert result.returncode != 0
    assert "client_type" in result.stderr.lower()


def test_the_agent_renews_its_token_before_it_expires(
    market: Market, make_agent: Callable[..., Agent]
) -> None:
    """Within token_renew_before_s of the expiry, a step renews the token and stores the new one
    (the old one is refused by the market); a restarted agent reuses the stored one."""
    agent = make_agent("renewer", "small", 50, "0.5")
    first = agent.ensure_registered()
    assert agent.step() is None
    assert agent.ensure_registered() == first  # far from expiry: nothing renewed
    agent.settings.token_renew_before_s = 10 * 365 * 86_400
    agent.step()
    renewed = agent.ensure_registered()
    assert renewed.client_id == first.client_id and renewed.token != first.token
    stored = json.loads((agent.state_dir / "registration.json").read_text())
    assert stored["token"] == renewed.token
    with MarketClient(market.url, token=first.token) as old:
        with pytest.raises(MarketError) as err:
            old.me()
        assert err.value.status == 401


def _expire_token(market: Market, agent: Agent) -> Registration:
    """What a device finds after being away longer than its token lives: the token the market
    issued it last (its hash the client's current one) is past its expiry."""
    reg = agent.ensure_registered()
    expired = tokens.sign(
        reg.client_id, int(time.time()) - 60, market.settings.token_secret.get_secret_value()
    )

    def work(session: Any) -> None:
        session.get(Client, reg.client_id).token_hash = hash_token(expired)

    in_transaction(market.app.state.sessions, work)
    stale = Registration(reg.client_id, expired)
    (agent.state_dir / "registration.json").write_text(
        json.dumps({"client_id": stale.client_id, "token": stale.token})
    )
    with MarketClient(market.url, token=expired) as old, pytest.raises(MarketError) as err:
        old.me()
    assert err.value.status == 401 and "expired" in err.value.detail
    return stale


def test_a_device_away_longer_than_its_token_rejoins_with_its_node_key(
    market: Market, make_agent: Callable[..., Agent], tmp_path: Path
) -> None:
    """A restarted agent whose stored token expired renews it by signing a challenge with the
    SuperNode key it registered: same client, no new enrolment code (its one use is spent), and
    it answers the next round as a participant. An attacker with another key is refused."""
    agent = make_agent("pi-away", "small", 50, "0.5", uses=1)
    assert agent.step() is None  # registers, and registers its node key
    first = agent.ensure_registered()
    assert agent.market.with_token(first.token).me().node_key_sha256 is not None
    stale = _expire_token(market, agent)

    attacker_key = tmp_path / "attacker.key"
    make_node_key(attacker_key)
    with MarketClient(market.url) as attacker, pytest.raises(MarketError) as err:
        attacker.renew_token_with_node_key(first.client_id, attacker_key)
    assert err.value.status == 401 and "signature" in err.value.detail

    back = Agent(agent.settings, agent.market)  # the device, restarted after its time away
    r = market.operator(
        "POST", "/v1/deposits", json={"client_id": first.client_id, "amount": "1.25"},
        headers={"Idempotency-Key": "fund-away-0001"},
    )  # fmt: skip
    assert r.status_code == 201, r.text  # the fee, held when it joins (issue 37)
    market.open_round(1, price="2.5", rewards={"small": "-1.25"}, k=5, b=5)
    choice = back.step()
    assert choice is not None and choice.strategy is Strategy.JOIN
    renewed = back.ensure_registered()
    assert renewed.client_id == first.client_id and renewed.token != stale.token
    stored = json.loads((back.state_dir / "registration.json").read_text())
    assert stored == {"client_id": first.client_id, "token": renewed.token}
    decisions = in_transaction(market.app.state.sessions, lambda s: rounds.decisions(s, 1))
    assert decisions.participants == {"small": [first.client_id]}
    clients = market.operator("GET", "/v1/clients").json()["items"]
    assert [c["id"] for c in clients] == [first.client_id]  # no second registration


def test_a_running_agent_whose_token_expired_offline_renews_it_with_its_node_key(
    market: Market, make_agent: Callable[..., Agent]
) -> None:
    """The agent kept running while the market was out of reach past the expiry: the next
    step's renewal is refused (401), and it renews with the node key instead."""
    agent = make_agent("pi-offline", "small", 50, "0.5", uses=1)
    agent.step()
    first = agent.ensure_registered()
    agent._registration = _expire_token(market, agent)
    agent.settings.token_renew_before_s = 10 * 365 * 86_400  # due: it tries POST /v1/me/token
    agent.step()
    renewed = agent.ensure_registered()
    assert renewed.client_id == first.client_id
    assert agent.market.with_token(renewed.token).me().id == first.client_id


def test_a_registration_challenge_does_not_renew_a_token(
    market: Market, make_agent: Callable[..., Agent]
) -> None:
    """Challenges carry their purpose: one issued to register a key, signed by the right key,
    is refused by the renewal route."""
    agent = make_agent("pi-purpose", "small", 50, "0.5")
    agent.step()
    reg = agent.ensure_registered()
    with MarketClient(market.url, token=reg.token) as me:
        issued = me._call(NodeKeyChallenge, "POST", "/v1/me/node-key/challenge")
    body = {
        "challenge": issued.challenge,
        "signature": sign_challenge(agent.settings.node_key_path(), issued.challenge),
    }
    r = httpx.post(f"{market.url}/v1/clients/{reg.client_id}/token/node-key", json=body, timeout=10)
    assert r.status_code == 401 and "token/challenge" in r.text


def test_an_image_without_task_files_checks_its_data_against_the_markets_task(
    market: Market,
    make_agent: Callable[..., Agent],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The edge image ships no task files (issue 36): the agent reads the digits task the
    operator stored (``GET /v1/tasks/digits`` with the device's own token) and checks its mounted
    folder against it: 300 digits samples fit its D = 300, Fashion-MNIST-shaped ones do not."""
    import numpy as np

    import mots.tasks.task_file as task_file

    digits = task_file.inline_task_text(task_file.SHIPPED_DIR / "digits.yaml")
    assert market.operator("POST", "/v1/tasks", json={"content": digits}).status_code == 201
    monkeypatch.setattr(task_file, "SHIPPED_DIR", tmp_path / "no-task-files")
    agent = make_agent("pi-07", "type-3", 300, "3.0")
    token = agent.market.with_token(agent.ensure_registered().token)
    for side, fits in ((8, True), (28, False)):
        folder = tmp_path / f"digits-{side}"
        folder.mkdir()
        x = np.zeros((300, 1, side, side), np.uint8)
        np.savez(folder / "d.npz", x=x, y=np.arange(300, dtype=np.int64) % 10)
        agent.data, agent.task = {"digits": str(folder)}, "digits"
        problem = agent.data_problem(token)
        assert (problem is None) is fits, problem
    assert "the task expects [1, 8, 8]" in str(problem)


def test_one_device_takes_part_in_two_tasks_as_a_client_of_each(
    market: Market, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A device with a code per task (``code`` for fashion-mnist, ``code.digits`` beside it) is
    one client in each task: each registers with its task's code, both register the device's one
    SuperNode key, and polled in turn (run_agents) each joins its own task's round, both rounds
    collecting at once. A task the device has no code for is logged once and left alone."""
    import mots.tasks.task_file as task_file
    from edge.agent.runner import run_agents

    digits = task_file.inline_task_text(task_file.SHIPPED_DIR / "digits.yaml")
    assert market.operator("POST", "/v1/tasks", json={"content": digits}).status_code == 201
    codes = tmp_path / "enrolment"
    codes.mkdir()
    (codes / "code").write_text(market.enrol("type-1", 50, "0.5") + "\n")
    r = market.operator(
        "POST", "/v1/enrolments",
        json={"type_name": "type-1", "data_size": 50, "cost": "0.5", "task": "digits"},
    )  # fmt: skip
    assert r.status_code == 201, r.text
    (codes / "code.digits").write_text(r.json()["code"] + "\n")
    settings = AgentSettings(
        client_type="type-1", data_size=50, cost=Decimal("0.5"), client_name="pi-both",
        MOTS_UTILITY=UTILITY, market_url=market.url, enrolment_code_file=codes / "code",
        state_dir=tmp_path / "pi-both", poll_interval_s=0.05,
    )  # fmt: skip
    with MarketClient(market.url) as client:
        agents = [Agent(settings, client, task=t) for t in ("fashion-mnist", "digits", "other")]
        caplog.set_level(logging.WARNING, logger="edge.agent")
        run_agents(agents, max_steps=2, sleep=lambda _: None)  # registers; no round yet
        regs = {a.task: a.ensure_registered() for a in agents[:2]}
        assert regs["fashion-mnist"].client_id != regs["digits"].client_id
        for task, reg in regs.items():
            me = client.with_token(reg.token).me()
            assert me.task == task and me.node_key_sha256 is not None
            r = market.operator(
                "POST", "/v1/deposits", json={"client_id": reg.client_id, "amount": "1.25"},
                headers={"Idempotency-Key": f"fund-both-{task}"},
            )  # fmt: skip
            assert r.status_code == 201, r.text
        keys = {client.with_token(r.token).me().node_key_sha256 for r in regs.values()}
        assert len(keys) == 1  # one device, one SuperNode key
        for round_id, task in ((1, "fashion-mnist"), (2, "digits")):
            payload = OpenRoundPayload(
                round_id=round_id, mechanism="swan_robust", price=Decimal("2.5"),
                rewards={"type-1": Decimal("-1.25")}, target_participants={"type-1": 5},
                target_buyers={"type-1": 5}, epsilon=0.6, welfare=10.0,
                incentive_cost=Decimal(0), task=task,
            )  # fmt: skip
            in_transaction(market.app.state.sessions, lambda s, p=payload: rounds.open_round(s, p))
        run_agents(agents, max_steps=2, sleep=lambda _: None)
    for round_id, task in ((1, "fashion-mnist"), (2, "digits")):
        got = in_transaction(
            market.app.state.sessions, lambda s, i=round_id: rounds.decisions(s, i)
        )
        assert got.participants == {"type-1": [regs[task].client_id]}, task
    assert json.loads((agents[1].state_dir / "decision.json").read_text())["round_id"] == 2
    assert agents[1].state_dir == settings.state_dir / "tasks" / "digits"
    assert (settings.state_dir / "heartbeat").is_file()
    skipped = [r.getMessage() for r in caplog.records if "task other" in r.getMessage()]
    assert len(skipped) == 1 and "code.other" in skipped[0], skipped
