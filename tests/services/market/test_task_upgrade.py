"""Upgrades keep the money (issue 36, deliverable 7): a market database written by the release
before tasks (migrations up to 0010, main's head before 0011) migrates to tasks as task
``fashion-mnist``, and every balance, transaction, round and published model stays readable with
``ledger-check`` exact; the migrated market keeps taking decisions and purchases. SQLite and
PostgreSQL."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import text

from mots.platform.db import make_engine
from services.market.auth import hash_token, issue_token
from services.market.core.config import Settings
from services.market.main import create_app
from services.market.migrations import upgrade
from tests.services.market.conftest import OPERATOR, open_round_payload

AT = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
M = 1_000_000

ACCOUNTS = [  # id, name, category, client, balance (micros) after the transactions below
    (1, "external:deposits", "external_deposits", None, -25 * M),
    (2, "wallet:1", "wallets", 1, 11_500_000),
    (3, "wallet:2", "wallets", 2, 7_500_000),
    (4, "wallet:3", "wallets", 3, 5 * M),
    (5, "round:1:pool", "round_pools", None, 0),
    (6, "round:1:pool:0", "round_pools", None, 0),
    (7, "platform:surplus", "platform_surplus", None, M),
    (8, "round:2:pool", "round_pools", None, 0),
    (9, "round:2:pool:0", "round_pools", None, 0),
]
TRANSACTIONS = [  # id, kind, round, client, [(account, micros)]
    (1, "deposit", None, 1, [(1, -10 * M), (2, 10 * M)]),
    (2, "deposit", None, 2, [(1, -10 * M), (3, 10 * M)]),
    (3, "deposit", None, 3, [(1, -5 * M), (4, 5 * M)]),
    (4, "purchase", 1, 2, [(3, -2_500_000), (6, 2_500_000)]),
    (5, "settlement", 1, None, [(6, -2_500_000), (2, 1_500_000), (7, M)]),
]


def _write_previous_release(database_url: str, settings: Settings, artifact: Path) -> list[str]:
    """The database as the release before tasks leaves it after one published round (client 1
    trained, client 2 bought) and a second round collecting; returns the clients' tokens."""
    upgrade(database_url, "0010")
    engine = make_engine(database_url, pool_size=1)
    tokens = [issue_token(cid, settings)[0] for cid in (1, 2, 3)]
    rows: dict[str, list[dict[str, Any]]] = {
        "clients": [
            {
                "id": cid,
                "name": f"pi-{cid}",
                "type_name": "type-1",
                "data_size": 50,
                "cost_micros": 500_000,
                "token_hash": hash_token(tokens[cid - 1]),
                "status": "active",
                "created_at": AT,
            }
            for cid in (1, 2, 3)
        ],
        "accounts": [
            {"id": i, "name": n, "category": c, "client_id": cl, "balance_micros": b}
            for i, n, c, cl, b in ACCOUNTS
        ],
        "ledger_transactions": [
            {"id": t, "kind": k, "round_id": r, "client_id": c, "created_at": AT}
            for t, k, r, c, _ in TRANSACTIONS
        ],
        "ledger_entries": [
            {"transaction_id": t, "account_id": a, "amount_micros": m}
            for t, _, _, _, entries in TRANSACTIONS
            for a, m in entries
        ],
        "market_rounds": [
            {
                "id": rid,
                "state": state,
                "mechanism": "swan_robust",
                "price_micros": 2_500_000,
                "quote_json": open_round_payload(rid).model_dump_json(),
                "opened_at": AT,
                "population": 3,
                "artifact_path": path,
                "artifact_sha256": digest,
            }
            for rid, state, path, digest in (
                (1, "published", str(artifact), hashlib.sha256(artifact.read_bytes()).hexdigest()),
                (2, "collecting", None, None),
            )
        ],
        "round_members": [{"round_id": 2, "client_id": cid} for cid in (1, 2, 3)],
        "decisions": [
            {"round_id": 1, "client_id": 1, "strategy": "join", "dropped": False, "updated_at": AT},
            {"round_id": 1, "client_id": 2, "strategy": "buy", "dropped": False, "updated_at": AT},
        ],
        "purchases": [
            {
                "round_id": 1,
                "client_id": 2,
                "price_micros": 2_500_000,
                "transaction_id": 4,
                "refunded": False,
            }
        ],
    }
    try:
        with engine.begin() as conn:
            for table, values in rows.items():
                columns = list(values[0])
                sql = (
                    f"INSERT INTO {table} ({', '.join(columns)}) "
                    f"VALUES ({', '.join(':' + c for c in columns)})"
                )
                conn.execute(text(sql), values)
            if conn.dialect.name == "postgresql":  # ids given: move the sequences past them
                for table in ("clients", "accounts", "ledger_transactions"):
                    conn.execute(
                        text(
                            f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                            f"(SELECT max(id) FROM {table}))"
                        )
                    )
    finally:
        engine.dispose()
    return tokens


