"""The market's write path, once: group commit for purchases, declarations and registrations.

Each kind of request is collected by a :class:`~mots.platform.batching.MicroBatcher` and booked by
one :class:`Booking`: every batch in one ledger transaction (:class:`Transactions`: on the event
loop with an async engine, PostgreSQL; else in a worker thread, SQLite), into a shard of its own
(:class:`Shards`: a pool or tally shard no other batch of this process holds, so two batches
rarely wait on one row). One refusal rule for all three: a batch that raises is booked again one
request at a time, so one bad request cannot fail the others; alone, a request whose booking
raises a :class:`~services.market.errors.Refusal` gets that refusal, any other failure an
:class:`~services.market.errors.Unavailable` (retry). After a batch commits, its hook runs and
the :class:`DeclaredWatch` checks whether its rounds are now fully declared, off the request's
path (one check per round at a time).

The kinds differ only in their book function: :func:`purchase_batcher`
(:func:`~services.market.purchases.book_purchases`, or on PostgreSQL the pipelined
:class:`~services.market.purchases_pg.PgPurchaseBook`), :func:`decision_batcher`
(:func:`~services.market.decisions.book_declarations`) and :func:`registration_batcher`
(:func:`~services.market.registration.register_enrolled`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeAlias, TypeVar

from sqlalchemy import Engine
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.orm import Session, sessionmaker

from mots.platform import metrics
from mots.platform.api.market import DecisionOut
from mots.platform.batching import MicroBatcher
from mots.platform.db import in_transaction, in_transaction_async, make_read_sessionmaker
from services.market import ledger
from services.market.decisions import Declaration, all_declared, book_declarations
from services.market.errors import Refusal, Unavailable
from services.market.purchases import BookedBatch, PurchaseRequest, book_purchases
from services.market.purchases_pg import NeedsSetup, PgPurchaseBook
from services.market.registration import Enrolled, Registered, register_enrolled

log = logging.getLogger(__name__)

T = TypeVar("T")
Req = TypeVar("Req")
Res = TypeVar("Res")
PurchaseResult: TypeAlias = tuple[int, dict[str, Any]]
PurchaseBatcher: TypeAlias = MicroBatcher[PurchaseRequest, PurchaseResult]
DecisionBatcher: TypeAlias = MicroBatcher[Declaration, DecisionOut]
RegistrationBatcher: TypeAlias = MicroBatcher[Enrolled, Registered]
DECLARED_CHECK_INTERVAL_S = 0.25
"""Most time between two "every client declared?" checks of a round whose bookings keep coming
(the check counts every client, so it is not run once per batch)."""

DECLARED_CHECK_MIN_GAP_S = 0.1
"""Least time between two checks of one round: a round whose bookings went quiet is checked
again this soon, so the last client's declaration is heard within tens of milliseconds."""

