"""Backups that restore (issue 39, deliverable 6), fast: docker/postgres/backup.sh and restore.sh
run as the backup service runs them, against a throwaway database on the machine's PostgreSQL
holding a market with deposits, a purchase and a settled, published round; the database dropped;
restored; the market read again over its API and judged by the restore drill's own comparison
(tests/containers/restore.py, which does the same on the compose deployment, volume and all)."""

from __future__ import annotations

import copy
import hashlib
import os
import subprocess
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis
from fastapi.testclient import TestClient

from mots.platform.contracts import SettlePayload
from mots.platform.db import in_transaction
from services.market import rounds
from services.market.core.config import Settings
from services.market.main import create_app
from tests.containers.restore import compare, snapshot
from tests.services.conftest import PG_ADMIN, _create_pg_database, _drop_pg_database
from tests.services.market.conftest import OPERATOR, open_round_payload

SCRIPTS = Path(__file__).resolve().parents[3] / "docker" / "postgres"


@pytest.fixture
def db(redis_url: str) -> Iterator[str]:
    """A throwaway database's name (dropped afterwards, whatever the scripts left)."""
    name = _create_pg_database()
    try:
        yield name
    finally:
        _drop_pg_database(name)


def _settings(db: str, redis_url: str, tmp_path: Path) -> Settings:
    return Settings(
        database_url=f"postgresql+psycopg://postgres@127.0.0.1:5432/{db}",
        redis_url=redis_url,
        redis_key_prefix=f"test-restore-{db}:",
        artifact_dir=str(tmp_path / "artifacts"),
    )


def _script(name: str, *args: str, db: str, backups: Path) -> subprocess.CompletedProcess[str]:
    """One of the scripts, with libpq's environment pointing at the machine's PostgreSQL."""
    env = dict(os.environ, PGHOST="127.0.0.1", PGPORT="5432", PGUSER="postgres",
               BACKUP_DIR=str(backups), BACKUP_DATABASES=db, BACKUP_KEEP="2")  # fmt: skip
    return subprocess.run(
        ["sh", str(SCRIPTS / name), *args], env=env, capture_output=True, text=True, timeout=60
    )


def _client(market: TestClient, name: str, type_name: str = "small") -> dict[str, str]:
    r = market.post(
        "/v1/clients",
        json={"name": name, "type_name": type_name, "data_size": 50, "cost": "0.5"},
        headers=OPERATOR,
    )
    assert r.status_code == 201, r.text
    return {"id": str(r.json()["id"]), "Authorization": f"Bearer {r.json()['token']}"}


def _market_with_a_round(market: TestClient) -> dict[int, dict[str, str]]:
    """Deposits, two participants, a buyer's purchase, round 1 settled and published with its
    model; the buyer's headers by round."""
    artifact = Path(market.app.state.settings.artifact_dir) / "round-1" / "model.pt"
    artifact.parent.mkdir(parents=True)
    artifact.write_bytes(b"weights of round 1")
    p, q, buyer = (_client(market, n) for n in ("p", "q", "buyer"))
    for c, amount in ((buyer, "10"), (p, "2")):
        r = market.post("/v1/deposits", json={"client_id": int(c["id"]), "amount": amount},
                        headers={**OPERATOR, "Idempotency-Key": f"fund-client-{c['id']}"})  # fmt: skip
        assert r.status_code == 201, r.text
    auth = {c["id"]: {"Authorization": c["Authorization"]} for c in (p, q, buyer)}
    payload = open_round_payload(price="2.5", rewards={"small": "0.5"})
    in_transaction(market.app.state.sessions, lambda s: rounds.open_round(s, payload))
    for c in (p, q):
        r = market.put("/v1/rounds/1/decision", json={"strategy": "join"}, headers=auth[c["id"]])
        assert r.status_code == 200, r.text
    r = market.post("/v1/purchases", json={"round_id": 1},
                    headers={**auth[buyer["id"]], "Idempotency-Key": "buy-round-1"})  # fmt: skip
    assert r.status_code == 201, r.text
    settle = SettlePayload(
        round_id=1,
        rewards={"small": Decimal("0.5")},
        participants=[int(p["id"]), int(q["id"])],
        artifact_path=str(artifact),
        artifact_sha256=hashlib.sha256(artifact.read_bytes()).hexdigest(),
    )
    in_transaction(market.app.state.sessions, lambda s: rounds.settle_round(s, settle))
    in_transaction(market.app.state.sessions, lambda s: rounds.publish(s, 1))
    return {1: auth[buyer["id"]]}


