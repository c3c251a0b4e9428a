"""Dropped PostgreSQL connections for the tests (issue 37): a hook that terminates the backend of
the connection about to run a statement (``pg_terminate_backend``, as an operator or a failover
would), so the statement meets a connection the server has closed."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, event

from tests.services.conftest import PG_ADMIN


def terminate(pid: int) -> None:
    """Terminate backend ``pid`` and wait until it is gone."""
    import psycopg

    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        for _ in range(200):
            row = admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()
            if row is None:
                return
            time.sleep(0.01)
    raise AssertionError(f"backend {pid} still alive")


@contextmanager
def killing(engine: Engine, when: Callable[[int, str], bool]) -> Iterator[list[str]]:
    """While the block runs, terminate the backend of the connection about to run the n-th
    statement (counted from 1 on ``engine``) whenever ``when(n, statement)``; yields the
    statements that met a terminated connection."""
    count = [0]
    met: list[str] = []

    def before(conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        count[0] += 1
        if when(count[0], statement):
            met.append(statement)
            terminate(conn.connection.dbapi_connection.info.backend_pid)

    event.listen(engine, "before_cursor_execute", before)
    try:
        yield met
    finally:
        event.remove(engine, "before_cursor_execute", before)
