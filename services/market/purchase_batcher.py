"""Group commit for purchases: the purchases in flight are booked together, one transaction each batch.

:func:`purchase_batcher` wraps :func:`purchases.book_purchases` in a
:class:`~mots.platform.batching.MicroBatcher`: on PostgreSQL through an async engine, so the
batch's round trips run on the event loop; on SQLite in a worker thread. A batch that fails for a
reason other than a retryable conflict (which the transaction helpers retry) is booked again one
request at a time, so one bad request cannot fail the others. After a batch commits, whether its
rounds are now fully declared is checked off the purchases' path (one check per round at a time).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias, TypeVar

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.orm import Session, sessionmaker

from mots.platform.batching import MicroBatcher
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
    rng = random.Random()
    in_flight: set[int] = set()  # pool shards of the batches being booked
    account_ids: dict[str, int] = {}  # pool shard accounts, kept once a transaction committed
    checking: set[int] = set()  # rounds whose "all declared?" check is running
    recheck: set[int] = set()  # rounds booked again while their check ran
    background: set[asyncio.Task[None]] = set()

    async def run(work: Callable[[Session], T]) -> T:
        if async_factory is not None:
            return await in_transaction_async(async_factory, work)
        return await asyncio.get_running_loop().run_in_executor(None, in_transaction, factory, work)

    async def book(requests: Sequence[PurchaseRequest]) -> BookedBatch:
        # A shard no batch of this process holds, drawn at random: other API processes (workers,
        # replicas) draw theirs alike, so two batches rarely wait on one pool row.
        shard = rng.choice([k for k in range(ledger.POOL_SHARDS) if k not in in_flight])
        in_flight.add(shard)
        try:
            if pipelined is not None:
                with contextlib.suppress(NeedsSetup):  # else booked below, making the accounts
                    return await pipelined.book(requests, shard)
            seen: dict[str, int] = {}

            def work(s: Session) -> BookedBatch:
                seen.clear()
                seen.update(account_ids)
                return book_purchases(s, requests, shard, seen)

            done = await run(work)
            account_ids.update(seen)
            return done
        finally:
            in_flight.discard(shard)

    async def check_declared(round_id: int) -> None:
        try:
            while True:
                recheck.discard(round_id)
                if await run(lambda s: all_declared(s, round_id)):
                    if on_complete is not None:
                        await asyncio.to_thread(on_complete, round_id)
                    return
                # Not yet: look again after purchases booked meanwhile, at most every interval
                # (the query counts every client, so it is not run once per batch).
                await asyncio.sleep(DECLARED_CHECK_INTERVAL_S)
                if round_id not in recheck:
                    return
        except Exception:  # the purchases are booked; the orchestration also polls
            log.exception("checking whether round %d is fully declared failed", round_id)
        finally:
            checking.discard(round_id)

    def booked(done: BookedBatch) -> None:
        if on_booked is not None:
            try:
                on_booked(done)
            except Exception:  # the money is booked; a lost metric is logged
                log.exception("after-booking hook failed")
        for round_id in done.rounds_booked:
            if round_id in checking:
                recheck.add(round_id)
                continue
            checking.add(round_id)
            task = asyncio.get_running_loop().create_task(check_declared(round_id))
            background.add(task)
            task.add_done_callback(background.discard)

    async def alone(request: PurchaseRequest) -> PurchaseResult | BaseException:
        try:
            done = await book([request])
        except Refusal as exc:
            return exc
        except Exception:
            log.exception("purchase %s could not be booked", request)
            return Unavailable(
                "ledger",
                "the purchase could not be booked now; retry with the same Idempotency-Key",
            )
        booked(done)
        return done.outcomes[0]

    async def handle(requests: Sequence[PurchaseRequest]) -> list[PurchaseResult | BaseException]:
        if len(requests) == 1:
            return [await alone(requests[0])]
        try:
            done = await book(requests)
        except Exception:
            log.exception("a batch of %d purchases failed; booking them one by one", len(requests))
            return [await alone(r) for r in requests]
        booked(done)
        return list(done.outcomes)

    return MicroBatcher(handle, max_batch=max_batch, name="purchases", writers=writers)
