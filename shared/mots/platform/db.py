"""A service's database engine and sessions (SQLite default, PostgreSQL in production).

SQLite runs in WAL mode and every writing transaction starts with ``BEGIN IMMEDIATE``, so
concurrent writers queue on the database lock instead of failing at commit; sessions of
:func:`make_read_sessionmaker` begin deferred (``BEGIN``) and read a WAL snapshot without taking
the write lock. PostgreSQL uses row locks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.orm import Session, sessionmaker

PG_CONNECT_ARGS = {"options": "-c plan_cache_mode=force_custom_plan"}
"""psycopg prepares a statement after five runs, and PostgreSQL would then settle on a generic
plan made while the tables were still small (sequential scans), keeping it as they grow: the
purchase path's key lookups went from 0.1 ms to 10 ms over 15,000 purchases. Custom plans see
each execution's parameters and the tables' current size."""


def make_engine(url: str, pool_size: int = 20) -> Engine:
    """An engine for ``url``; creates the SQLite file's directory when needed."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.close()

        @event.listens_for(engine, "begin")
        def _begin_immediate(conn: Any) -> None:
            read_only = conn.get_execution_options().get(READ_ONLY, False)
            conn.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")

        return engine
    if parsed.get_backend_name() == "postgresql" and parsed.drivername == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")
    return create_engine(
        parsed,
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_pre_ping=True,
        connect_args=PG_CONNECT_ARGS if parsed.get_backend_name() == "postgresql" else {},
    )


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    """Sessions that keep loaded values after commit (responses are built after it)."""
    return sessionmaker(engine, expire_on_commit=False)


READ_ONLY = "mots_read_only"
"""The execution option that makes a SQLite transaction begin deferred (no write lock)."""


def make_read_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    """Sessions for reads only: on SQLite they begin deferred, so a reader neither waits for
    the writers nor makes them wait (WAL snapshot); on PostgreSQL the same as
    :func:`make_sessionmaker`. A write in such a session may fail with ``database is locked``."""
    return sessionmaker(engine.execution_options(**{READ_ONLY: True}), expire_on_commit=False)


def make_async_engine(url: str, pool_size: int = 20) -> AsyncEngine | None:
    """An asyncio engine for a PostgreSQL ``url`` (psycopg's async mode); None for SQLite.

    The market's batched hot paths run their transactions on the event loop with it, so a
    round trip to the database costs no thread hand-off. No pre-ping (a round trip per
    transaction): a connection found dropped is discarded and the transaction retried
    (:func:`~mots.platform.transactions.in_transaction_async`).
    """
    parsed = make_url(url)
    if parsed.get_backend_name() != "postgresql":
        return None
    return create_async_engine(
        parsed.set(drivername="postgresql+psycopg"),
        pool_size=pool_size,
        max_overflow=pool_size,
        connect_args=PG_CONNECT_ARGS,
    )


def make_async_sessionmaker(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    """Async sessions that keep loaded values after commit."""
    return async_sessionmaker(engine, expire_on_commit=False)
