"""The market per task (issue 36): a participant of one task cannot act in another's round
(declare, buy, join the trained coalition, download the model), each task has its own types and
its own collecting round at the same time, and money stays one ledger, exact across tasks. The
attack runs against the real market on SQLite and PostgreSQL."""

from __future__ import annotations

import hashlib
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from mots.platform.contracts import SettlePayload
from mots.platform.db import in_transaction
from mots.tasks.task_file import SHIPPED_DIR
from services.market import rounds
from services.market.models import Account, Decision, Purchase
from tests.services.market.conftest import OPERATOR, open_round_payload


def _enrolled(market: TestClient, name: str, task: str | None, data_size: int, cost: str) -> Any:
    """A client registered with a code the operator issued for ``task`` (None: names none)."""
    body: dict[str, Any] = {"type_name": "type-1", "data_size": data_size, "cost": cost}
    if task is not None:
        body["task"] = task
    issued = market.post("/v1/enrolments", json=body, headers=OPERATOR)
    assert issued.status_code == 201, issued.text
    assert issued.json()["task"] == (task or "fashion-mnist")
    r = market.post("/v1/clients", json={"name": name, "enrolment_code": issued.json()["code"]})
    assert r.status_code == 201, r.text
    out: dict[str, Any] = r.json()
    out["auth"] = {"Authorization": f"Bearer {out['token']}"}
    return out


def _buy(market: TestClient, client: dict[str, Any], round_id: int, key: str) -> Any:
    return market.post(
        "/v1/purchases",
        json={"round_id": round_id},
        headers={**client["auth"], "Idempotency-Key": key},
    )


def _purchases(task: str) -> float:
    """``mots_purchases_total{task}`` of this process (0 before the task's first sale)."""
    from prometheus_client import REGISTRY

    return REGISTRY.get_sample_value("mots_purchases_total", {"task": task}) or 0.0


def _open(market: TestClient, round_id: int, task: str) -> None:
    payload = open_round_payload(round_id, price="1.5", rewards={"type-1": "0.5"})
    payload = payload.model_copy(update={"task": task})
    in_transaction(market.app.state.sessions, lambda s: rounds.open_round(s, payload))


def _publish(market: TestClient, round_id: int, participants: list[int], artifact: Path) -> None:
    payload = SettlePayload(
        round_id=round_id,
        rewards={"type-1": Decimal("0.5")},
        participants=participants,
        artifact_path=str(artifact),
        artifact_sha256=hashlib.sha256(artifact.read_bytes()).hexdigest(),
    )
    in_transaction(market.app.state.sessions, lambda s: rounds.settle_round(s, payload))
    in_transaction(market.app.state.sessions, lambda s: rounds.publish(s, round_id))


@pytest.fixture
def two_tasks(market: TestClient, fund) -> tuple[dict[str, Any], dict[str, Any]]:
    """Digits stored beside the default task; a fashion-mnist client and a digits client, both
    of a type named type-1 with the sizes and costs of their own task, funded; a round of each
    collecting at once (round 1 fashion-mnist, round 2 digits)."""
    content = (SHIPPED_DIR / "digits.yaml").read_text(encoding="utf-8")
    assert market.post("/v1/tasks", json={"content": content}, headers=OPERATOR).status_code == 201
    fashion = _enrolled(market, "pi-fashion", None, 50, "0.5")
    digits = _enrolled(market, "pi-digits", "digits", 20, "0.2")
    assert (fashion["task"], digits["task"]) == ("fashion-mnist", "digits")
    for c in (fashion, digits):
        fund(c["id"], "10")
    _open(market, 1, "fashion-mnist")
    _open(market, 2, "digits")
    return fashion, digits


def test_a_participant_of_one_task_cannot_act_in_another(
    market: TestClient, two_tasks: tuple[dict[str, Any], dict[str, Any]], tmp_path: Path
) -> None:
    """The attack: the digits client declares, joins and buys in the fashion-mnist round, and
    downloads its model; the fashion-mnist client does the same in the digits round. Every one
    is refused 403 naming the field; neither counts in the other's round (population, decisions
    at the close), and each still acts in its own round."""
    fashion, digits = two_tasks
    for client, other in ((digits, 1), (fashion, 2)):
        for strategy in ("join", "buy", "abstain"):
            r = market.put(
                f"/v1/rounds/{other}/decision", json={"strategy": strategy}, headers=client["auth"]
            )
            assert r.status_code == 403, r.text
            assert r.json()["detail"].startswith("client_id: ") and "task" in r.json()["detail"]
        bought = _buy(market, client, other, f"cross-task-{other}")
        assert bought.status_code == 403, bought.text
        assert market.get(f"/v1/rounds/{other}/quote", headers=client["auth"]).status_code == 200
    assert market.get("/v1/quote", headers=fashion["auth"]).json()["round_id"] == 1
    assert market.get("/v1/quote", headers=digits["auth"]).json()["round_id"] == 2

    assert market.put("/v1/rounds/1/decision", json={"strategy": "join"}, headers=fashion["auth"])
    assert _buy(market, digits, 2, "own-task-2").status_code == 201
    with market.app.state.sessions() as session:
        assert rounds.members_of(session, 1) == {"type-1": [fashion["id"]]}
        assert rounds.members_of(session, 2) == {"type-1": [digits["id"]]}
    closed = in_transaction(market.app.state.sessions, lambda s: rounds.close_round(s, 1))
    assert closed.participants == {"type-1": [fashion["id"]]} and closed.buyers == {}

    artifact = tmp_path / "round-1.pt"
    artifact.write_bytes(b"fashion weights")
    _publish(market, 1, [fashion["id"]], artifact)
    assert market.get("/v1/rounds/1/model", headers=fashion["auth"]).status_code == 200
    stolen = market.get("/v1/rounds/1/model", headers=digits["auth"])
    assert stolen.status_code == 403 and stolen.json()["detail"].startswith("round_id: ")
    assert market.get("/v1/rounds/1/model/info", headers=digits["auth"]).status_code == 403


