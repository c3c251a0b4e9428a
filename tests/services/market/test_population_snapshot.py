"""The market owns a round's membership (issue 25, item 1): the population it reports for
pricing (``market.population`` for a round id) is snapshotted there, and ``market.open_round``
admits exactly that snapshot, less any client deactivated in between. A registration or an
approval racing the open is not admitted (it was not priced), and a replayed population call
reports the same snapshot."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select

from mots.platform.db import in_transaction
from services.market import rounds
from services.market.models import RoundMember
from tests.services.market.conftest import OPERATOR, open_round_payload


def _members(market: TestClient, round_id: int) -> set[int]:
    with market.app.state.sessions() as session:
        return set(
            session.scalars(select(RoundMember.client_id).where(RoundMember.round_id == round_id))
        )


def test_admitted_members_are_the_priced_population(
    make_market: Callable[..., Any],
) -> None:
    """Priced: a, b, c (and a pending p, not priced). Between pricing and the open, d registers,
    p is approved and c is revoked. The round admits {a, b}: the priced set less c; the counts
    priced are the snapshot's, and a replayed population reports the same counts."""
    with make_market(open_registration=True) as market:

        def register(name: str, type_name: str = "small", size: int = 50) -> dict[str, Any]:
            body = {"name": name, "type_name": type_name, "data_size": size, "cost": "0.5"}
            r = market.post("/v1/clients", json=body, headers=OPERATOR)
            assert r.status_code == 201, r.text
            out: dict[str, Any] = r.json()
            return out

        a, b, c = register("a"), register("b", "large", 500), register("c")
        r = market.post(
            "/v1/clients", json={"name": "p", "type_name": "small", "data_size": 50, "cost": "0.5"}
        )
        assert r.status_code == 201 and r.json()["status"] == "pending", r.text
        p = r.json()
        sessions = market.app.state.sessions
        priced = in_transaction(sessions, lambda s: rounds.population(s, 1))
        assert [(t.name, t.count) for t in priced.types] == [("small", 2), ("large", 1)]
        d = register("d")  # registration racing the open
        assert market.post(f"/v1/clients/{p['id']}/approve", headers=OPERATOR).status_code == 200
        assert market.delete(f"/v1/clients/{c['id']}", headers=OPERATOR).status_code == 200
        again = in_transaction(sessions, lambda s: rounds.population(s, 1))  # a replayed call
        assert again == priced
        in_transaction(sessions, lambda s: rounds.open_round(s, open_round_payload()))
        assert _members(market, 1) == {a["id"], b["id"]}
        assert d["id"] not in _members(market, 1) and p["id"] not in _members(market, 1)
        with sessions() as session:
            assert rounds.progress(session, 1).registered == 2


def test_the_close_counts_the_members_decisions_only(market: TestClient, register) -> None:  # type: ignore[no-untyped-def]
    """A decision row of a client outside the round (written past admission, e.g. by an API
    process of an older release) is not in K or B when the round closes: the market, which owns
    the membership, applies it (the orchestration keeps no member list to filter with)."""
    from services.market.models import Decision

    a = register(name="a", type_name="large", data_size=500)
    sessions = market.app.state.sessions
    in_transaction(sessions, lambda s: rounds.population(s, 1))
    in_transaction(sessions, lambda s: rounds.open_round(s, open_round_payload()))
    late = register(name="late", type_name="large", data_size=500)

    def decide(s: Any) -> None:
        s.add(Decision(round_id=1, client_id=a["id"], strategy="join"))
        s.add(Decision(round_id=1, client_id=late["id"], strategy="join"))

    in_transaction(sessions, decide)
    final = in_transaction(sessions, lambda s: rounds.close_round(s, 1))
    assert final.participants == {"large": [a["id"]]}


def test_two_workers_pricing_one_round_write_one_snapshot(market: TestClient, register) -> None:  # type: ignore[no-untyped-def]
    """Two market workers answer ``market.population`` for one round at once (a redelivered
    task beside the first): the second's transaction starts while the first has written the
    snapshot but not committed, so both see no snapshot and both insert. The second's insert
    waits on the first (PostgreSQL's unique index, SQLite's write lock), fails (a duplicate key,
    a stale snapshot), and its retried transaction reads the first's snapshot back: both report
    one population, and the round's members are each active client once."""
    import threading

    clients = [register(name=f"c{i}", type_name="small", data_size=50) for i in range(4)]
    clients.append(register(name="big", type_name="large", data_size=500))
    sessions = market.app.state.sessions
    second: list[Any] = []
    started = threading.Event()

    def second_worker() -> None:
        def work(s: Any) -> Any:
            started.set()
            return rounds.population(s, 1)

        second.append(in_transaction(sessions, work))

    with sessions() as session, session.begin():
        first = rounds.population(session, 1)  # written, not committed
        worker = threading.Thread(target=second_worker)
        worker.start()
        assert started.wait(10)
        worker.join(0.5)  # the second worker is blocked on the first's write, not done
        assert worker.is_alive()
    worker.join(30)
    assert not worker.is_alive()
    assert second == [first]
    assert [(t.name, t.count) for t in first.types] == [("small", 4), ("large", 1)]
    with sessions() as session:
        rows = session.scalars(select(RoundMember.client_id).where(RoundMember.round_id == 1))
        members = list(rows)
    assert sorted(members) == sorted(c["id"] for c in clients)
