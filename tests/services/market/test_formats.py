"""One format each on the market's API: money as six-place strings (JSON numbers refused in one
line naming the field), every instant RFC 3339 in UTC with ``Z`` (SQLite's naive timestamps and the
tokens' epoch seconds included), and times given in a query refused without a zone."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from fastapi.testclient import TestClient

from tests.services.market.conftest import OPERATOR


def _utc_z(value: Any) -> bool:
    return (
        isinstance(value, str)
        and value.endswith("Z")
        and "+" not in value
        and (datetime.fromisoformat(value).utcoffset() is not None)
    )


def test_money_given_as_a_json_number_is_refused_in_one_line(
    market: TestClient, register: Callable[..., dict[str, Any]]
) -> None:
    """A deposit of 5 (a JSON number): 422, the detail names body.amount and says to quote it;
    nothing is booked. The same amount as a string is booked and answered as "5.000000"."""
    c = register()
    key = {**OPERATOR, "Idempotency-Key": "formats-number-0001"}
    r = market.post("/v1/deposits", json={"client_id": c["id"], "amount": 5}, headers=key)
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert detail.startswith("body.amount: an amount is a decimal string") and "\n" not in detail
    assert market.get("/v1/ledger/check", headers=OPERATOR).json()["transactions"] == 0
    key = {**OPERATOR, "Idempotency-Key": "formats-string-0001"}
    r = market.post("/v1/deposits", json={"client_id": c["id"], "amount": "5"}, headers=key)
    assert r.status_code == 201 and r.json()["amount"] == "5.000000", r.text


def test_every_instant_is_rfc3339_utc_with_z(
    market: TestClient,
    register: Callable[..., dict[str, Any]],
    fund: Callable[[int, str], None],
) -> None:
    """Registration, token renewal, enrolment codes, wallet entries and the operator's transaction
    list: each time ends in Z (none in epoch seconds, none naive, none +00:00)."""
    c = register()
    fund(c["id"], "3")
    assert _utc_z(c["token_expires_at"]), c
    renewed = market.post("/v1/me/token", headers=c["auth"]).json()
    assert _utc_z(renewed["expires_at"]), renewed
    code = market.post(
        "/v1/enrolments",
        json={"type_name": "small", "data_size": 50, "cost": "0.5", "uses": 1},
        headers=OPERATOR,
    ).json()
    assert _utc_z(code["expires_at"]), code
    listed = market.get("/v1/enrolments", headers=OPERATOR).json()["items"]
    assert listed and all(_utc_z(e["expires_at"]) for e in listed), listed
    auth = {"Authorization": f"Bearer {renewed['token']}"}
    entries = market.get("/v1/me/entries", headers=auth).json()["items"]
    assert entries and all(_utc_z(e["created_at"]) for e in entries), entries
    txns = market.get("/v1/ledger/transactions", headers=OPERATOR).json()["items"]
    assert txns and all(_utc_z(t["created_at"]) for t in txns), txns


def test_a_time_in_a_query_needs_a_zone(
    market: TestClient, register: Callable[..., dict[str, Any]], fund: Callable[[int, str], None]
) -> None:
    """``since`` naive or in epoch seconds: 422 naming query.since; with Z (or an offset): read as
    that instant in UTC."""
    c = register()
    fund(c["id"], "1")
    for bad in ("2026-01-01T00:00:00", "1767225600"):
        r = market.get("/v1/ledger/transactions", params={"since": bad}, headers=OPERATOR)
        assert r.status_code == 422, r.text
        assert r.json()["detail"].startswith("query.since: a time is RFC 3339 with a zone"), r.text
    for since, n in (("2000-01-01T00:00:00Z", 1), ("2999-01-01T01:00:00+01:00", 0)):
        r = market.get("/v1/ledger/transactions", params={"since": since}, headers=OPERATOR)
        assert r.status_code == 200 and len(r.json()["items"]) == n, r.text