def _tables(db: str) -> int:
    url = PG_ADMIN.rsplit("/", 1)[0] + f"/{db}"
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "select count(*) from information_schema.tables where table_schema = 'public'"
        ).fetchone()
    return int(row[0]) if row else 0


def test_a_backed_up_market_restores_exactly(db: str, redis_url: str, tmp_path: Path) -> None:
    """backup.sh once; the database dropped and made again empty; restore.sh: the ledger checks
    balanced and equals the backed-up one, round 1 reads the same and its model downloads."""
    settings, backups = _settings(db, redis_url, tmp_path), tmp_path / "backups"
    try:
        with TestClient(create_app(settings)) as market:
            downloads = _market_with_a_round(market)
            before = snapshot(market, OPERATOR, downloads)
        assert before["transactions"] and before["rounds"]["1"]["model"]["size"] == 18
        got = _script("backup.sh", "once", db=db, backups=backups)
        assert got.returncode == 0, got.stderr
        (stamp,) = [p.name for p in backups.iterdir()]
        _drop_pg_database(db)  # the volume destroyed: an empty database where the books were
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{db}"')
        assert _tables(db) == 0
        got = _script("restore.sh", db=db, backups=backups)
        assert got.returncode == 0, got.stderr
        assert f"restored {db} from {stamp}" in got.stdout
        with TestClient(create_app(settings)) as market:
            after = snapshot(market, OPERATOR, downloads)
        verdict = compare(before, after)
        assert verdict["differ"] == [], verdict
        assert verdict["ledger_balanced"] and verdict["rounds_readable"]
    finally:
        r = redis.Redis.from_url(redis_url)
        for key in r.scan_iter(f"{settings.redis_key_prefix}*"):
            r.delete(key)


def test_a_damaged_backup_restores_nothing(db: str, tmp_path: Path) -> None:
    """A dump whose bytes changed after backup fails SHA256SUMS: restore.sh exits 3 and leaves
    the database as it was; retention keeps the newest BACKUP_KEEP (2) of three sets."""
    backups = tmp_path / "backups"
    with psycopg.connect(PG_ADMIN.rsplit("/", 1)[0] + f"/{db}", autocommit=True) as conn:
        conn.execute("create table kept (x int)")
    for _ in range(3):
        assert _script("backup.sh", "once", db=db, backups=backups).returncode == 0
    sets = sorted(p.name for p in backups.iterdir())
    assert len(sets) == 2
    dump = backups / sets[-1] / f"{db}.dump"
    data = bytearray(dump.read_bytes())
    data[len(data) // 2] ^= 0xFF
    dump.write_bytes(bytes(data))
    got = _script("restore.sh", db=db, backups=backups)
    assert got.returncode == 3 and "damaged" in got.stderr
    assert _tables(db) == 1


def test_the_drill_sees_a_changed_ledger_or_a_lost_model() -> None:
    """compare() fails the books on one changed entry and the rounds on a model gone missing."""
    entry = {"account": "wallet:1", "amount": "1.000000"}
    model = {"sha256": "ab", "size": 2, "header": "ab"}
    before: dict[str, Any] = {
        "ledger": {"unbalanced_transactions": 0, "mismatched_accounts": 0, "total": "0"},
        "accounts": [], "clients": [], "transactions": [{"id": 1, "entries": [entry]}],
        "rounds": {"1": {"quote": {}, "info": {}, "model": model}},
    }  # fmt: skip
    assert compare(before, copy.deepcopy(before))["ledger_balanced"]
    changed = copy.deepcopy(before)
    changed["transactions"][0]["entries"][0]["amount"] = "2.000000"
    assert not compare(before, changed)["ledger_balanced"]
    assert compare(before, changed)["rounds_readable"]
    lost = copy.deepcopy(before)
    lost["rounds"]["1"]["model"] = {"status": 404}
    assert not compare(before, lost)["rounds_readable"]
