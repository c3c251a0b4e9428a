"""Group commit for purchases: the purchases in flight are booked together, one transaction each batch.

:func:`purchase_batcher` hands :class:`PurchaseBooking` to a
:class:`~mots.platform.batching.MicroBatcher`. :class:`PurchaseBooking` books each batch with
:func:`purchases.book_purchases` (or, on PostgreSQL, the pipelined
:class:`~services.market.purchases_pg.PgPurchaseBook`) in one transaction: through
:class:`Transactions`, on the event loop with an async engine (PostgreSQL), else in a worker thread
(SQLite). A batch that fails for a reason other than a retryable conflict (which the transaction
helpers retry) is booked again one request at a time, so one bad request cannot fail the others.
After a batch commits, :class:`DeclaredWatch` checks whether its rounds are now fully declared, off
the purchases' path (one check per round at a time).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias, TypeVar

from sqlalchemy import Engine
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.orm import Session, sessionmaker

from mots.platform.batching import MicroBatcher
from mots.platform.db import make_read_sessionmaker
from mots.platform.transactions import in_transaction, in_transaction_async
from services.market import ledger
from services.market.decisions import all_declared
from services.market.errors import Refusal, Unavailable
from services.market.purchases import BookedBatch, PurchaseRequest, book_purchases
from services.market.purchases_pg import NeedsSetup, PgPurchaseBook

log = logging.getLogger(__name__)

PurchaseResult: TypeAlias = tuple[int, dict[str, Any]]
PurchaseBatcher: TypeAlias = MicroBatcher[PurchaseRequest, PurchaseResult]
T = TypeVar("T")
DECLARED_CHECK_INTERVAL_S = 0.25
"""Least time between two "every client declared?" checks of one round by the purchase path."""


@dataclass(frozen=True)
class Transactions:
    """Runs a unit of work in one ledger transaction, retried on a conflict.

    On the event loop with ``async_factory`` (PostgreSQL), else in a worker thread with ``factory``.
    """

    factory: sessionmaker[Session]
    async_factory: async_sessionmaker[AsyncSession] | None = None

    async def run(self, work: Callable[[Session], T]) -> T:
        """``work(session)`` inside a transaction; its result once committed."""
        if self.async_factory is not None:
            return await in_transaction_async(self.async_factory, work)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, in_transaction, self.factory, work)

    async def read(self, work: Callable[[Session], T]) -> T:
        """``work(session)`` that only reads: on SQLite in a deferred transaction, which neither
        takes the write lock nor waits for it (a writer that found it taken would sleep in
        SQLite's busy handler, tens of milliseconds, while the batches queue behind it)."""
        if self.async_factory is not None:
            return await in_transaction_async(self.async_factory, work)
        bind = self.factory.kw.get("bind")
        reads = make_read_sessionmaker(bind) if isinstance(bind, Engine) else self.factory
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, in_transaction, reads, work)


@dataclass
class DeclaredWatch:
    """Hears which rounds a batch booked and tells ``on_complete`` once one is fully declared.

    One check per round at a time, as a background task off the purchases' path: a round booked
    again while its check runs is looked at again after it, at most every
    :data:`DECLARED_CHECK_INTERVAL_S`. ``on_complete(round_id)`` (blocking) runs in a thread.
    """

    transactions: Transactions
    on_complete: Callable[[int], None] | None = None
    _checking: set[int] = field(default_factory=set)  # rounds whose check is running
    _recheck: set[int] = field(default_factory=set)  # rounds booked again while it ran
    _background: set[asyncio.Task[None]] = field(default_factory=set)

    def booked(self, round_ids: Iterable[int]) -> None:
        """Purchases of ``round_ids`` just committed: check them (on the running event loop)."""
        for round_id in round_ids:
            if round_id in self._checking:
                self._recheck.add(round_id)
                continue
            self._checking.add(round_id)
            task = asyncio.get_running_loop().create_task(self._check(round_id))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def _check(self, round_id: int) -> None:
        try:
            while True:
                self._recheck.discard(round_id)
                if await self.transactions.read(lambda s: all_declared(s, round_id)):
                    if self.on_complete is not None:
                        await asyncio.to_thread(self.on_complete, round_id)
                    return
                # Not yet: look again after purchases booked meanwhile, at most every interval
                # (the query counts every client, so it is not run once per batch).
                await asyncio.sleep(DECLARED_CHECK_INTERVAL_S)
                if round_id not in self._recheck:
                    return
        except Exception:  # the purchases are booked; the orchestration also polls
            log.exception("checking whether round %d is fully declared failed", round_id)
        finally:
            self._checking.discard(round_id)


