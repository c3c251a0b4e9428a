"""Registering clients in bulk: the operator's route, set-based, checked against the ledger."""

from __future__ import annotations

import random
from decimal import Decimal
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from mots.platform.db import in_transaction, make_engine, make_sessionmaker
from services.market import enrolment as enrolments
from services.market import migrations, rounds
from services.market.auth import hash_token
from services.market.errors import Conflict, Refusal
from services.market.models import Client, Enrolment
from services.market.registration import (
    Enrolled,
    NewClient,
    Registered,
    register_clients,
    register_enrolled,
)
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
    assert all(c["token_expires_at"].endswith("Z") for c in clients)
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


def test_enrolled_registrations_batched_equal_one_at_a_time(database_url: str) -> None:
    """Single registrations with enrolment codes, booked as one batch, give what booking them one
    transaction each gives: the same answers (registered with the code's type, 401 for an unknown
    or used-up code, 409 for a claim that contradicts the code) and the same uses left per code.
    Random workloads over codes of 1-4 uses (two identical sets of codes: one per way)."""
    migrations.upgrade(database_url)
    engine = make_engine(database_url, pool_size=2)
    sessions = make_sessionmaker(engine)
    types = [("small", 8, 80_000), ("medium", 16, 160_000), ("large", 32, 320_000)]

    def issue_codes(uses: list[int]) -> list[str]:
        def work(s: Any) -> list[str]:
            return [
                enrolments.issue(s, enrolments.TypeFacts(*types[k % 3]), u, 3600, 8)[1]
                for k, u in enumerate(uses)
            ]

        return in_transaction(sessions, work)

    def shape(out: Registered | Refusal) -> tuple[Any, ...]:
        if isinstance(out, Refusal):
            return (type(out).__name__, out.field)
        return ("registered", out.client.name, out.client.type_name, out.client.data_size)

    def uses_left(codes: list[str]) -> list[int]:
        with sessions() as s:
            left = {e.code_hash: e.uses_left for e in s.scalars(select(Enrolment))}
        return [left[hash_token(c)] for c in codes]

    try:
        for seed in range(6):
            rng = random.Random(seed)
            uses = [rng.randint(1, 4) for _ in range(4)]
            batched_codes, single_codes = issue_codes(uses), issue_codes(uses)
            picks: list[tuple[str, int, int | None]] = []
            for k in range(rng.randint(1, 24)):
                code = rng.randrange(5)  # 4: a code nobody issued
                claim = rng.choice([None, "match", "contradict"])
                size = None
                if claim is not None and code < 4:
                    size = types[code % 3][1] + (0 if claim == "match" else 1)
                picks.append((f"d{seed}-{k}", code, size))

            def requests(codes: list[str], picks: list[tuple[str, int, int | None]]) -> Any:
                return [
                    Enrolled(name, codes[c] if c < 4 else "enrol_nobody-issued-this", None, size)
                    for name, c, size in picks
                ]

            batch = requests(batched_codes, picks)
            together = in_transaction(
                sessions,
                lambda s, batch=batch: register_enrolled(s, batch, 8, lambda c: (f"t{c}", 0)),
            )
            alone = [
                in_transaction(
                    sessions,
                    lambda s, r=r: register_enrolled(s, [r], 8, lambda c: (f"mots.{c}.u", 0)),
                )[0]
                for r in requests(single_codes, picks)
            ]
            assert [shape(o) for o in together] == [shape(o) for o in alone], seed
            assert uses_left(batched_codes) == uses_left(single_codes), seed
            taken = sum(isinstance(o, Registered) for o in together)
            assert sum(uses) - sum(uses_left(batched_codes)) == taken
        with sessions() as s:  # every registered client points at its code's enrolment
            assert all(c.enrolment_id is not None for c in s.scalars(select(Client)))
    finally:
        engine.dispose()


def test_bulk_registration_enrols_each_type_into_its_task(market: TestClient) -> None:
    """Issue 36: a bulk type names its task (fashion-mnist when it names none); the clients
    belong to it, a type name is the task's own (type-1 of digits beside type-1 of
    fashion-mnist, with other sizes and costs), and a type of a task not stored, or retired, is
    refused whole, naming the type's task field, with nobody registered."""
    from mots.tasks.task_file import SHIPPED_DIR

    content = (SHIPPED_DIR / "digits.yaml").read_text(encoding="utf-8")
    assert market.post("/v1/tasks", json={"content": content}, headers=OPERATOR).status_code == 201
    r = _bulk(
        market,
        [
            {"type_name": "type-1", "data_size": 20, "cost": "0.2", "count": 2, "task": "digits"},
            {"type_name": "type-1", "data_size": 50, "cost": "0.5", "count": 1},
        ],
    )
    assert r.status_code == 201, r.text
    clients = r.json()["clients"]
    assert [c["task"] for c in clients] == ["digits", "digits", "fashion-mnist"]
    me = market.get("/v1/me", headers={"Authorization": f"Bearer {clients[0]['token']}"})
    assert me.json()["task"] == "digits"
    unknown = _bulk(
        market,
        [
            {"type_name": "a", "data_size": 1, "cost": "0", "count": 1},
            {"type_name": "b", "data_size": 1, "cost": "0", "count": 1, "task": "cifar"},
        ],
    )
    assert unknown.status_code == 404 and unknown.json()["detail"].startswith("types.1.task: ")
    assert market.delete("/v1/tasks/digits", headers=OPERATOR).status_code == 200
    retired = _bulk(
        market,
        [{"type_name": "type-1", "data_size": 20, "cost": "0.2", "count": 1, "task": "digits"}],
    )
    assert retired.status_code == 409 and "retired" in retired.json()["detail"]
    malformed = _bulk(
        market, [{"type_name": "c", "data_size": 1, "cost": "0", "count": 1, "task": "No Task"}]
    )
    assert malformed.status_code == 422 and "task" in malformed.text
    listed = market.get("/v1/clients", headers=OPERATOR, params={"limit": 100}).json()["items"]
    assert len(listed) == 3
