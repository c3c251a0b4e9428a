"""Registering clients in bulk: the operator's route, set-based, checked against the ledger."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from mots.platform.db import make_engine, make_sessionmaker
from mots.platform.transactions import in_transaction
from services.market import migrations, rounds
from services.market.errors import Conflict
from services.market.models import Client
from services.market.registration import NewClient, register_clients
from tests.services.market.conftest import OPERATOR


def _bulk(market: TestClient, types: list[dict[str, Any]], deposit: str = "0") -> Any:
    return market.post(
        "/v1/clients/bulk", json={"types": types, "deposit": deposit}, headers=OPERATOR
    )


def test_bulk_registration_registers_and_funds_every_client(market: TestClient, register) -> None:
    """Two types in one call, each wallet funded: every token works, every balance is the
    deposit, and the ledger is exact (one deposit transaction per client)."""
    early = register("early", "small", 50, "0.5")
    r = _bulk(
        market,
        [
            {"type_name": "small", "data_size": 50, "cost": "0.5", "count": 3, "name_prefix": "s-"},
            {"type_name": "large", "data_size": 300, "cost": "3", "count": 2},
        ],
        deposit="7.5",
    )
    assert r.status_code == 201, r.text
    clients = r.json()["clients"]
    assert [c["name"] for c in clients] == ["s-1", "s-2", "s-3", "client-1", "client-2"]
    assert len({c["id"] for c in clients} | {early["id"]}) == 6
    assert len({c["token"] for c in clients}) == 5
    assert all(c["token_expires_at"] > 0 for c in clients)
    for c in clients:
        me = market.get("/v1/me/balance", headers={"Authorization": f"Bearer {c['token']}"})
        assert me.status_code == 200 and me.json()["client_id"] == c["id"]
        assert Decimal(me.json()["balance"]) == Decimal("7.5")
        assert [e["kind"] for e in me.json()["entries"]] == ["deposit"]
    check = market.get("/v1/ledger/check", headers=OPERATOR).json()
    assert (check["unbalanced_transactions"], check["mismatched_accounts"]) == (0, 0)
    assert check["transactions"] == 5 and float(check["total"]) == 0
    listed = market.get("/v1/clients", headers=OPERATOR, params={"limit": 100}).json()["items"]
    assert len(listed) == 6


def test_bulk_registration_is_refused_whole(market: TestClient, register) -> None:
    """A type that contradicts the registered clients', a type twice with different sizes, no
    operator token, or more than 10,000 clients: 4xx naming the field, nothing registered."""
    register("early", "small", 50, "0.5")
    bad = _bulk(market, [{"type_name": "small", "data_size": 60, "cost": "0.5", "count": 2}])
    assert bad.status_code == 409 and "type_name" in bad.text  # as a single registration
    twice = _bulk(
        market,
        [
            {"type_name": "x", "data_size": 1, "cost": "0", "count": 1},
            {"type_name": "x", "data_size": 2, "cost": "0", "count": 1},
        ],
    )
    assert twice.status_code == 422 and "type_name" in twice.text
    anon = market.post(
        "/v1/clients/bulk",
        json={"types": [{"type_name": "y", "data_size": 1, "cost": "0", "count": 1}]},
    )
    assert anon.status_code == 401
    many = _bulk(
        market,
        [
            {"type_name": "y", "data_size": 1, "cost": "0", "count": 6000},
            {"type_name": "z", "data_size": 1, "cost": "0", "count": 6000},
        ],
    )
    assert many.status_code == 422 and "types" in many.text
    listed = market.get("/v1/clients", headers=OPERATOR).json()["items"]
    assert [c["name"] for c in listed] == ["early"]
    check = market.get("/v1/ledger/check", headers=OPERATOR).json()
    assert check["transactions"] == 0


def test_a_bulk_population_rounds_like_a_registered_one(market: TestClient, open_round) -> None:
    """Clients from the bulk route declare and buy; the round counts them in its population."""
    r = _bulk(market, [{"type_name": "small", "data_size": 50, "cost": "0.5", "count": 4}], "10")
    tokens = [{"Authorization": f"Bearer {c['token']}"} for c in r.json()["clients"]]
    open_round()
    for h in tokens[:3]:
        assert market.put("/v1/rounds/1/decision", json={"strategy": "join"}, headers=h).is_success
    bought = market.post(
        "/v1/purchases", json={"round_id": 1}, headers={**tokens[3], "Idempotency-Key": "k-123456"}
    )
    assert bought.status_code == 201, bought.text
    assert Decimal(bought.json()["balance"]) == Decimal("7.5")
    with market.app.state.sessions() as s:
        seen = rounds.progress(s, 1)
    assert (seen.registered, seen.declared) == (4, 4)


def test_several_new_types_in_one_call_must_fit_the_types_allowed(database_url: str) -> None:
    """One type registered, two allowed: a bulk call bringing two new types is refused whole
    (each alone would fit), one new type is registered."""
    migrations.upgrade(database_url)
    engine = make_engine(database_url, pool_size=1)
    sessions = make_sessionmaker(engine)

    def register(names: list[str]) -> Any:
        new = [NewClient(f"{n}-1", n, 8, 80_000) for n in names]
        return in_transaction(
            sessions, lambda s: register_clients(s, new, 0, 2, lambda c: (f"token-{c}", 0))
        )

    try:
        register(["small"])
        with pytest.raises(Conflict, match="MOTS_MAX_TYPES"):
            register(["a", "b"])
        assert [r.client.type_name for r in register(["a", "small"])] == ["a", "small"]
        with sessions() as s:
            assert sorted(s.scalars(select(Client.type_name))) == ["a", "small", "small"]
    finally:
        engine.dispose()
