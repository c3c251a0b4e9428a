"""Group commit for purchases: the purchases in flight are booked together, one transaction each batch.

:func:`purchase_batcher` wraps :func:`purchases.book_purchases` in a
:class:`~mots.platform.batching.MicroBatcher`: on PostgreSQL through an async engine, so the
batch's round trips run on the event loop; on SQLite in a worker thread. A batch that fails for a
reason other than a retryable conflict (which the transaction helpers retry) is booked again one
request at a time, so one bad request cannot fail the others.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

from fastapi import HTTPException, status
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.orm import Session, sessionmaker

from mots.platform.batching import MicroBatcher
from mots.platform.transactions import in_transaction, in_transaction_async
from services.market.purchases import BookedBatch, PurchaseRequest, book_purchases

log = logging.getLogger(__name__)

PurchaseResult: TypeAlias = tuple[int, dict[str, Any]]
PurchaseBatcher: TypeAlias = MicroBatcher[PurchaseRequest, PurchaseResult]


def purchase_batcher(
    factory: sessionmaker[Session],
    async_factory: async_sessionmaker[AsyncSession] | None = None,
    on_booked: Callable[[BookedBatch], None] | None = None,
    max_batch: int = 256,
    writers: int = 1,
) -> PurchaseBatcher:
    """A batcher that books purchases, then calls ``on_booked`` (on the event loop) per batch.

    With ``async_factory`` (PostgreSQL) the batches run on the event loop, else in threads with
    ``factory``. ``writers`` batches are booked at once, each into its own pool shard.
    """
    shards = itertools.count()

    async def book(requests: Sequence[PurchaseRequest]) -> BookedBatch:
        shard = next(shards)

        def work(s: Session) -> BookedBatch:
            return book_purchases(s, requests, shard)

        if async_factory is not None:
            return await in_transaction_async(async_factory, work)
        return await asyncio.get_running_loop().run_in_executor(None, in_transaction, factory, work)

    def booked(done: BookedBatch) -> None:
        if on_booked is not None:
            try:
                on_booked(done)
            except Exception:  # the money is booked; a lost event or metric is logged
                log.exception("after-booking hook failed")

    async def alone(request: PurchaseRequest) -> PurchaseResult | BaseException:
        try:
            done = await book([request])
        except HTTPException as exc:
            return exc
        except Exception:
            log.exception("purchase %s could not be booked", request)
            return HTTPException(
                status.HTTP_503_SERVICE_UNAVAILABLE,
                "ledger: the purchase could not be booked now; retry with the same Idempotency-Key",
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