def _tasks_of(database_url: str) -> dict[str, set[str | None]]:
    engine = make_engine(database_url, pool_size=1)
    try:
        with engine.connect() as conn:
            out = {
                t: set(conn.scalars(text(f"SELECT task FROM {t}")))
                for t in ("clients", "market_rounds", "decisions", "purchases")
            }
            for category in ("wallets", "round_pools"):
                q = text("SELECT task FROM accounts WHERE category = :c")
                out[category] = set(conn.scalars(q, {"c": category}))
    finally:
        engine.dispose()
    return out


def test_a_database_of_the_release_before_tasks_migrates_with_its_money(
    database_url: str, redis_url: str, tmp_path: Path
) -> None:
    """0010 → head: each wallet's balance and entries, every transaction, both rounds' quotes
    and the published model read as before, all task fashion-mnist (wallets of no task); the
    ledger check is exact; the collecting round then takes a join and a purchase."""
    artifact = tmp_path / "round-1.pt"
    artifact.write_bytes(b"a model written by the previous release")
    settings = Settings(
        database_url=database_url,
        redis_url=redis_url,
        redis_key_prefix=f"test-upgrade-{id(tmp_path)}:",
        artifact_dir=str(tmp_path),
    )
    tokens = _write_previous_release(database_url, settings, artifact)
    with TestClient(create_app(settings)) as market:  # its start migrates to head
        auth = [{"Authorization": f"Bearer {t}"} for t in tokens]
        balances = [market.get("/v1/me/balance", headers=a).json() for a in auth]
        assert [Decimal(b["balance"]) for b in balances] == [
            Decimal("11.5"),
            Decimal("7.5"),
            Decimal("5"),
        ]
        assert [[e["kind"] for e in b["entries"]] for b in balances] == [
            ["settlement", "deposit"],
            ["purchase", "deposit"],
            ["deposit"],
        ]
        check = market.get("/v1/ledger/check", headers=OPERATOR).json()
        assert (check["transactions"], check["entries"]) == (5, 11)
        assert (check["unbalanced_transactions"], check["mismatched_accounts"]) == (0, 0)
        assert Decimal(check["total"]) == 0
        listed = market.get("/v1/ledger/transactions?limit=50", headers=OPERATOR).json()
        assert sorted(t["id"] for t in listed["items"]) == [1, 2, 3, 4, 5]
        for rid, state in ((1, "published"), (2, "collecting")):
            quote = market.get(f"/v1/rounds/{rid}/quote", headers=auth[0])
            assert quote.status_code == 200 and quote.json()["state"] == state, quote.text
        model = market.get("/v1/rounds/1/model", headers=auth[1])
        assert model.status_code == 200 and model.content == artifact.read_bytes()
        assert market.get("/v1/rounds/1/model", headers=auth[2]).status_code == 403

        joined = market.put("/v1/rounds/2/decision", json={"strategy": "join"}, headers=auth[0])
        assert joined.status_code == 200, joined.text
        bought = market.post(
            "/v1/purchases",
            json={"round_id": 2},
            headers={**auth[2], "Idempotency-Key": "upgrade-1"},
        )
        assert bought.status_code == 201, bought.text
        after = market.get("/v1/ledger/check", headers=OPERATOR).json()
        assert (after["unbalanced_transactions"], after["mismatched_accounts"]) == (0, 0)
        assert after["transactions"] == 6 and Decimal(after["total"]) == 0
    assert _tasks_of(database_url) == {
        "clients": {"fashion-mnist"},
        "market_rounds": {"fashion-mnist"},
        "decisions": {"fashion-mnist"},
        "purchases": {"fashion-mnist"},
        "wallets": {None},
        "round_pools": {"fashion-mnist"},
    }
