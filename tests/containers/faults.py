"""The network fault round (`make deploy-test`'s `network` part): the compose stack of
tests/containers/compose.py with every edge container on the compose edge network (each its own
address), every edge link shaped like a Pi on Wi-Fi (tests/containers/network.py), and three
faults, one market round each:

- ``edge_cut``: 3 SuperNodes cut off (every packet dropped, the interface up) once training has
  started, restored after ``CUT_S``;
- ``superlink_restart``: the SuperLink container restarted while it trains;
- ``market_restart``: the market API container restarted while ``BUYERS`` buyers buy the round,
  each retrying with its one Idempotency-Key until it gets an answer;
- ``after_superlink_restart``: no fault, the round after the SuperLink's restart: the federation
  must have recovered, so this round must be **published** (the first runs found it was not: its
  Flower run failed at once and the SuperNodes, reconnected, were sent no task).

Each round must end by its rule (published, or settled by rule with the buyers refunded) within
its deadline, and the ledger must show nothing lost (every acknowledged purchase booked, the round's
pool empty after settlement, the books balanced) and nothing paid twice (at most one purchase, one
reward or charge and one refund per client and round). tests/containers/compose.faults.yaml adds
three edge devices (7 in all: 3 cut leave 4, over the policy's minimum share of 0.5) and a
training long enough to be cut in the middle of.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

from mots.client.errors import MarketError
from mots.client.market import MarketClient, new_idempotency_key
from tests.containers import compose, network, podman
from tests.containers import round as rnd
from tests.docker.images import IMAGES

OVERRIDE = Path(__file__).with_name("compose.faults.yaml")
EXTRA_EDGE = tuple(f"{kind}-{d}" for d in ("1-2", "2-1", "3-1") for kind in ("supernode", "agent"))
EDGES = (*compose.EDGE, *EXTRA_EDGE)
CUT = ("supernode-1-0", "supernode-2-0", "supernode-3-1")
CUT_S = 30.0
BUYERS = 12
ROUND_TIMEOUT_S = 600.0


def up(*services: str, env_file: Path, overrides: tuple[Path, ...] = (OVERRIDE,)) -> None:
    """``podman-compose up -d`` on the shipped file, the check's override and ``overrides``."""
    compose.compose("up", "-d", *services, env_file=env_file, files=(*compose.FILES, *overrides))


def wait_state(stack: rnd.Stack, round_id: int, want: str, timeout_s: float) -> dict[str, Any]:
    """Poll the round until it is in state ``want`` with a FedAvg round under way (training), or
    just in ``want``; raise when it ends first or the time runs out."""
    deadline = time.monotonic() + timeout_s
    with stack.orch() as orch:
        while True:
            body: dict[str, Any] = orch.get(f"/v1/rounds/{round_id}").json()
            progress = body.get("training_progress") or {}
            if body["state"] == want and (want != "training" or progress.get("in_progress")):
                return body
            if body["state"] in rnd.TERMINAL or time.monotonic() > deadline:
                raise RuntimeError(f"round {round_id} never {want}: {body['state']}")
            time.sleep(0.5)


def _pages(op: MarketClient, round_id: int) -> list[Any]:
    """Every ledger transaction of the round (operator)."""
    out: list[Any] = []
    cursor: str | None = None
    while True:
        page = op.transactions(limit=500, cursor=cursor, round_id=round_id)
        out.extend(page.items)
        if page.next is None:
            return out
        cursor = page.next


def audit(stack: rnd.Stack, round_id: int, acknowledged: list[int]) -> dict[str, Any]:
    """``lost``: acknowledged purchases (transaction ids) missing from the ledger, plus money left
    in the round's pool accounts after it ended; ``paid_twice``: (kind, client) pairs booked more
    than once for the round (purchase, reward/charge, refund); with the books' own check."""
    op = stack.operator()
    try:
        txs = _pages(op, round_id)
        pools = [a for a in op.accounts() if a.name.startswith(f"round:{round_id}:pool")]
    finally:
        op.close()
    kinds = {"purchase": "purchase", "reward": "payout", "charge": "payout", "refund": "refund"}
    per = Counter((kinds[t.kind], t.client_id) for t in txs if t.kind in kinds)
    booked = {t.id for t in txs if t.kind == "purchase"}
    missing = [t for t in acknowledged if t not in booked]
    stuck = [a.name for a in pools if Decimal(a.balance) != 0]
    books = rnd.ledger(stack)
    return {
        "lost": len(missing) + len(stuck) + (0 if books["balanced"] else 1),
        "paid_twice": sum(n > 1 for n in per.values()),
        "missing_purchases": missing,
        "pool_not_empty": stuck,
        "ledger_balanced": books["balanced"],
        "bookings": {f"{k}:{c}": n for (k, c), n in sorted(per.items(), key=str)},
    }


