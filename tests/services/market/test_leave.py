"""A client leaves the market (DELETE /v1/me): out of the rounds that open afterwards, no more
declaring or buying, its wallet and entries still readable with the same token."""

from __future__ import annotations

from fastapi.testclient import TestClient

from mots.platform.db import in_transaction
from services.market import rounds
from services.market.models import MarketRound
from tests.services.market.conftest import priced_population


def _population(market: TestClient) -> dict[str, list[int]]:
    return priced_population(market)


def test_a_client_that_leaves_is_out_of_the_next_round_and_reads_its_wallet(
    market: TestClient, register, fund, open_round
) -> None:
    """Leaving is idempotent; the next round neither prices the client nor waits for it, it
    cannot declare, and its balance and entries stay readable."""
    stay, go = register(name="stay"), register(name="go")
    fund(go["id"], "7")
    assert _population(market) == {"small": [stay["id"], go["id"]]}
    r = market.delete("/v1/me", headers=go["auth"])
    assert r.status_code == 200 and r.json()["status"] == "left"
    assert market.delete("/v1/me", headers=go["auth"]).json()["status"] == "left"
    assert _population(market) == {"small": [stay["id"]]}
    open_round(rewards={"small": "1.0", "large": "4.0"})  # a payout: joining needs no wallet
    with market.app.state.sessions() as session:
        assert session.get(MarketRound, 1).population == 1  # the round waits for one client
    refused = market.put("/v1/rounds/1/decision", json={"strategy": "join"}, headers=go["auth"])
    assert refused.status_code == 403
    assert (
        market.put(
            "/v1/rounds/1/decision", json={"strategy": "join"}, headers=stay["auth"]
        ).status_code
        == 200
    )
    balance = market.get("/v1/me/balance", headers=go["auth"])
    assert balance.status_code == 200 and balance.json()["balance"] == "7.000000"
    assert market.get("/v1/me/entries", headers=go["auth"]).status_code == 200
    assert market.get("/v1/me", headers=go["auth"]).json()["status"] == "left"
    assert in_transaction(market.app.state.sessions, lambda s: rounds.population(s, 99)).types


def test_a_departed_clients_refusal_says_what_it_may_still_do(
    market: TestClient, register, open_round
) -> None:
    """Issue 40: the refusal of a client that left says it has left (not "is left") and that it
    may still download, which it may; it never says the client may not download."""
    go = register(name="go")
    assert market.delete("/v1/me", headers=go["auth"]).status_code == 200
    open_round()
    refused = market.put("/v1/rounds/1/decision", json={"strategy": "join"}, headers=go["auth"])
    assert refused.status_code == 403, refused.text
    detail = refused.json()["detail"]
    assert f"client {go['id']} has left the market" in detail, detail
    assert "is left" not in detail and "declare, buy or download" not in detail
    assert "download the models it bought or trained" in detail
