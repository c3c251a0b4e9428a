"""The market's list routes page with ``limit``/``cursor``/``next``; money leaves as six-place strings."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from mots.platform.db import in_transaction
from services.market.models import MarketRound
from tests.services.market.conftest import OPERATOR


def _publish(session: Session, round_id: int) -> None:
    rnd = session.get(MarketRound, round_id)
    assert rnd is not None
    rnd.state = "published"


def _all_pages(
    market: TestClient, path: str, headers: dict[str, str], limit: int
) -> tuple[list[dict[str, Any]], int]:
    items: list[dict[str, Any]] = []
    cursor, pages = None, 0
    while True:
        params: dict[str, Any] = {"limit": limit} | ({"cursor": cursor} if cursor else {})
        r = market.get(path, params=params, headers=headers)
        assert r.status_code == 200, r.text
        body = r.json()
        assert set(body) == {"items", "next"} and len(body["items"]) <= limit
        items += body["items"]
        pages += 1
        cursor = body["next"]
        if cursor is None:
            return items, pages


def test_clients_page_in_registration_order(
    market: TestClient, register: Callable[..., dict[str, Any]]
) -> None:
    """Five clients at two a page: three pages, each client once, in the order registered."""
    ids = [register(name=f"c{i}")["id"] for i in range(5)]
    items, pages = _all_pages(market, "/v1/clients", OPERATOR, limit=2)
    assert [c["id"] for c in items] == ids and pages == 3
    assert market.get("/v1/clients", params={"limit": 0}, headers=OPERATOR).status_code == 422
    r = market.get("/v1/clients", params={"limit": 10_000}, headers=OPERATOR)
    assert r.status_code == 422 and "query.limit" in r.json()["detail"]
    r = market.get("/v1/clients", params={"cursor": "YWZ0ZXI6eA"}, headers=OPERATOR)
    assert r.status_code == 422 and "query.cursor" in r.json()["detail"]
    assert market.get("/v1/clients").status_code == 401


def test_wallet_entries_page_newest_first_with_six_place_amounts(
    market: TestClient, register: Callable[..., dict[str, Any]], fund: Callable[[int, str], None]
) -> None:
    """Three deposits read back newest first over two pages; every amount is a six-place string,
    and the balance route shows the same money shape."""
    me = register()
    for amount in ("1", "2.5", "0.000001"):
        fund(me["id"], amount)
    items, pages = _all_pages(market, "/v1/me/entries", me["auth"], limit=2)
    assert [e["amount"] for e in items] == ["0.000001", "2.500000", "1.000000"] and pages == 2
    balance = market.get("/v1/me/balance", headers=me["auth"]).json()
    assert balance["balance"] == "3.500001"
    assert [e["amount"] for e in balance["entries"]] == [e["amount"] for e in items]
    assert me["cost"] == "0.500000"


def test_purchases_page_newest_first(
    market: TestClient,
    register: Callable[..., dict[str, Any]],
    fund: Callable[[int, str], None],
    open_round: Callable[..., None],
) -> None:
    """Two rounds bought, one a page: the newer purchase first, price as a six-place string."""
    me = register()
    fund(me["id"], "10")
    for round_id, price in ((1, "2.5"), (2, "1.25")):
        if round_id == 2:  # the first round has left collecting (its model was published)
            in_transaction(market.app.state.sessions, lambda s: _publish(s, 1))
        open_round(round_id=round_id, price=price)
        r = market.post(
            "/v1/purchases",
            json={"round_id": round_id},
            headers={**me["auth"], "Idempotency-Key": f"buy-round-{round_id}"},
        )
        assert r.status_code == 201, r.text
    items, pages = _all_pages(market, "/v1/me/purchases", me["auth"], limit=1)
    assert [(p["round_id"], p["price"], p["refunded"]) for p in items] == [
        (2, "1.250000", False),
        (1, "2.500000", False),
    ]
    assert pages == 2
    assert market.get("/v1/me/purchases").status_code == 401


@pytest.mark.parametrize("value", [2**63, 2**64, 10**30])
def test_a_cursor_beyond_64_bits_is_422(market: TestClient, value: int) -> None:
    """An id a 64-bit column cannot hold is not a cursor this list returned (was a 500)."""
    from mots.platform.paging import encode_cursor

    r = market.get("/v1/clients", params={"cursor": encode_cursor(value)}, headers=OPERATOR)
    assert r.status_code == 422 and "query.cursor" in r.json()["detail"]
