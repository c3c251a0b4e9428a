"""Purchase batches on PostgreSQL in two round trips: prepared statements, no ORM layer.

The market's hottest path. :func:`purchases.book_purchases` takes one round trip per statement
through SQLAlchemy; here the same batch is decided by the same pure functions
(:func:`purchases.decide`, :func:`purchases.queue_bookings`) around two exchanges, each one
message of several statements (the simple query protocol; parameters bound by psycopg):

1. ``BEGIN`` and every read: the callers' ids by token, the rounds (``FOR SHARE``), the buyers'
   wallets (``FOR UPDATE``, ascending id), their stored Idempotency-Keys, their past purchases,
   their memberships of the rounds' populations, fresh ids for the rows to come and, the first
   time, the pool shard accounts. The reads are the session path's own statements
   (:func:`purchases.batch_reads`), compiled for PostgreSQL and prepared here. The statements
   run one after another, each on its own snapshot, so the keys and purchases read after the
   wallet lock see any twin request that committed first.
2. One statement writing every row (:class:`~mots.platform.db.BatchWrite`) and ``COMMIT``.

Each statement is prepared once per connection (``PREPARE``; ``EXECUTE`` in the exchanges), so
PostgreSQL plans it once. psycopg's pipeline mode would also take two round trips, but it sends
each statement on its own (about 45 system calls a batch against 8 here, and 40% more CPU).

A batch that needs an account made (a wallet missing, a pool shard not found) raises
:class:`NeedsSetup` before writing anything: the general path books it and makes them.
Ids are reserved for every request, so a refused one leaves a gap in the sequences (as a
rolled-back insert would).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg import errors
from psycopg.pq import TransactionStatus
from sqlalchemy.dialects.postgresql import psycopg as pg_psycopg
from sqlalchemy.engine import make_url

from mots.platform.db import BatchWrite
from services.market.models import (
    LedgerTransaction,
    Purchase,
)
from services.market.purchases import (
    BatchReads,
    BatchView,
    BookedBatch,
    PurchaseRequest,
    batch_reads,
    decide,
    destination_names,
    finish,
    gone_models,
    queue_bookings,
    shard_names,
    split_bought,
)

log = logging.getLogger(__name__)

_IDS = (
    f"WITH s AS (SELECT pg_get_serial_sequence('{LedgerTransaction.__tablename__}', 'id') t, "
    f"pg_get_serial_sequence('{Purchase.__tablename__}', 'id') p) "
    "SELECT nextval(s.t), nextval(s.p) FROM s, generate_series(1, $1::INTEGER)"
)
"""Fresh ids for the batch's ledger transactions and purchases (the session path's
:func:`~mots.platform.db.reserve_ids`, both sequences in one statement)."""


def prepared(name: str, statement: Any) -> tuple[str, list[str]]:
    """``PREPARE mots_<name> AS …`` of a Core ``statement`` compiled for PostgreSQL (its
    parameters numbered in order of first use, their types cast in the SQL), and the names of
    its parameters in that order."""
    compiled = statement.compile(dialect=pg_psycopg.dialect())  # type: ignore[no-untyped-call]
    order: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match.group(1) not in order:
            order.append(match.group(1))
        return f"${order.index(match.group(1)) + 1}"

    return f"PREPARE mots_{name} AS {_PARAM.sub(number, compiled.string)}", order


_PARAM = re.compile(r"%\((\w+)\)s")


def _batch_statements() -> tuple[str, list[tuple[str, list[str]]]]:
    """Every statement to prepare per connection (the batch's reads, each defined once in
    :func:`purchases.batch_reads`, and the ids), and each one's name and parameters."""
    reads = batch_reads("postgresql")
    prepares, params = [f"PREPARE mots_ids AS {_IDS}"], []
    for name in BatchReads._fields:
        sql, order = prepared(name, getattr(reads, name))
        prepares.append(sql)
        params.append((name, order))
    return "; ".join(prepares), params


# Each connection prepares these once (PREPARE), so a batch's exchange names them (EXECUTE) and
# PostgreSQL reuses their plans.
_PREPARE_READS, _READ_PARAMS = _batch_statements()
_IN_EXCHANGE = ("callers", "rounds", "wallets", "stored_keys", "bought", "members")
# One exchange: BEGIN, then the reads in this order (each on its own snapshot), then the ids.
_READ_BATCH = (
    "BEGIN; "
    + "; ".join(
        f"EXECUTE mots_{name}({', '.join(['%s'] * len(order))})"
        for name, order in _READ_PARAMS
        if name in _IN_EXCHANGE
    )
    + "; EXECUTE mots_ids(%s)"
)
_READ_ACCOUNTS = "; EXECUTE mots_accounts(%s)"