def _buy_until_answered(
    client: MarketClient, round_id: int, out: list[Any], errors: list[str]
) -> None:
    """One buyer: one Idempotency-Key, retried through the market's restart until answered."""
    key = new_idempotency_key()
    deadline = time.monotonic() + 300  # the market back and healthy, at this machine's load
    while time.monotonic() < deadline:
        try:
            out.append(client.buy(round_id, idempotency_key=key))
            return
        except MarketError as exc:
            if exc.status is not None and exc.status < 500:
                errors.append(f"{exc.status}: {exc}"[:200])  # refused by rule (e.g. round closed)
                return
        except Exception as exc:  # connection refused/reset while the container restarts
            errors.append(type(exc).__name__)
        time.sleep(0.5)
    errors.append("no answer in 300 s")


def _one_round(stack: rnd.Stack, code: str, fault: str, inject: Any) -> dict[str, Any]:
    """Open a round, one buyer buys, ``inject(round_id)`` once training runs; the outcome."""
    buyer = rnd.buyer(stack, code, name=f"buyer-{fault}")
    round_id = rnd.open_round(stack)
    bought = rnd.buy_and_verify(buyer, round_id, Path("/dev/null"))["purchase"]
    wait_state(stack, round_id, "training", ROUND_TIMEOUT_S)
    facts = inject(round_id)
    end = rnd.wait_round(stack, round_id, ROUND_TIMEOUT_S)
    ack = [int(bought["transaction_id"])]
    buyer.close()
    return {"round_id": round_id, "end": end, "facts": facts, "acknowledged": ack}


def edge_cut(stack: rnd.Stack, code: str, link: network.Netem) -> dict[str, Any]:
    """3 SuperNodes cut off mid-training, restored after CUT_S."""

    def inject(_: int) -> dict[str, Any]:
        for s in CUT:
            network.cut(compose.container(s))
        time.sleep(CUT_S)
        for s in CUT:
            network.restore(compose.container(s), link)
        return {"cut": list(CUT), "cut_s": CUT_S}

    return _one_round(stack, code, "edge-cut", inject)


def superlink_restart(stack: rnd.Stack, code: str) -> dict[str, Any]:
    """The SuperLink container restarted while it trains."""

    def inject(_: int) -> dict[str, Any]:
        started = time.monotonic()
        podman.podman("restart", "--time", "5", compose.container("superlink"), timeout=120)
        return {"restart_s": round(time.monotonic() - started, 1)}

    return _one_round(stack, code, "superlink-restart", inject)


def after_superlink_restart(stack: rnd.Stack, code: str) -> dict[str, Any]:
    """A round with no fault, once the restarted SuperLink is healthy again."""
    compose.wait_healthy(("superlink",), 300)
    return _one_round(stack, code, "after-superlink-restart", lambda _: {})


# Rows that must end published, not merely by rule.
MUST_PUBLISH = frozenset({"after_superlink_restart"})


def market_restart(stack: rnd.Stack, code: str) -> dict[str, Any]:
    """BUYERS buyers buy while the market container restarts (collection window)."""
    buyers = [rnd.buyer(stack, code, name=f"load-{i}") for i in range(BUYERS)]
    round_id = rnd.open_round(stack)
    buyers[0].wait_for_quote(round_id, timeout_s=300, poll_s=0.5)
    acks: list[Any] = []
    errors: list[str] = []
    threads = [threading.Thread(target=_buy_until_answered, args=(b, round_id, acks, errors))
               for b in buyers]  # fmt: skip
    restart = threading.Thread(
        target=podman.podman, args=("restart", "--time", "2", compose.container("market"))
    )
    for i, t in enumerate(threads):
        if i == BUYERS // 3:  # a third of the load sent, the rest while the market restarts
            restart.start()
        t.start()
    for t in (*threads, restart):
        t.join()
    end = rnd.wait_round(stack, round_id, ROUND_TIMEOUT_S)
    for b in buyers:
        b.close()
    facts = {"buyers": BUYERS, "answered": len(acks), "errors": Counter(errors)}
    ack = [p.transaction_id for p in acks]
    return {"round_id": round_id, "end": end, "facts": facts, "acknowledged": ack}


