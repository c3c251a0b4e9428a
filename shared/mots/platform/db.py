"""A service's database: its engine and sessions, the transaction a unit of work runs in, and
rows written many to a statement (SQLite default, PostgreSQL in production).

One module for how the platform talks to its database, because the three parts answer the same
two dialects and lean on each other: the engine makes SQLite writers queue (``BEGIN
IMMEDIATE``) so that :func:`in_transaction` rarely retries, the retry reads what a bulk write
already booked (unique keys), and the bulk statements are written for the plans the engine's
connection settings keep (:data:`PG_CONNECT_ARGS`).

Engines and sessions: SQLite runs in WAL mode and every writing transaction starts with ``BEGIN
IMMEDIATE``, so concurrent writers queue on the database lock instead of failing at commit;
sessions of :func:`make_read_sessionmaker` begin deferred (``BEGIN``) and read a WAL snapshot
without taking the write lock. PostgreSQL uses row locks.

Transactions (:func:`in_transaction`, :func:`in_transaction_async`): a unit of work runs in one
transaction, retried when PostgreSQL aborts it on a deadlock (40P01) or serialization failure
(40001), when SQLite is locked, or when a concurrent insert violates a unique constraint that
the retry then reads as "already done".

Bulk writes: many rows in one statement. PostgreSQL takes each column as one array parameter
(``unnest``), so a batch of n rows costs one round trip and one prepared statement whatever n
is: the SQL text depends only on the table and the column names, so it is built once and
psycopg prepares it once per connection. SQLite (in-process, no round trips) takes the same rows
by ``executemany``. :class:`BatchWrite` sends each table's rows as one JSON text instead:
several tables in one statement, and far cheaper for the client to encode than arrays of long
strings.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import (
    Column,
    ColumnElement,
    Connection,
    Engine,
    Select,
    Table,
    any_,
    bindparam,
    create_engine,
    event,
    func,
    insert,
    text,
    update,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, IntegrityError
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


def private_sqlite_file(path: Path) -> None:
    """Create the SQLite file (and its directory) readable by its owner only, or make an existing
    one so: mode 600. SQLite gives its ``-wal`` and ``-shm`` files the database file's mode, so
    the ledger, its tokens' verifiers and node keys are nobody else's to read (issue 37)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    if path.stat().st_mode & 0o777 != 0o600:
        path.chmod(0o600)