DECLARED_QUIET_S = 0.02
"""A round with no booking for this long has gone quiet (its clients may all have declared)."""


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

    One check per round at a time, as a background task off the requests' path: a round booked
    again while its check runs is looked at again after it, once its bookings go quiet
    (:data:`DECLARED_QUIET_S`, at least :data:`DECLARED_CHECK_MIN_GAP_S` after the last check) or
    at the latest :data:`DECLARED_CHECK_INTERVAL_S` after it while they keep coming.
    ``on_complete(round_id)`` (blocking) runs in a thread.
    """

    transactions: Transactions
    on_complete: Callable[[int], None] | None = None
    _checking: set[int] = field(default_factory=set)  # rounds whose check is running
    _recheck: set[int] = field(default_factory=set)  # rounds booked again while it ran
    _last_booked: dict[int, float] = field(default_factory=dict)  # loop time, per round
    _background: set[asyncio.Task[None]] = field(default_factory=set)

    def booked(self, round_ids: Iterable[int]) -> None:
        """Decisions in ``round_ids`` just committed: check them (on the running event loop)."""
        now = asyncio.get_running_loop().time()
        for round_id in round_ids:
            self._last_booked[round_id] = now
            if round_id in self._checking:
                self._recheck.add(round_id)
                continue
            self._checking.add(round_id)
            task = asyncio.get_running_loop().create_task(self._check(round_id))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def _check(self, round_id: int) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                self._recheck.discard(round_id)
                checked_at = loop.time()
                if await self.transactions.read(lambda s: all_declared(s, round_id)):
                    if self.on_complete is not None:
                        await asyncio.to_thread(self.on_complete, round_id)
                    return
                # Not yet: look again after what was booked meanwhile.
                await self._until_next_check(round_id, checked_at)
                if round_id not in self._recheck:
                    return
        except Exception:  # the decisions are booked; the orchestration also polls
            log.exception("checking whether round %d is fully declared failed", round_id)
        finally:
            self._checking.discard(round_id)
            self._last_booked.pop(round_id, None)

    async def _until_next_check(self, round_id: int, checked_at: float) -> None:
        """Sleep until the round's bookings have gone quiet (no earlier than the least gap after
        the check at ``checked_at``), or until the interval after it has passed."""
        loop = asyncio.get_running_loop()
        earliest = checked_at + DECLARED_CHECK_MIN_GAP_S
        latest = checked_at + DECLARED_CHECK_INTERVAL_S
        while True:
            quiet_at = self._last_booked.get(round_id, checked_at) + DECLARED_QUIET_S
            wake = min(max(earliest, quiet_at), latest)
            now = loop.time()
            if now >= wake:
                return
            await asyncio.sleep(wake - now)


class Shards:
    """Hands each batch in flight a pool (or tally) shard no other batch of this process holds,
    drawn at random: other API processes (workers, replicas) draw theirs alike, so two batches
    rarely wait on one row."""

    def __init__(self, writers: int) -> None:
        if writers > ledger.POOL_SHARDS:
            raise ValueError(
                f"writers: at most {ledger.POOL_SHARDS} (one pool shard each), got {writers}"
            )
        self._rng = random.Random()
        self._in_flight: set[int] = set()

    @contextlib.contextmanager
    def take(self) -> Iterator[int]:
        """A free shard, held until the ``with`` block ends."""
        shard = self._rng.choice([k for k in range(ledger.POOL_SHARDS) if k not in self._in_flight])
        self._in_flight.add(shard)
        try:
            yield shard
        finally:
            self._in_flight.discard(shard)


@dataclass
class Booked(Generic[Res]):
    """What one batch did: an outcome per request (in order), how many it booked and the rounds
    in which it booked decisions (for the :class:`DeclaredWatch`)."""

    outcomes: list[Res | Refusal]
    booked: int = 0
    rounds_booked: list[int] = field(default_factory=list)


class Booking(Generic[Req, Res]):
    """Books batches of one kind of request: the :class:`MicroBatcher`'s handler.

    ``book(requests, shard)`` books a batch in one transaction and says what it did;
    ``unavailable`` is a request's answer when its booking failed for another reason than a
    refusal. After a batch commits, ``on_booked`` (on the event loop) and the ``watch`` hear of it.
    """

    def __init__(
        self,
        kind: str,
        book: Callable[[Sequence[Req], int], Awaitable[Booked[Res]]],
        shards: Shards,
        unavailable: Callable[[], Unavailable],
        watch: DeclaredWatch | None = None,
        on_booked: Callable[[Booked[Res]], None] | None = None,
    ) -> None:
        self._kind = kind
        self._book = book
        self._shards = shards
        self._unavailable = unavailable
        self._watch = watch
        self._on_booked = on_booked

    async def handle(self, requests: Sequence[Req]) -> list[Res | BaseException]:
        """Book ``requests`` together; if the batch fails, each alone (its own answer)."""
        if len(requests) > 1:
            try:
                return list(await self._booked(requests))
            except Refusal as exc:  # e.g. a type no longer matching: expected, not a fault
                log.info(
                    "a batch of %d %s was refused (%s); one by one", len(requests), self._kind, exc
                )
            except Exception:
                log.exception("a batch of %d %s failed; one by one", len(requests), self._kind)
        return [await self._alone(r) for r in requests]

    async def _alone(self, request: Req) -> Res | BaseException:
        """The one refusal rule: a refusal raised is the answer, any other failure 503."""
        try:
            (outcome,) = await self._booked([request])
        except Refusal as exc:
            return exc
        except Exception:
            log.exception("%s %r could not be booked", self._kind, request)
            return self._unavailable()
        return outcome

    async def _booked(self, requests: Sequence[Req]) -> list[Res | Refusal]:
        with self._shards.take() as shard:
            done = await self._book(requests, shard)
        if self._on_booked is not None:
            try:
                self._on_booked(done)
            except Exception:  # what was booked is booked; a lost metric is logged
                log.exception("after-booking hook failed")
        if self._watch is not None and done.rounds_booked:
            self._watch.booked(done.rounds_booked)
        return done.outcomes


def purchase_batcher(
    factory: sessionmaker[Session],
    async_factory: async_sessionmaker[AsyncSession] | None = None,
    on_booked: Callable[[Booked[PurchaseResult]], None] | None = None,
    on_complete: Callable[[int], None] | None = None,
    max_batch: int = 256,
    writers: int = 2,
    pipelined: PgPurchaseBook | None = None,
) -> PurchaseBatcher:
    """A batcher that books purchases, counts them (``mots_purchases_total``), then calls
    ``on_booked`` (on the event loop) per batch.

    With ``pipelined`` (PostgreSQL) a batch is booked in two round trips
    (:mod:`services.market.purchases_pg`), else, and whenever that path needs an account made,
    on a session. ``writers`` batches are booked at once, each into its own pool shard (at most
    :data:`ledger.POOL_SHARDS`). ``on_complete(round_id)`` (blocking: run in a thread) hears of
    a round whose every client has declared once a purchase made it so.
    """
    shards = Shards(writers)
    transactions = Transactions(factory, async_factory)
    account_ids: dict[str, int] = {}  # pool shard accounts, kept once committed

    async def book(requests: Sequence[PurchaseRequest], shard: int) -> Booked[PurchaseResult]:
        done = await book_batch(requests, shard)
        for task in set(done.booked_tasks):  # committed: count them, mots_purchases_total{task}
            metrics.PURCHASES.labels(task).inc(done.booked_tasks.count(task))
        return Booked(done.outcomes, done.booked, done.rounds_booked)

    async def book_batch(requests: Sequence[PurchaseRequest], shard: int) -> BookedBatch:
        if pipelined is not None:
            with contextlib.suppress(NeedsSetup):  # else booked below, making the accounts
                return await pipelined.book(requests, shard)
        seen: dict[str, int] = {}

        def work(s: Session) -> BookedBatch:
            seen.clear()
            seen.update(account_ids)
            return book_purchases(s, requests, shard, seen)

        done = await transactions.run(work)
        account_ids.update(seen)
        return done

    booking: Booking[PurchaseRequest, PurchaseResult] = Booking(
        "purchases",
        book,
        shards,
        lambda: Unavailable(
            "ledger", "the purchase could not be booked now; retry with the same Idempotency-Key"
        ),
        DeclaredWatch(transactions, on_complete),
        on_booked,
    )
    return MicroBatcher(booking.handle, max_batch=max_batch, name="purchases", writers=writers)


def decision_batcher(
    factory: sessionmaker[Session],
    async_factory: async_sessionmaker[AsyncSession] | None = None,
    on_complete: Callable[[int], None] | None = None,
    max_batch: int = 256,
    writers: int = 2,
) -> DecisionBatcher:
    """A batcher that books declarations, each batch into a tally shard of its own;
    ``on_complete(round_id)`` (blocking: run in a thread) hears of a round whose every client
    has declared."""
    shards = Shards(writers)
    transactions = Transactions(factory, async_factory)

    async def book(requests: Sequence[Declaration], shard: int) -> Booked[DecisionOut]:
        outcomes = await transactions.run(lambda s: book_declarations(s, requests, shard))
        decided = [o.round_id for o in outcomes if isinstance(o, DecisionOut)]
        return Booked(list(outcomes), len(decided), sorted(set(decided)))

    booking: Booking[Declaration, DecisionOut] = Booking(
        "declarations",
        book,
        shards,
        lambda: Unavailable("decision", "the declaration could not be booked; retry"),
        DeclaredWatch(transactions, on_complete),
    )
    return MicroBatcher(booking.handle, max_batch=max_batch, name="declarations", writers=writers)


def registration_batcher(
    factory: sessionmaker[Session],
    async_factory: async_sessionmaker[AsyncSession] | None,
    max_types: int,
    token_for: Callable[[int], tuple[str, int]],
    max_batch: int = 256,
    writers: int = 2,
) -> RegistrationBatcher:
    """A batcher that registers devices enrolled with a code (``POST /v1/clients``).

    One transaction per registration would hold its code's row locked (the use it takes) through
    the client's insert and the commit, so every device enrolled with one code would register one
    after another; a batch takes all its uses of a code in one write.
    """
    transactions = Transactions(factory, async_factory)

    async def book(requests: Sequence[Enrolled], shard: int) -> Booked[Registered]:
        del shard  # registrations write no shard
        outcomes = await transactions.run(
            lambda s: register_enrolled(s, requests, max_types, token_for)
        )
        return Booked(list(outcomes))

    booking: Booking[Enrolled, Registered] = Booking(
        "registrations",
        book,
        Shards(writers),
        lambda: Unavailable("enrolment_code", "the registration could not be booked; retry"),
    )
    return MicroBatcher(booking.handle, max_batch=max_batch, name="registrations", writers=writers)