def _read_params(arrays: dict[str, str]) -> list[str]:
    """The exchange's parameters: each read's lists, in its order."""
    return [arrays[p] for name, order in _READ_PARAMS if name in _IN_EXCHANGE for p in order]


PURCHASE_CONNECTION_OPTIONS = "-c enable_seqscan=off"
"""Every read and write of a batch is a keyed lookup (unique or indexed columns) or a scan of its
own parameters, so these connections forbid sequential scans. After five runs of a prepared
statement PostgreSQL settles on a generic plan: without this, one made while a table was nearly
empty scans it sequentially for ever after (the market's general connections plan every run
instead, :data:`mots.platform.db.PG_CONNECT_ARGS`, which costs this path about 0.6 ms of
database time per purchase)."""

# Aborted by a lock conflict or a race (retried), or the connection dropped (reopened).
_RETRYABLE = (errors.DeadlockDetected, errors.SerializationFailure, errors.UniqueViolation)


def array_literal(values: Sequence[str] | Sequence[int]) -> str:
    """PostgreSQL's text form of an array of ``values`` (each string quoted and escaped).

    Sent as a plain string that the prepared statement's parameter type reads: psycopg's own
    client-side encoding of a list costs about 5 µs an element, this a fraction of that.
    """
    if values and isinstance(values[0], str):
        return (
            '{"'
            + '","'.join(str(x).replace("\\", "\\\\").replace('"', '\\"') for x in values)
            + '"}'
        )
    return "{" + ",".join(str(int(x)) for x in values) + "}"


class NeedsSetup(Exception):
    """The batch needs an account made first (a wallet or a pool shard): book it the general way."""


