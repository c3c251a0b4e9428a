"""Issue 40 item 4: a published round's model is sold after the round, at the round's price p*,
its money booked to the platform's subsidy account (docs/mechanisms.md §7.3), on the real
market app over SQLite and PostgreSQL (the PostgreSQL fast purchase path included)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select

from mots.client import MarketClient
from mots.platform.contracts import SettlePayload
from mots.platform.db import in_transaction
from services.market import rounds
from services.market.models import Decision
from tests.services.market.conftest import OPERATOR
from tests.services.market.test_sdk_against_market import LoseAnswers


def _buy(market: TestClient, who: dict[str, Any], round_id: int, key: str) -> Any:
    return market.post(
        "/v1/purchases",
        json={"round_id": round_id},
        headers={**who["auth"], "Idempotency-Key": f"late-sales-{key}"},
    )


def _published_round(market: TestClient, register, fund, open_round) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """Round 1 at p* = 2.5: one trainer, one in-round buyer; settled and published."""
    root = Path(market.app.state.settings.artifact_dir)
    (root / "model.pt").write_bytes(b"weights")
    trainer, buyer = register(name="t"), register(name="b")
    fund(buyer["id"], "10")
    open_round(price="2.5", rewards={"small": "2.5"})
    market.put("/v1/rounds/1/decision", json={"strategy": "join"}, headers=trainer["auth"])
    assert _buy(market, buyer, 1, "in-round").status_code == 201
    in_transaction(market.app.state.sessions, lambda s: rounds.close_round(s, 1))
    payload = SettlePayload(
        round_id=1,
        rewards={"small": Decimal("2.5")},
        participants=[trainer["id"]],
        artifact_path=str(root / "model.pt"),
        artifact_sha256="ab" * 32,
    )
    in_transaction(market.app.state.sessions, lambda s: rounds.settle_round(s, payload))
    in_transaction(market.app.state.sessions, lambda s: rounds.publish(s, 1))
    return {"trainer": trainer, "buyer": buyer}


def _balance(market: TestClient, category: str) -> Decimal:
    """The summed balance of a ledger category (GET /v1/ledger/check)."""
    r = market.get("/v1/ledger/check", headers=OPERATOR)
    assert r.status_code == 200, r.text
    return Decimal(r.json()["accounts"].get(category, "0"))


def test_a_late_buyer_pays_p_star_into_the_subsidy_account_and_downloads(
    market: TestClient, register, fund, open_round
) -> None:
    """A client registered after the round (not in its population) buys the published model at
    the round's price; the money goes wallet → platform:subsidy in one `late_purchase`
    transaction, the round's pool and its participants' payouts stay as settled, the ledger is
    exact, and the buyer may download. A retry with the same key returns the first answer."""
    _published_round(market, register, fund, open_round)
    subsidy_before = _balance(market, "platform_subsidy")
    late = register(name="late")
    fund(late["id"], "4")
    r = _buy(market, late, 1, "late-1")
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["price"] == "2.500000" and body["balance"] == "1.500000" and body["late"] is True
    assert _buy(market, late, 1, "late-1").json() == body  # replayed: charged once
    assert _balance(market, "platform_subsidy") - subsidy_before == Decimal("2.5")
    assert _balance(market, "round_pools") == 0
    txs = market.get(
        "/v1/ledger/transactions", params={"kind": "late_purchase"}, headers=OPERATOR
    ).json()["items"]
    assert len(txs) == 1 and txs[0]["round_id"] == 1
    check = market.get("/v1/ledger/check", headers=OPERATOR).json()
    assert check["unbalanced_transactions"] == 0 and check["mismatched_accounts"] == 0
    assert Decimal(check["total"]) == 0
    assert market.get("/v1/rounds/1/model", headers=late["auth"]).status_code == 200
    again = _buy(market, late, 1, "late-2")  # a second purchase under another key
    assert again.status_code == 409 and "already bought round 1" in again.text
    # the round's own figures are the settlement's: the late buyer is no decision in round 1
    with market.app.state.sessions() as session:
        assert late["id"] not in {d.client_id for d in session.scalars(select(Decision))}


def test_late_sales_refuse_with_the_reason(market: TestClient, register, fund, open_round) -> None:
    """402 without funds (naming the balance), 404 for an unknown round, 409 for a round not
    published yet (saying when it sells), for one settled by rule (no model), for a participant
    (who has the model), for the in-round buyer and for a model retention removed; none of them
    moves money."""
    who = _published_round(market, register, fund, open_round)
    poor = register(name="poor")
    fund(poor["id"], "1")
    r = _buy(market, poor, 1, "poor")
    assert r.status_code == 402 and "1.000000 is below the price 2.500000" in r.text
    r = _buy(market, poor, 99, "unknown")
    assert r.status_code == 404 and "round 99 does not exist" in r.text
    open_round(round_id=2, price="1.0", rewards={"small": "1.0"})
    in_transaction(market.app.state.sessions, lambda s: rounds.close_round(s, 2))
    r = _buy(market, poor, 2, "training")
    assert r.status_code == 409
    assert "round 2 is training" in r.text and "on sale once it is published" in r.text
    failed = SettlePayload(round_id=2, rewards={}, participants=[], refund_buyers=True)
    in_transaction(market.app.state.sessions, lambda s: rounds.settle_round(s, failed))
    r = _buy(market, poor, 2, "settled-by-rule")
    assert r.status_code == 409 and "round 2 is settled_by_rule; it published no model" in r.text
    r = _buy(market, who["trainer"], 1, "trainer")
    assert r.status_code == 409 and "trained round 1" in r.text
    r = _buy(market, who["buyer"], 1, "again")
    assert r.status_code == 409 and "already bought round 1" in r.text
    check = market.get("/v1/ledger/check", headers=OPERATOR).json()
    assert Decimal(check["accounts"]["wallets"]) == Decimal("1") + Decimal("7.5") + Decimal("2.5")
    # retention removed the model file: not listed on sale, not sold
    rich = register(name="rich")
    fund(rich["id"], "10")
    assert [s["round_id"] for s in market.get("/v1/quote", headers=rich["auth"]).json()["on_sale"]]
    (Path(market.app.state.settings.artifact_dir) / "model.pt").unlink()
    assert market.get("/v1/quote", headers=rich["auth"]).json()["on_sale"] == []
    r = _buy(market, rich, 1, "gone")
    assert r.status_code == 409 and "round 1's model is no longer kept" in r.text


def test_the_quote_says_what_is_on_sale_and_when_the_next_round_opens(
    market: TestClient, register, fund, open_round
) -> None:
    """After publication the quote lists the published model at its price; while a round
    collects it is on sale too; the SDK reads both, and buys late under one key."""
    _published_round(market, register, fund, open_round)
    late = register(name="late")
    fund(late["id"], "3")
    q = market.get("/v1/quote", headers=late["auth"]).json()
    assert q["on_sale"] == [
        {"round_id": 1, "state": "published", "price": "2.500000", "late": True}
    ]
    assert q["next_round"] == "not scheduled: the operator opens rounds (`mots rounds open`)"
    open_round(round_id=2, price="1.0", rewards={"small": "1.0"})
    q = market.get("/v1/quote", headers=late["auth"]).json()
    assert [(s["round_id"], s["late"]) for s in q["on_sale"]] == [(2, False), (1, True)]
    assert q["next_round"].startswith("round 2 is open now")
    sdk = MarketClient("http://testserver", late["token"], transport=LoseAnswers(market, set()))
    quote = sdk.quote()
    assert quote is not None and [s.round_id for s in quote.on_sale] == [2, 1]
    out = sdk.buy(1, idempotency_key="sdk-late")
    assert out.late and out.price == Decimal("2.5") and out.balance == Decimal("0.5")
