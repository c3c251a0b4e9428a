"""Numbers with limits stated and enforced (issue 37 #4): no account's balance passes
:data:`~mots.platform.money.MAX_BALANCE_MICROS` (checked before it is written, so nothing
overflows BIGINT or turns into a float on SQLite); a deposit or a bulk registration that would
pass it is a 422 naming the account and the limit, nothing booked; ``ledger-check`` and
``accounts`` still answer; an id past int32 or int64 in a query is a 422, never a 500 on
PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from fastapi.testclient import TestClient

from mots.platform.money import MAX_BALANCE_MICROS, from_micros
from tests.services.market.conftest import OPERATOR

BILLION = "1000000000"
LIMIT = f"{from_micros(MAX_BALANCE_MICROS):f}"


def _deposit(market: TestClient, client_id: int, amount: str, key: str) -> Any:
    return market.post(
        "/v1/deposits",
        json={"client_id": client_id, "amount": amount},
        headers={**OPERATOR, "Idempotency-Key": key},
    )


def _still_answers(market: TestClient) -> dict[str, Any]:
    check = market.get("/v1/ledger/check", headers=OPERATOR)
    assert check.status_code == 200, check.text
    body: dict[str, Any] = check.json()
    assert body["unbalanced_transactions"] == 0 and body["mismatched_accounts"] == 0
    assert Decimal(body["total"]) == 0
    accounts = market.get("/v1/ledger/accounts?limit=500", headers=OPERATOR)
    assert accounts.status_code == 200, accounts.text
    return body


def test_the_1000th_deposit_of_a_billion_into_one_wallet_is_a_422_naming_the_limit(
    market: TestClient, register: Callable[..., dict[str, Any]]
) -> None:
    """999 deposits of 10^9 are booked; the 1,000th would make the wallet 10^12 (past the
    limit): 422 naming the wallet and the limit, the balance unchanged, the ledger still checks."""
    client = register()
    for n in range(999):
        r = _deposit(market, client["id"], BILLION, f"deposit-{n:04d}")
        assert r.status_code == 201, (n, r.text)
    assert r.json()["balance"] == "999000000000.000000"
    refused = _deposit(market, client["id"], BILLION, "deposit-0999")
    assert refused.status_code == 422, refused.text
    detail = refused.json()["detail"]
    assert f"wallet:{client['id']}" in detail and LIMIT in detail
    balance = market.get("/v1/me/balance", headers=client["auth"]).json()["balance"]
    assert balance == "999000000000.000000"
    assert _still_answers(market)["accounts"]["external_deposits"] == "-999000000000.000000"


def test_external_deposits_never_pass_the_limit(
    market: TestClient, register: Callable[..., dict[str, Any]]
) -> None:
    """Deposits into many wallets sum in ``external:deposits``: 999 wallets of 10^9 (a bulk) are
    booked; one more deposit of 10^9 anywhere would take it to 10^12 (past the limit): 422 with
    the account and the limit named, the ledger unchanged and checking."""
    body = {
        "types": [
            {"type_name": "small", "data_size": 50, "cost": "0.5", "count": 999, "name_prefix": "b"}
        ],
        "deposit": BILLION,
    }
    assert market.post("/v1/clients/bulk", json=body, headers=OPERATOR).status_code == 201
    late = register(name="late")
    refused = _deposit(market, late["id"], BILLION, "late-deposit")
    assert refused.status_code == 422, refused.text
    assert "external:deposits" in refused.json()["detail"] and LIMIT in refused.json()["detail"]
    assert market.get("/v1/me/balance", headers=late["auth"]).json()["balance"] == "0.000000"
    assert _still_answers(market)["transactions"] == 999


def test_a_bulk_of_10000_times_a_billion_is_a_422_and_registers_nobody(market: TestClient) -> None:
    """10,000 wallets of 10^9 each would put 10^13 in ``external:deposits``: 422 naming the
    limit, no client registered, nothing booked."""
    body = {
        "types": [
            {
                "type_name": "small",
                "data_size": 50,
                "cost": "0.5",
                "count": 10_000,
                "name_prefix": "b",
            }
        ],
        "deposit": BILLION,
    }
    r = market.post("/v1/clients/bulk", json=body, headers=OPERATOR)
    assert r.status_code == 422, r.text[:500]
    assert "external:deposits" in r.json()["detail"] and LIMIT in r.json()["detail"]
    assert market.get("/v1/clients", headers=OPERATOR).json()["items"] == []
    assert _still_answers(market)["transactions"] == 0


@pytest.mark.parametrize(
    "path",
    [
        "/v1/ledger/transactions?round_id=2147483648",
        "/v1/ledger/transactions?round_id=9223372036854775808",
        "/v1/ledger/transactions?round_id=99999999999999999999999",
    ],
)
def test_an_id_past_int32_or_int64_in_a_query_is_a_422(market: TestClient, path: str) -> None:
    """The round filter's ids are 32-bit like the column: past it, a 422 naming the field and
    the limit, on SQLite and PostgreSQL."""
    r = market.get(path, headers=OPERATOR)
    assert r.status_code == 422, r.text
    assert "round_id" in r.text and "2147483647" in r.text