def outcome(kind: str, stack: rnd.Stack, run: dict[str, Any]) -> dict[str, Any]:
    """The report's row for one fault: how the round ended and what the ledger says."""
    end = run["end"]
    books = audit(stack, run["round_id"], run["acknowledged"])
    return {
        "kind": kind,
        "outcome": end["state"] + (f" ({end['rule']})" if end.get("rule") else ""),
        "lost": books["lost"],
        "paid_twice": books["paid_twice"],
        "round_id": run["round_id"],
        "fedavg_seconds": end.get("fedavg_seconds"),
        "summary": end.get("summary"),
        "facts": run["facts"],
        "ledger": books,
    }


def run_faults(link: network.Netem = network.PI_WIFI) -> dict[str, Any]:
    """The stack up, the edges shaped, the three fault rounds; everything removed at the end."""
    from tests.containers import images, standins

    standins.build_standins()
    for name in IMAGES:
        if not podman.image_exists(images.image_ref(name)):
            images.build(name)
    env_file, cli = compose.prepare()
    try:
        up(*compose.DATA_TIER, env_file=env_file)
        compose.wait_healthy(compose.DATA_TIER, 120)
        up(*compose.PLATFORM, env_file=env_file)
        compose.wait_healthy(compose.PLATFORM, 300)
        compose.enrol(cli)
        up(*EDGES, env_file=env_file)
        compose.wait_healthy(tuple(s for s in EDGES if s.startswith("agent")), 600)
        # the devices' SuperNodes and agents (their node-exporters, monitoring only, unshaped)
        shaped = {s: network.shape(compose.container(s), link)
                  for s in EDGES if not s.startswith("node-exporter")}  # fmt: skip
        stack = rnd.Stack(cli["MOTS_MARKET_URL"], cli["MOTS_ORCHESTRATION_URL"],
                          cli["MOTS_OPERATOR_TOKEN"])  # fmt: skip
        code = rnd.enrol(stack, {"type-1": rnd.TYPES["type-1"]}, uses=BUYERS + 6)["type-1"]
        faults = []
        for kind, go in (
            # the SuperLink's restart last: the first run found the federation did not recover
            # from it within the next round, which would have been charged to the next fault
            ("edge_cut", lambda: edge_cut(stack, code, link)),
            ("market_restart", lambda: market_restart(stack, code)),
            ("superlink_restart", lambda: superlink_restart(stack, code)),
            ("after_superlink_restart", lambda: after_superlink_restart(stack, code)),
        ):
            try:
                faults.append(outcome(kind, stack, go()))
            except Exception as exc:  # a fault that breaks the round is its outcome
                faults.append({"kind": kind, "outcome": f"error: {type(exc).__name__}: {exc}"[:600],
                               "lost": None, "paid_twice": None})  # fmt: skip
        addresses = {s: _address(compose.container(s)) for s in EDGES}
        return {"shaped": len(shaped), "addresses": addresses, "faults": faults}
    finally:
        compose.save_logs()  # out/deploy/compose/logs/: a fault round's diagnosis
        compose.down()


def _address(container: str) -> str:
    """The container's address on its network."""
    fmt = "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}"
    return podman.podman("inspect", "--format", fmt, container).stdout.strip()


def verdict(faults: list[dict[str, Any]]) -> dict[str, Any]:
    """``{"failed": [...]}`` naming each fault whose round did not end by rule (or, for
    MUST_PUBLISH, was not published) or whose ledger lost or double-paid anything; ``{}`` when
    every fault held."""
    bad = [
        f["kind"]
        for f in faults
        if f["lost"] != 0
        or f["paid_twice"] != 0
        or not str(f["outcome"]).startswith(
            "published" if f["kind"] in MUST_PUBLISH else rnd.TERMINAL
        )
    ]
    return {"failed": bad} if bad else {}