def conninfo(url: str) -> str:
    """libpq's connection string for a SQLAlchemy PostgreSQL URL (driver name dropped)."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "postgresql":
        raise ValueError(f"database_url: {parsed.get_backend_name()} is not PostgreSQL")
    return parsed.set(drivername="postgresql").render_as_string(hide_password=False)


class PgPurchaseBook:
    """Books purchase batches on PostgreSQL, each in one transaction of two round trips.

    Holds up to ``connections`` connections of its own (one per batch in flight), opened on
    first use and reopened after a drop. ``account_ids`` remembers the pool shards' account ids
    (accounts are never renamed or deleted).
    """

    def __init__(self, url: str, connections: int = 2, tries: int = 8) -> None:
        if connections < 1:
            raise ValueError("connections: at least 1")
        self._conninfo = conninfo(url)
        self._idle: list[_Connection] = []
        self._slots = asyncio.Semaphore(connections)
        self._tries = tries
        self.account_ids: dict[str, int] = {}

    async def _connect(self) -> _Connection:
        conn = await psycopg.AsyncConnection.connect(
            self._conninfo,
            autocommit=True,  # transactions are the exchanges' own BEGIN … COMMIT
            options=PURCHASE_CONNECTION_OPTIONS,
            cursor_factory=psycopg.AsyncClientCursor,
        )
        await conn.execute(_PREPARE_READS)
        return _Connection(conn)

    async def book(self, requests: Sequence[PurchaseRequest], shard: int) -> BookedBatch:
        """Decide and book ``requests`` (see :func:`purchases.book_purchases`), retrying conflicts."""
        async with self._slots:
            conn = self._idle.pop() if self._idle else await self._connect()
            try:
                for attempt in range(self._tries):
                    try:
                        done = await self._book(conn, requests, shard)
                    except _RETRYABLE:
                        if attempt == self._tries - 1:
                            raise
                    except psycopg.OperationalError:
                        if not conn.broken or attempt == self._tries - 1:
                            raise
                        log.warning("purchase connection dropped; reconnecting")
                        await conn.close()
                        conn = await self._connect()
                    else:
                        return done
                    await asyncio.sleep(0.002 * 2**attempt)
                raise AssertionError("unreachable")
            finally:
                if conn.broken:
                    await conn.close()
                else:
                    self._idle.append(conn)

    async def _book(
        self, conn: _Connection, requests: Sequence[PurchaseRequest], shard: int
    ) -> BookedBatch:
        verifiers = sorted({r.verifier for r in requests if r.client_id is None})
        known_ids = sorted({r.client_id for r in requests if r.client_id is not None})
        round_ids = sorted({r.round_id for r in requests})
        keys = sorted({r.key for r in requests})
        unknown_shards = [n for n in shard_names(requests, shard) if n not in self.account_ids]
        query = _READ_BATCH + (_READ_ACCOUNTS if unknown_shards else "")
        arrays = {
            "verifiers": array_literal(verifiers),
            "client_ids": array_literal(known_ids),
            "round_ids": array_literal(round_ids),
            "keys": array_literal(keys),
        }
        params: list[Any] = [*_read_params(arrays), len(requests)]
        if unknown_shards:
            params.append(array_literal(unknown_shards))
        try:
            callers, rounds, wallets, stored, bought, members, reserved, *accounts = await conn.run(
                query, params
            )
            client_of = {v: c for v, c in callers}
            had, trained = split_bought(bought)
            view = BatchView(
                client_of=client_of,
                rounds={r[0]: (r[1], r[2]) for r in rounds},
                wallets={r[0]: (r[1], r[2]) for r in wallets},
                stored={(r[0], r[1]): (r[2], r[3], r[4]) for r in stored},
                bought=had,
                members={(r[0], r[1]) for r in members},
                trained=trained,
                gone=gone_models(rounds),
                tasks={r[0]: r[4] for r in rounds},
            )
            found: dict[str, int] = dict(accounts[0]) if accounts else {}
            if any(c not in view.wallets for c in (*client_of.values(), *known_ids)):
                raise NeedsSetup("a caller has no wallet yet (or is no client)")
            verdict = decide(requests, view)
            buys = verdict.buys()
            if not buys:
                await conn.run("COMMIT", [])
                return finish(verdict, view.tasks)
            shard_ids = {**self.account_ids, **found}
            if any(n not in shard_ids for n in destination_names(buys, view, shard)):
                raise NeedsSetup("a pool shard (or the subsidy) account is missing")
            writes = BatchWrite()
            queue_bookings(
                verdict,
                view,
                writes,
                shard,
                shard_ids,
                sorted(r[0] for r in reserved),
                sorted(r[1] for r in reserved),
                datetime.now(UTC),
            )
            sql, write_params = writes.pg_statement("${position}")
            name = await conn.prepared(sql, len(write_params))
            placeholders = ", ".join(["%s"] * len(write_params))
            await conn.run(f"EXECUTE {name}({placeholders}); COMMIT", list(write_params.values()))
        except BaseException:
            await conn.rollback()
            raise
        self.account_ids.update(found)  # committed: they exist
        return finish(verdict, view.tasks)

    async def close(self) -> None:
        """Close the idle connections (a batch in flight closes its own when done)."""
        idle, self._idle = self._idle, []
        for conn in idle:
            await conn.close()


class _Connection:
    """A connection of the purchase path: the write statements it has prepared, by SQL text."""

    def __init__(self, conn: psycopg.AsyncConnection[Any]) -> None:
        self._conn = conn
        self._writes: dict[str, str] = {}

    @property
    def broken(self) -> bool:
        """Whether the connection is unusable (closed or lost)."""
        return self._conn.closed or self._conn.broken

    async def run(self, query: str, params: Sequence[Any]) -> list[list[tuple[Any, ...]]]:
        """Send ``query`` (several statements, parameters bound here) in one exchange; the rows of
        each statement that returns rows, in order."""
        cur = self._conn.cursor()
        await cur.execute(query.encode(), params)
        out: list[list[tuple[Any, ...]]] = []
        while True:
            if cur.description is not None:
                out.append(await cur.fetchall())
            if not cur.nextset():
                return out

    async def prepared(self, sql: str, n_params: int) -> str:
        """The name of the prepared statement for ``sql`` (its ``n_params`` are JSON), made once."""
        name = self._writes.get(sql)
        if name is None:
            name = f"mots_write_{len(self._writes)}"
            types = ", ".join(["json"] * n_params)
            await self._conn.execute(f"PREPARE {name}({types}) AS {sql}".encode())
            self._writes[sql] = name
        return name

    async def rollback(self) -> None:
        """End a transaction left open by a failed or abandoned exchange."""
        if not self.broken and self._conn.info.transaction_status != TransactionStatus.IDLE:
            await self._conn.execute(b"ROLLBACK")

    async def close(self) -> None:
        """Close the connection."""
        await self._conn.close()
