"""Money and ids at the market's REST boundary (SQLite and PostgreSQL): a loose amount string or
a non-integer id is a 422 problem naming the field, and nothing is booked."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.services.market.conftest import OPERATOR

LOOSE_AMOUNTS = [" 1", "1_000", "+5", "1e3", "0x10", "\u0661", "01", "1.0000001", True]
NOT_IDS = ["1", 1.5, True]


def _field(r: Any) -> list[str]:
    assert r.status_code == 422, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    return [e["field"] for e in r.json()["errors"]]


def test_loose_amounts_are_refused_naming_the_field(market: TestClient, register) -> None:
    """Deposits and registrations: each loose amount is a 422 on body.amount / body.cost."""
    c = register()
    for i, bad in enumerate(LOOSE_AMOUNTS):
        r = market.post(
            "/v1/deposits",
            json={"client_id": c["id"], "amount": bad},
            headers={**OPERATOR, "Idempotency-Key": f"loose-amount-{i:04d}"},
        )
        assert _field(r) == ["body.amount"], (bad, r.text)
        r = market.post(
            "/v1/clients",
            json={"name": "x", "type_name": "t", "data_size": 5, "cost": bad},
        )
        assert _field(r) == ["body.cost"], (bad, r.text)
    check = market.get("/v1/ledger/check", headers=OPERATOR).json()
    assert check["transactions"] == 0 and Decimal(check["total"]) == 0
    good = market.post(
        "/v1/deposits",
        json={"client_id": c["id"], "amount": "1000.5"},
        headers={**OPERATOR, "Idempotency-Key": "good-amount-0001"},
    )
    assert good.status_code == 201, good.text


@pytest.mark.parametrize("bad", NOT_IDS)
def test_ids_are_json_integers_only(
    market: TestClient, register, fund, open_round, bad: object
) -> None:
    """round_id of a purchase and client_id of a deposit: "1", 1.5 and true are refused (1.0 is
    the integer 1, as JSON Schema's ``integer`` says: test_integral_numbers_are_ids)."""
    c = register()
    fund(c["id"], "10")
    open_round(price="1")
    r = market.post(
        "/v1/purchases",
        json={"round_id": bad},
        headers={**c["auth"], "Idempotency-Key": "strict-id-0001"},
    )
    assert _field(r) == ["body.round_id"]
    r = market.post(
        "/v1/deposits",
        json={"client_id": bad, "amount": "1"},
        headers={**OPERATOR, "Idempotency-Key": "strict-id-0002"},
    )
    assert _field(r) == ["body.client_id"]
    assert Decimal(market.get("/v1/me/balance", headers=c["auth"]).json()["balance"]) == 10


def test_integral_numbers_are_ids(market: TestClient, register) -> None:
    """Issue 37: the OpenAPI document says ``"type": "integer"``, which holds 7.0 as well as 7,
    so a deposit to client 1.0 is a deposit to client 1 (schemathesis sent one)."""
    c = register()
    r = market.post(
        "/v1/deposits",
        json={"client_id": float(c["id"]), "amount": "1"},
        headers={**OPERATOR, "Idempotency-Key": "integral-id-0001"},
    )
    assert r.status_code == 201, r.text
    assert r.json()["client_id"] == c["id"]


def test_money_limits_are_stated_in_the_users_units(market: TestClient, register) -> None:
    """Issue 40: an amount beyond the limit is refused with the limit as a user writes it
    (``1000000000``), never Python's ``Decimal('1000000000')``."""
    c = register(name="limit")
    r = market.post(
        "/v1/deposits",
        json={"client_id": c["id"], "amount": "1000000000000"},
        headers={**OPERATOR, "Idempotency-Key": "limit-words-1"},
    )
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert "Decimal(" not in r.text, detail
    assert "body.amount: Input should be less than or equal to 1000000000" in detail
