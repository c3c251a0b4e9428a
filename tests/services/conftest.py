"""Fixtures of the services' tests: real PostgreSQL databases and real Redis, created per run."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

PG_ADMIN = os.environ.get("MOTS_TEST_PG_ADMIN", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = "redis://127.0.0.1:6379/0"


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="session")
def redis_url() -> str:
    """Real Redis on 127.0.0.1:6379 (started by scripts/ensure_system.sh)."""
    if not _listening(6379):
        pytest.fail("Redis is not listening on 127.0.0.1:6379: run `make system`")
    return REDIS_URL


def _create_pg_database() -> str:
    import psycopg

    name = f"mots_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return name


def _drop_pg_database(name: str) -> None:
    import psycopg

    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh PostgreSQL database for one test, dropped afterwards."""
    if not _listening(5432):
        pytest.fail("PostgreSQL is not listening on 127.0.0.1:5432: run `make system`")
    name = _create_pg_database()
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    finally:
        _drop_pg_database(name)


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The market's two supported databases: embedded SQLite and PostgreSQL."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'market.db'}"
    else:
        yield request.getfixturevalue("pg_url")
