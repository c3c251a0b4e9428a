"""Attack: a client registered (or approved) after a round opened was not in the population the
round was priced for. It may not declare or buy in that round, and nothing it does may count
toward "everyone declared" (which would close the collection before the priced clients answered).
It takes part from the next round."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient

from mots.platform.db import in_transaction
from services.market import rounds
from services.market.models import MarketRound
from tests.services.market.conftest import OPERATOR, open_round_payload

PAYOUT = {"small": "1.0", "large": "4.0"}
"""A quote that pays both types: joining needs no wallet (a fee is held at join, issue 37)."""


def _progress(market: TestClient, round_id: int = 1) -> tuple[int, int]:
    with market.app.state.sessions() as session:
        p = rounds.progress(session, round_id)
        return p.registered, p.declared


def _declare(market: TestClient, who: dict[str, Any], strategy: str, round_id: int = 1) -> Any:
    return market.put(
        f"/v1/rounds/{round_id}/decision", json={"strategy": strategy}, headers=who["auth"]
    )


def _buy(market: TestClient, who: dict[str, Any], key: str, round_id: int = 1) -> Any:
    return market.post(
        "/v1/purchases",
        json={"round_id": round_id},
        headers={**who["auth"], "Idempotency-Key": key},
    )


def test_a_client_registered_after_the_round_opened_neither_declares_nor_counts(
    market: TestClient, register, fund, open_round
) -> None:
    """Two priced clients; a third registers after the opening and tries to join, abstain and
    buy: each refused with 403 naming the rule, the tally untouched, its wallet untouched; the
    priced clients still declare; the next round takes the late client."""
    a, b = register(name="a"), register(name="b")
    open_round(rewards=PAYOUT)
    late = register(name="late")
    fund(late["id"], "10")
    assert _progress(market) == (2, 0)
    for strategy in ("join", "abstain", "buy"):
        r = _declare(market, late, strategy)
        assert r.status_code == 403, r.text
        assert "population" in r.json()["detail"] and "round 1" in r.json()["detail"]
    r = _buy(market, late, "late-buy")
    assert r.status_code == 403, r.text
    assert "population" in r.json()["detail"]
    assert _progress(market) == (2, 0)  # nothing counted: the round still waits for a and b
    assert market.get("/v1/me/balance", headers=late["auth"]).json()["balance"] == "10.000000"
    assert _declare(market, a, "join").status_code == 200
    assert _progress(market) == (2, 1)
    assert _declare(market, b, "abstain").status_code == 200
    assert _progress(market) == (2, 2)
    with market.app.state.sessions() as session:
        rounds.close_round(session, 1)
        session.commit()
    with market.app.state.sessions() as session:  # closed at once: SQLite's write lock is freed
        closed = session.get(MarketRound, 1)
        assert closed is not None and closed.state == "training"
    open_round(round_id=2, rewards=PAYOUT)
    assert _progress(market, 2) == (3, 0)
    assert _declare(market, late, "join", round_id=2).status_code == 200
    assert _progress(market, 2) == (3, 1)


def test_a_pending_client_approved_after_the_round_opened_waits_for_the_next(
    make_market: Callable[..., Any],
) -> None:
    """Self-registration (MOTS_OPEN_REGISTRATION): approved while a round collects, the client
    is active but not in that round's population (403, not counted)."""
    with make_market(open_registration=True) as market:
        a = market.post(
            "/v1/clients",
            json={"name": "a", "type_name": "small", "data_size": 50, "cost": "0.5"},
            headers=OPERATOR,
        ).json()
        a["auth"] = {"Authorization": f"Bearer {a['token']}"}
        r = market.post(
            "/v1/clients", json={"name": "p", "type_name": "small", "data_size": 50, "cost": "0.5"}
        )
        assert r.status_code == 201 and r.json()["status"] == "pending", r.text
        pending = r.json()
        pending["auth"] = {"Authorization": f"Bearer {pending['token']}"}
        payload = open_round_payload(rewards=PAYOUT)
        in_transaction(market.app.state.sessions, lambda s: rounds.open_round(s, payload))
        ok = market.post(f"/v1/clients/{pending['id']}/approve", headers=OPERATOR)
        assert ok.status_code == 200, ok.text
        r = _declare(market, pending, "join")
        assert r.status_code == 403, r.text
        assert "population" in r.json()["detail"]
        assert _progress(market) == (1, 0)
        assert _declare(market, a, "join").status_code == 200
        assert _progress(market) == (1, 1)
