"""Purchase batches on PostgreSQL in two round trips: psycopg's pipeline mode, no ORM layer.

The market's hottest path. :func:`purchases.book_purchases` takes one round trip per statement
through SQLAlchemy; here the same batch is decided by the same pure functions
(:func:`purchases.decide`, :func:`purchases.queue_bookings`) around two pipelined exchanges:

1. ``BEGIN`` and every read at once: the callers' ids by token, the rounds (``FOR SHARE``), the
   buyers' wallets (``FOR UPDATE``, ascending id), their stored Idempotency-Keys, their past
   purchases, fresh ids for the rows to come and, the first time, the pool shard accounts. The
   statements still run one after another on the server, each on its own snapshot, so the keys
   and purchases read after the wallet lock see any twin request that committed first.
2. One statement writing every row (:class:`~mots.platform.bulk.BatchWrite`) and ``COMMIT``.

A batch that needs an account made (a wallet missing, a pool shard not found) raises
:class:`NeedsSetup` before writing anything: the general path books it and makes them.
Ids are reserved for every request, so a refused one leaves a gap in the sequences (as a
rolled-back insert would).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg import errors
from sqlalchemy.engine import make_url

from mots.platform.bulk import BatchWrite
from services.market.models import (
    Account,
    Client,
    IdempotencyKey,
    LedgerTransaction,
    MarketRound,
    Purchase,
)
from services.market.purchases import (
    BatchView,
    BookedBatch,
    PurchaseRequest,
    decide,
    finish,
    queue_bookings,
    shard_names,
)

log = logging.getLogger(__name__)

# The callers, by token or (when this process knows it) by id; ``%b``: lists sent in binary,
# which psycopg encodes far faster than PostgreSQL's text format for arrays. The names built in
# SQL ('wallet:' || id, 'client:' || id) are ledger.wallet_name's and purchases.principal_of's.
_CALLERS = f"""
    SELECT token_hash, id FROM {Client.__tablename__}
    WHERE token_hash = ANY(%(verifiers)b) OR id = ANY(%(client_ids)b)"""

_ROUNDS = f"""
    SELECT id, state, price_micros FROM {MarketRound.__tablename__}
    WHERE id = ANY(%(round_ids)b) FOR SHARE"""

_WALLETS = f"""
    SELECT a.client_id, a.id, a.balance_micros FROM {Account.__tablename__} a
    WHERE a.name = ANY(ARRAY(
        SELECT 'wallet:' || c.id FROM {Client.__tablename__} c
        WHERE c.token_hash = ANY(%(verifiers)b) OR c.id = ANY(%(client_ids)b)))
    ORDER BY a.id FOR UPDATE"""

_STORED_KEYS = f"""
    SELECT principal, key, request_hash, status_code, response_json
    FROM {IdempotencyKey.__tablename__}
    WHERE key = ANY(%(keys)b) AND principal = ANY(ARRAY(
        SELECT 'client:' || c.id FROM {Client.__tablename__} c
        WHERE c.token_hash = ANY(%(verifiers)b) OR c.id = ANY(%(client_ids)b)))"""

_BOUGHT = f"""
    SELECT p.round_id, p.client_id FROM {Purchase.__tablename__} p
    WHERE p.round_id = ANY(%(round_ids)b) AND p.client_id = ANY(ARRAY(
        SELECT c.id FROM {Client.__tablename__} c
        WHERE c.token_hash = ANY(%(verifiers)b) OR c.id = ANY(%(client_ids)b)))"""

_IDS = f"""
    WITH s AS (SELECT pg_get_serial_sequence('{LedgerTransaction.__tablename__}', 'id') AS t,
                      pg_get_serial_sequence('{Purchase.__tablename__}', 'id') AS p)
    SELECT nextval(s.t), nextval(s.p) FROM s, generate_series(1, %(n)s)"""

_ACCOUNT_IDS = f"SELECT name, id FROM {Account.__tablename__} WHERE name = ANY(%(names)b)"

PURCHASE_CONNECTION_OPTIONS = "-c enable_seqscan=off"
"""Every read and write of a batch is a keyed lookup (unique or indexed columns) or a scan of its
own parameters, so these connections forbid sequential scans. psycopg prepares a statement after
five runs and PostgreSQL then settles on a generic plan: without this, one made while a table
was nearly empty scans it sequentially for ever after (the market's general connections plan
every run instead, :data:`mots.platform.db.PG_CONNECT_ARGS`, which costs this path about 0.6 ms
of database time per purchase)."""

# Aborted by a lock conflict or a race (retried), or the connection dropped (reopened).
_RETRYABLE = (errors.DeadlockDetected, errors.SerializationFailure, errors.UniqueViolation)


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
        self._idle: list[psycopg.AsyncConnection[Any]] = []
        self._slots = asyncio.Semaphore(connections)
        self._tries = tries
        self.account_ids: dict[str, int] = {}

    async def _connect(self) -> psycopg.AsyncConnection[Any]:
        return await psycopg.AsyncConnection.connect(
            self._conninfo, autocommit=True, options=PURCHASE_CONNECTION_OPTIONS
        )

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
                        if (not conn.closed and not conn.broken) or attempt == self._tries - 1:
                            raise
                        log.warning("purchase connection dropped; reconnecting")
                        await conn.close()
                        conn = await self._connect()
                    else:
                        return done
                    await asyncio.sleep(0.002 * 2**attempt)
                raise AssertionError("unreachable")
            finally:
                if conn.closed or conn.broken:
                    await conn.close()
                else:
                    self._idle.append(conn)

    async def _book(
        self, conn: psycopg.AsyncConnection[Any], requests: Sequence[PurchaseRequest], shard: int
    ) -> BookedBatch:
        verifiers = sorted({r.verifier for r in requests if r.client_id is None})
        known_ids = sorted({r.client_id for r in requests if r.client_id is not None})
        who = {"verifiers": verifiers, "client_ids": known_ids}
        round_ids = sorted({r.round_id for r in requests})
        shards = shard_names(requests, shard)
        unknown_shards = [n for n in shards if n not in self.account_ids]
        async with conn.pipeline() as pipeline, conn.transaction():
            callers = await conn.execute(_CALLERS, who)
            rounds = await conn.execute(_ROUNDS, {"round_ids": round_ids})
            wallets = await conn.execute(_WALLETS, who)
            stored = await conn.execute(
                _STORED_KEYS, {**who, "keys": sorted({r.key for r in requests})}
            )
            bought = await conn.execute(_BOUGHT, {**who, "round_ids": round_ids})
            ids = await conn.execute(_IDS, {"n": len(requests)})
            accounts = (
                await conn.execute(_ACCOUNT_IDS, {"names": unknown_shards})
                if unknown_shards
                else None
            )
            await pipeline.sync()
            client_of = {v: c for v, c in await callers.fetchall()}
            view = BatchView(
                client_of=client_of,
                rounds={r[0]: (r[1], r[2]) for r in await rounds.fetchall()},
                wallets={r[0]: (r[1], r[2]) for r in await wallets.fetchall()},
                stored={(r[0], r[1]): (r[2], r[3], r[4]) for r in await stored.fetchall()},
                bought={(r[0], r[1]) for r in await bought.fetchall()},
            )
            reserved = await ids.fetchall()
            found = dict(await accounts.fetchall()) if accounts is not None else {}
            if any(c not in view.wallets for c in (*client_of.values(), *known_ids)):
                raise NeedsSetup("a caller has no wallet yet (or is no client)")
            verdict = decide(requests, view)
            buys = verdict.buys()
            if buys:
                shard_ids = {**self.account_ids, **found}
                if any(n not in shard_ids for n in shard_names(buys, shard)):
                    raise NeedsSetup("a pool shard account is missing")
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
                sql, params = writes.pg_statement("%({})s")
                await conn.execute(sql, params)
        self.account_ids.update(found)  # committed: they exist
        return finish(verdict)

    async def close(self) -> None:
        """Close the idle connections (a batch in flight closes its own when done)."""
        idle, self._idle = self._idle, []
        for conn in idle:
            await conn.close()