def test_money_stays_one_ledger_across_tasks(
    market: TestClient, two_tasks: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    """Each client pays from its one wallet in its own task's round; the rows name the round's
    task, the pools theirs, wallets none; the ledger check is exact over both tasks."""
    fashion, digits = two_tasks
    sold = {t: _purchases(t) for t in ("fashion-mnist", "digits")}
    assert _buy(market, fashion, 1, "pay-fashion-1").status_code == 201
    assert _buy(market, digits, 2, "pay-digits-02").status_code == 201
    assert _buy(market, digits, 2, "pay-digits-02").status_code == 201  # a replay: not counted
    # mots_purchases_total counts each sale under its round's task
    assert {t: _purchases(t) - n for t, n in sold.items()} == {"fashion-mnist": 1, "digits": 1}
    for c in (fashion, digits):
        balance = market.get("/v1/me/balance", headers=c["auth"]).json()["balance"]
        assert Decimal(balance) == Decimal("8.5")
    check = market.get("/v1/ledger/check", headers=OPERATOR).json()
    assert (check["unbalanced_transactions"], check["mismatched_accounts"]) == (0, 0)
    assert Decimal(check["total"]) == 0
    with market.app.state.sessions() as session:
        assert dict(session.execute(select(Purchase.round_id, Purchase.task)).all()) == {
            1: "fashion-mnist",
            2: "digits",
        }
        assert dict(session.execute(select(Decision.round_id, Decision.task)).all()) == {
            1: "fashion-mnist",
            2: "digits",
        }
        pools = session.execute(
            select(Account.name, Account.task).where(Account.category == "round_pools")
        ).all()
        wallets = session.scalars(select(Account.task).where(Account.category == "wallets"))
        assert set(wallets) == {None}
    assert {task for name, task in pools if name.startswith("round:1:")} == {"fashion-mnist"}
    assert {task for name, task in pools if name.startswith("round:2:")} == {"digits"}


def test_enrolments_and_rounds_only_for_open_tasks(market: TestClient) -> None:
    """A code for a task not stored is a 404 naming task; for a retired task a 409; a second
    collecting round of one task is refused while another task's round collects."""
    r = market.post(
        "/v1/enrolments",
        json={"type_name": "t", "data_size": 5, "cost": "1", "task": "cifar"},
        headers=OPERATOR,
    )
    assert r.status_code == 404 and r.json()["detail"].startswith("task: ")
    content = (SHIPPED_DIR / "digits.yaml").read_text(encoding="utf-8")
    market.post("/v1/tasks", json={"content": content}, headers=OPERATOR)
    _open(market, 1, "digits")
    _open(market, 2, "fashion-mnist")
    with pytest.raises(rounds.RoundError, match="task 'digits'"):
        _open(market, 3, "digits")
    assert market.delete("/v1/tasks/digits", headers=OPERATOR).status_code == 200
    r = market.post(
        "/v1/enrolments",
        json={"type_name": "t", "data_size": 5, "cost": "1", "task": "digits"},
        headers=OPERATOR,
    )
    assert r.status_code == 409 and "retired" in r.json()["detail"]
    with pytest.raises(rounds.RoundError, match="retired"):
        _open(market, 4, "digits")


def test_a_rounds_population_is_its_tasks_and_outlives_another_tasks_pricing(
    market: TestClient,
) -> None:
    """market.population for a digits round snapshots digits' clients only, and a fashion-mnist
    round priced before the digits round opens leaves that snapshot alone (one round in flight
    per task, issue 36); a task the market does not store, or has retired, is refused naming
    ``task`` and snapshots nothing."""
    from services.market.errors import Refusal
    from services.market.models import RoundMember

    content = (SHIPPED_DIR / "digits.yaml").read_text(encoding="utf-8")
    assert market.post("/v1/tasks", json={"content": content}, headers=OPERATOR).status_code == 201
    fashion = _enrolled(market, "pi-fashion", None, 50, "0.5")
    digits = _enrolled(market, "pi-digits", "digits", 20, "0.2")
    sessions = market.app.state.sessions

    def members(round_id: int) -> set[int]:
        with sessions() as session:
            query = select(RoundMember.client_id).where(RoundMember.round_id == round_id)
            return set(session.scalars(query))

    priced = in_transaction(sessions, lambda s: rounds.population(s, 7, "digits"))
    assert [(t.name, t.data_size, t.count) for t in priced.types] == [("type-1", 20, 1)]
    in_transaction(sessions, lambda s: rounds.population(s, 8, "fashion-mnist"))
    assert (members(7), members(8)) == ({digits["id"]}, {fashion["id"]})
    for task, code in (("no-such-task", "404"), ("digits", "409")):
        if code == "409":
            assert market.delete("/v1/tasks/digits", headers=OPERATOR).status_code == 200
        with pytest.raises(Refusal, match=r"^task: ") as refused:
            in_transaction(sessions, lambda s, t=task: rounds.population(s, 9, t))
        assert task in refused.value.detail
        assert members(9) == set()