class PurchaseBooking:
    """Books batches of purchases, each in one transaction into a pool shard of its own.

    :meth:`handle` is the :class:`~mots.platform.batching.MicroBatcher`'s handler: one result per
    request, in order; a batch that fails is booked again one request at a time. After a batch
    commits, ``on_booked`` (on the event loop) and the ``watch`` hear of it.
    """

    def __init__(
        self,
        transactions: Transactions,
        watch: DeclaredWatch,
        on_booked: Callable[[BookedBatch], None] | None = None,
        pipelined: PgPurchaseBook | None = None,
    ) -> None:
        self._transactions = transactions
        self._watch = watch
        self._on_booked = on_booked
        self._pipelined = pipelined
        self._rng = random.Random()
        self._in_flight: set[int] = set()  # pool shards of the batches being booked
        self._account_ids: dict[str, int] = {}  # pool shard accounts, kept once committed

    async def handle(
        self, requests: Sequence[PurchaseRequest]
    ) -> list[PurchaseResult | BaseException]:
        """Book ``requests`` together; if that fails, one at a time."""
        if len(requests) == 1:
            return [await self._alone(requests[0])]
        try:
            done = await self.book(requests)
        except Exception:
            log.exception("a batch of %d purchases failed; booking them one by one", len(requests))
            return [await self._alone(r) for r in requests]
        self._booked(done)
        return list(done.outcomes)

    async def book(self, requests: Sequence[PurchaseRequest]) -> BookedBatch:
        """Book ``requests`` in one transaction (pipelined on PostgreSQL once the accounts exist)."""
        # A shard no batch of this process holds, drawn at random: other API processes (workers,
        # replicas) draw theirs alike, so two batches rarely wait on one pool row.
        shard = self._rng.choice([k for k in range(ledger.POOL_SHARDS) if k not in self._in_flight])
        self._in_flight.add(shard)
        try:
            if self._pipelined is not None:
                with contextlib.suppress(NeedsSetup):  # else booked below, making the accounts
                    return await self._pipelined.book(requests, shard)
            seen: dict[str, int] = {}

            def work(s: Session) -> BookedBatch:
                seen.clear()
                seen.update(self._account_ids)
                return book_purchases(s, requests, shard, seen)

            done = await self._transactions.run(work)
            self._account_ids.update(seen)
            return done
        finally:
            self._in_flight.discard(shard)

    async def _alone(self, request: PurchaseRequest) -> PurchaseResult | BaseException:
        try:
            done = await self.book([request])
        except Refusal as exc:
            return exc
        except Exception:
            log.exception("purchase %s could not be booked", request)
            return Unavailable(
                "ledger",
                "the purchase could not be booked now; retry with the same Idempotency-Key",
            )
        self._booked(done)
        return done.outcomes[0]

    def _booked(self, done: BookedBatch) -> None:
        if self._on_booked is not None:
            try:
                self._on_booked(done)
            except Exception:  # the money is booked; a lost metric is logged
                log.exception("after-booking hook failed")
        self._watch.booked(done.rounds_booked)


def purchase_batcher(
    factory: sessionmaker[Session],
    async_factory: async_sessionmaker[AsyncSession] | None = None,
    on_booked: Callable[[BookedBatch], None] | None = None,
    on_complete: Callable[[int], None] | None = None,
    max_batch: int = 256,
    writers: int = 2,
    pipelined: PgPurchaseBook | None = None,
) -> PurchaseBatcher:
    """A batcher that books purchases, then calls ``on_booked`` (on the event loop) per batch.

    With ``pipelined`` (PostgreSQL) a batch is booked in two round trips
    (:mod:`services.market.purchases_pg`), else, and whenever that path needs an account made,
    on a session: on the event loop with ``async_factory``, else in a thread with ``factory``.
    ``writers`` batches are booked at once, each into its own pool shard (at most
    :data:`ledger.POOL_SHARDS`).
    ``on_complete(round_id)`` (blocking: run in a thread) hears of a round whose every client
    has declared once a purchase made it so.
    """
    if writers > ledger.POOL_SHARDS:
        raise ValueError(
            f"writers: at most {ledger.POOL_SHARDS} (one pool shard each), got {writers}"
        )
    transactions = Transactions(factory, async_factory)
    booking = PurchaseBooking(
        transactions, DeclaredWatch(transactions, on_complete), on_booked, pipelined
    )
    return MicroBatcher(booking.handle, max_batch=max_batch, name="purchases", writers=writers)