def make_engine(url: str, pool_size: int = 20) -> Engine:
    """An engine for ``url``; creates the SQLite file's directory when needed, and the file
    private (:func:`private_sqlite_file`)."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            private_sqlite_file(Path(parsed.database))
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
    (:func:`in_transaction_async`).
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


# Transactions

T = TypeVar("T")
RETRYABLE_SQLSTATES = {"40001", "40P01"}


DISCONNECT_SQLSTATE_CLASSES = ("08", "57P")
"""SQLSTATE classes of a lost connection: connection exceptions (08…) and operator intervention
(57P01 ``admin_shutdown``, what ``pg_terminate_backend`` sends; 57P02 crash; 57P03 starting)."""
DISCONNECT_MESSAGES = (
    "terminating connection",
    "server closed the connection",
    "connection is closed",
    "connection is lost",
    "consuming input failed",
    "the database system is",
)
"""What a dropped connection says when the driver gives no SQLSTATE (the socket closed under a
query)."""


def dropped_connection(exc: BaseException) -> bool:
    """``exc`` says the database connection was lost (the server restarted, the backend was
    terminated): nothing of the transaction committed, unless the drop hit the COMMIT itself."""
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return True
    orig = getattr(exc, "orig", None) or exc
    code = getattr(orig, "sqlstate", None) or ""
    if code.startswith(DISCONNECT_SQLSTATE_CLASSES):
        return True
    return any(m in str(orig) for m in DISCONNECT_MESSAGES)


def _retryable(exc: DBAPIError) -> bool:
    if isinstance(exc, IntegrityError) or dropped_connection(exc):
        # A dropped connection (e.g. the database restarted): its transaction did not commit,
        # or, if the drop hit the COMMIT, the retry reads what it booked (idempotency keys).
        return True
    code = getattr(exc.orig, "sqlstate", None)
    return code in RETRYABLE_SQLSTATES or "database is locked" in str(exc.orig)


def retry_delay(exc: DBAPIError, attempt: int) -> float:
    """Seconds before the next try: short for a lock or a conflict (2 ms doubling), longer for a
    dropped connection (50 ms doubling, at most 1 s), so a database that is restarting or whose
    connections are being terminated has time to take new ones (issue 37)."""
    if dropped_connection(exc):
        return min(0.05 * 2.0**attempt, 1.0)
    return 0.002 * 2.0**attempt


def in_transaction(
    factory: sessionmaker[Session], work: Callable[[Session], T], tries: int = 8
) -> T:
    """Run ``work`` in a fresh transaction, committing on success and retrying retryable errors
    (:func:`retry_delay` apart)."""
    for attempt in range(tries):
        try:
            with factory() as session, session.begin():
                return work(session)
        except DBAPIError as exc:
            if attempt == tries - 1 or not _retryable(exc):
                raise
            time.sleep(retry_delay(exc, attempt))
    raise AssertionError("unreachable")


async def in_transaction_async(
    factory: async_sessionmaker[AsyncSession], work: Callable[[Session], T], tries: int = 8
) -> T:
    """:func:`in_transaction` on an async engine: ``work`` runs on the event loop (greenlet)."""
    for attempt in range(tries):
        try:
            async with factory() as session, session.begin():
                return await session.run_sync(work)
        except DBAPIError as exc:
            if attempt == tries - 1 or not _retryable(exc):
                raise
            await asyncio.sleep(retry_delay(exc, attempt))
    raise AssertionError("unreachable")


# Bulk writes

_PG = postgresql.dialect()  # type: ignore[no-untyped-call]


def _q(name: str) -> str:
    return str(_PG.identifier_preparer.quote(name))


@lru_cache(maxsize=256)
def _column_type(table: Table, column: str) -> str:
    return str(table.c[column].type.compile(dialect=_PG))


def _array_type(table: Table, column: str) -> str:
    return _column_type(table, column) + "[]"


def one_of(column: Column[Any], name: str, dialect: str) -> ColumnElement[bool]:
    """``column`` equals one element of the list parameter ``name``.

    PostgreSQL: ``= ANY(:name)``, one array parameter, so the SQL text is the same for every
    list length and the statement stays prepared; elsewhere an expanding ``IN (...)``.
    """
    if dialect == "postgresql":
        return column == any_(bindparam(name, type_=postgresql.ARRAY(column.type)))
    return column.in_(bindparam(name, expanding=True))


def one_of_select(column: Column[Any], values: Select[Any], dialect: str) -> ColumnElement[bool]:
    """``column`` equals one value of the one-column query ``values``.

    PostgreSQL: ``= ANY(ARRAY(…))``, the values gathered once and each looked up by index (as
    :func:`one_of`'s array is); elsewhere ``IN (…)``.
    """
    if dialect == "postgresql":
        return column == any_(func.array(values.scalar_subquery()))
    return column.in_(values)


def _insert_sql(
    table: Table,
    columns: tuple[str, ...],
    conflict: tuple[str, ...],
    conflict_update: tuple[str, ...],
) -> str:
    """``INSERT … SELECT * FROM unnest(:<column> arrays)`` with its conflict clause."""
    arrays = ", ".join(f"CAST(:{c} AS {_array_type(table, c)})" for c in columns)
    names = ", ".join(_q(c) for c in columns)
    sql = f"INSERT INTO {_q(table.name)} ({names}) SELECT * FROM unnest({arrays})"
    if conflict:
        sql += f" ON CONFLICT ({', '.join(_q(c) for c in conflict)}) DO "
        sql += (
            "UPDATE SET " + ", ".join(f"{_q(c)} = excluded.{_q(c)}" for c in conflict_update)
            if conflict_update
            else "NOTHING"
        )
    return sql


def _add_sql(table: Table, key: str, column: str) -> str:
    """``UPDATE … SET column = column + amount`` from ``:keys``/``:amounts``."""
    t, k, c = _q(table.name), _q(key), _q(column)
    return (
        f"UPDATE {t} SET {c} = {t}.{c} + d.amount FROM unnest("
        f"CAST(:keys AS {_array_type(table, key)}), "
        f"CAST(:amounts AS {_array_type(table, column)})) AS d(k, amount) "
        f"WHERE {t}.{k} = d.k"
    )


@lru_cache(maxsize=256)
def _pg_insert(
    table: Table,
    columns: tuple[str, ...],
    returning: tuple[str, ...],
    conflict: tuple[str, ...],
    conflict_update: tuple[str, ...],
) -> Any:
    sql = _insert_sql(table, columns, conflict, conflict_update)
    if returning:
        sql += f" RETURNING {', '.join(_q(c) for c in returning)}"
    return text(sql)


def insert_rows(
    conn: Connection,
    table: Table,
    rows: Sequence[Mapping[str, Any]],
    returning: Sequence[str] = (),
    conflict: Sequence[str] = (),
    conflict_update: Sequence[str] = (),
) -> list[tuple[Any, ...]]:
    """Insert ``rows`` (all with the same keys) in one statement; the ``returning`` columns.

    ``conflict`` names a unique key: a row that collides with an existing one updates its
    ``conflict_update`` columns (or is skipped when there are none). Returned rows come in no
    guaranteed order (return a key to match them with ``rows``), but ids drawn from a sequence
    ascend in the order of ``rows``, which are inserted in order. Every column without a value in
    ``rows`` takes its server default or NULL: SQLAlchemy's Python-side defaults do not run.
    """
    if not rows:
        return []
    columns = tuple(rows[0])
    if conn.dialect.name == "postgresql":
        stmt = _pg_insert(table, columns, tuple(returning), tuple(conflict), tuple(conflict_update))
        params = {c: [row[c] for row in rows] for c in columns}
        result = conn.execute(stmt, params)
        return [tuple(r) for r in result] if returning else []
    ins: Any = insert(table)
    if conflict:
        ins = sqlite_insert(table)
        ins = (
            ins.on_conflict_do_update(
                index_elements=list(conflict),
                set_={c: ins.excluded[c] for c in conflict_update},
            )
            if conflict_update
            else ins.on_conflict_do_nothing(index_elements=list(conflict))
        )
    if not returning:
        conn.execute(ins, [dict(r) for r in rows])
        return []
    ins = ins.returning(*(table.c[c] for c in returning), sort_by_parameter_order=True)
    return [tuple(r) for r in conn.execute(ins, [dict(r) for r in rows])]


@lru_cache(maxsize=64)
def _pg_add(table: Table, key: str, column: str) -> Any:
    return text(_add_sql(table, key, column))


def add_to_column(
    conn: Connection, table: Table, key: str, column: str, amounts: Mapping[Any, int]
) -> None:
    """``column += amounts[k]`` for the row whose ``key`` is k, every row in one statement."""
    if not amounts:
        return
    keys = sorted(amounts)  # rows are locked in this order (ascending key)
    if conn.dialect.name == "postgresql":
        conn.execute(
            _pg_add(table, key, column), {"keys": keys, "amounts": [amounts[k] for k in keys]}
        )
        return
    from sqlalchemy import bindparam

    stmt = (
        update(table)
        .where(table.c[key] == bindparam("k"))
        .values({column: table.c[column] + bindparam("amount")})
    )
    conn.execute(stmt, [{"k": k, "amount": amounts[k]} for k in keys])


def reserve_ids(conn: Connection, table: Table, n: int) -> list[int]:
    """``n`` fresh primary keys of ``table`` (column ``id``), ascending, for rows inserted later.

    PostgreSQL draws them from the column's sequence (one statement). SQLite continues from the
    table's largest id: sound because our SQLite transactions start with ``BEGIN IMMEDIATE`` and
    hold the database's write lock until they end, so no one else inserts meanwhile.
    """
    if n <= 0:
        return []
    if conn.dialect.name == "postgresql":
        rows = conn.execute(
            text(
                "SELECT nextval(pg_get_serial_sequence(:table, 'id')) FROM generate_series(1, :n)"
            ),
            {"table": table.name, "n": n},
        )
        return sorted(int(r[0]) for r in rows)
    top = conn.execute(text(f"SELECT coalesce(max(id), 0) FROM {_q(table.name)}")).scalar_one()
    return list(range(int(top) + 1, int(top) + 1 + n))


@dataclass(frozen=True)
class Tally:
    """Count the rows an insert added (not those its conflict clause updated) into counters.

    Per value ``v`` of column ``group`` among the added rows, the row of ``table`` whose ``group``
    is ``v`` and whose ``fixed`` key columns hold their values gains the count in ``column``
    (upserted: the counter row is made when missing). Keeps a count of rows in O(1) per write.
    """

    table: Table
    column: str
    group: str
    fixed: tuple[tuple[str, int], ...] = ()


class BatchWrite:
    """Inserts and column additions collected, then written together by :meth:`flush`.

    PostgreSQL: one statement whose parts are data-modifying ``WITH`` queries, each taking its
    rows as one JSON parameter (``json_populate_recordset``: one round trip for the whole batch,
    and a JSON text costs the client far less to encode than arrays in PostgreSQL's text format;
    foreign keys between the parts are checked at the statement's end). Elsewhere: one statement
    per part, in order. Rows that others refer to need their ids up front (:func:`reserve_ids`);
    nothing is returned. As PostgreSQL's parts run on one snapshot, an :meth:`add` changes only
    rows that existed before the write, and no two parts may change the same row.
    """

    def __init__(self) -> None:
        self._parts: list[tuple[str, Table, tuple[Any, ...], Any]] = []

    def insert(
        self,
        table: Table,
        rows: Sequence[Mapping[str, Any]],
        conflict: Sequence[str] = (),
        conflict_update: Sequence[str] = (),
        tally: Tally | None = None,
    ) -> None:
        """Queue ``rows`` (all with the same keys) for ``table``; see :func:`insert_rows`.

        With ``tally``, the rows this write adds (not those a conflict updates) are counted.
        """
        if rows:
            shape = (tuple(rows[0]), tuple(conflict), tuple(conflict_update), tally)
            self._parts.append(("insert", table, shape, rows))

    def add(self, table: Table, key: str, column: str, amounts: Mapping[Any, int]) -> None:
        """Queue ``column += amounts[k]`` for the rows whose ``key`` is k; see :func:`add_to_column`."""
        if amounts:
            self._parts.append(("add", table, (key, column), amounts))

    def pg_statement(self, placeholder: str = ":{name}") -> tuple[str, dict[str, str]]:
        """PostgreSQL's single statement for everything queued, and its JSON parameters.

        ``placeholder`` formats each parameter from its ``name`` (``w0``, ``w1``, … as in the
        returned dict) and its 1-based ``position``: ``":{name}"`` for SQLAlchemy's ``text()``,
        ``"%({name})s"`` for psycopg, ``"${position}"`` for ``PREPARE``. Forgets what was queued.
        """
        parts, self._parts = self._parts, []
        params: dict[str, str] = {}
        for i, (kind, _table, _shape, data) in enumerate(parts):
            if kind == "insert":  # rows as JSON objects: columns are matched by name
                params[f"w{i}"] = json.dumps(data, default=_json_value)
            else:
                keys = sorted(data)  # rows are locked in this order (ascending key)
                params[f"w{i}"] = json.dumps([{"k": k, "amount": data[k]} for k in keys])
        shapes = tuple((kind, table, shape) for kind, table, shape, _ in parts)
        return _pg_batch_sql(shapes, placeholder), params

    def flush(self, conn: Connection) -> None:
        """Write everything queued (in one statement on PostgreSQL) and forget it."""
        if not self._parts:
            return
        if conn.dialect.name != "postgresql":
            parts, self._parts = self._parts, []
            for kind, table, shape, data in parts:
                if kind == "insert" and shape[3] is not None:
                    _insert_counted(conn, table, data, shape[1], shape[2], shape[3])
                elif kind == "insert":
                    insert_rows(conn, table, data, conflict=shape[1], conflict_update=shape[2])
                else:
                    add_to_column(conn, table, shape[0], shape[1], data)
            return
        sql, params = self.pg_statement()
        conn.execute(_text(sql), params)


def _insert_counted(
    conn: Connection,
    table: Table,
    rows: Sequence[Mapping[str, Any]],
    conflict: tuple[str, ...],
    conflict_update: tuple[str, ...],
    tally: Tally,
) -> None:
    """SQLite: insert what is new (returned, so counted), then update the rest; add the counts."""
    fresh = sqlite_insert(table).on_conflict_do_nothing(index_elements=list(conflict))
    added: dict[Any, int] = {}
    for row in rows:  # one row a statement: RETURNING answers for the rows actually inserted
        got = conn.execute(fresh.returning(table.c[tally.group]), dict(row)).first()
        if got is not None:
            added[got[0]] = added.get(got[0], 0) + 1
    if conflict_update:
        insert_rows(conn, table, rows, conflict=conflict, conflict_update=conflict_update)
    if not added:
        return
    counters = sqlite_insert(tally.table)
    keys = [tally.group, *(name for name, _ in tally.fixed)]
    counters = counters.on_conflict_do_update(
        index_elements=keys,
        set_={tally.column: tally.table.c[tally.column] + counters.excluded[tally.column]},
    )
    fixed = dict(tally.fixed)
    conn.execute(counters, [{tally.group: g, **fixed, tally.column: n} for g, n in added.items()])


def _json_value(value: Any) -> Any:
    """JSON for the values rows hold besides JSON's own: timestamps (ISO 8601) and decimals."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not a column value BatchWrite can send")


@lru_cache(maxsize=64)
def _text(sql: str) -> Any:
    return text(sql)


@lru_cache(maxsize=64)
def _pg_batch_sql(parts: tuple[tuple[str, Table, tuple[Any, ...]], ...], placeholder: str) -> str:
    queries = []
    for i, (kind, table, shape) in enumerate(parts):
        rows = f"CAST({placeholder.format(name=f'w{i}', position=i + 1)} AS json)"
        t = _q(table.name)
        if kind == "insert":
            columns, conflict, conflict_update, tally = shape
            names = ", ".join(_q(c) for c in columns)
            sql = (
                f"INSERT INTO {t} ({names}) "
                f"SELECT {names} FROM json_populate_recordset(NULL::{t}, {rows})"
            )
            if conflict:
                sql += f" ON CONFLICT ({', '.join(_q(c) for c in conflict)}) DO "
                sql += (
                    "UPDATE SET "
                    + ", ".join(f"{_q(c)} = excluded.{_q(c)}" for c in conflict_update)
                    if conflict_update
                    else "NOTHING"
                )
            if tally is not None:  # an inserted row has no xmax yet; an updated one has ours
                sql += f" RETURNING (xmax = 0) AS fresh, {_q(tally.group)} AS grp"
                queries.append(f"w{i} AS ({sql})")
                sql = _pg_tally_sql(f"w{i}", tally)
                queries.append(f"t{i} AS ({sql})")
                continue
        else:
            key, column = shape
            k, c = _q(key), _q(column)
            sql = (
                f"UPDATE {t} SET {c} = {t}.{c} + d.amount FROM json_to_recordset({rows}) "
                f"AS d(k {_column_type(table, key)}, amount {_column_type(table, column)}) "
                f"WHERE {t}.{k} = d.k"
            )
        queries.append(f"w{i} AS ({sql})")
    return "WITH " + ",\n".join(queries) + "\nSELECT 1"


def _pg_tally_sql(part: str, tally: Tally) -> str:
    """Upsert the counts of ``part``'s fresh rows per group into the tally's counter rows."""
    t, g, c = _q(tally.table.name), _q(tally.group), _q(tally.column)
    keys = [g, *(_q(name) for name, _ in tally.fixed)]
    values = ", ".join(str(int(v)) for _, v in tally.fixed)
    fixed = f", {values}" if values else ""
    return (
        f"INSERT INTO {t} ({', '.join(keys)}, {c}) "
        f"SELECT grp{fixed}, count(*) FROM {part} WHERE fresh GROUP BY grp "
        f"ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {c} = {t}.{c} + excluded.{c}"
    )
