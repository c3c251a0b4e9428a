"""Group commit for declarations: the declarations in flight are booked together, one transaction
each batch (:func:`~services.market.decisions.book_declarations`), as purchases are.

A batch that fails for a reason other than a retryable conflict is booked again one declaration
at a time, so one bad request cannot fail the others. After a batch commits, the
:class:`~services.market.purchase_batcher.DeclaredWatch` checks (O(1), off the request's path)
whether its rounds are now fully declared and tells the orchestration.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from typing import TypeAlias

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.orm import Session, sessionmaker

from mots.platform.api.market import DecisionOut
from mots.platform.batching import MicroBatcher
from services.market import ledger
from services.market.decisions import Declaration, book_declarations
from services.market.errors import Unavailable
from services.market.purchase_batcher import DeclaredWatch, Transactions

log = logging.getLogger(__name__)

DecisionBatcher: TypeAlias = MicroBatcher[Declaration, DecisionOut]


class DeclarationBooking:
    """:meth:`handle` books a batch in one transaction into a tally shard of its own."""

    def __init__(self, transactions: Transactions, watch: DeclaredWatch) -> None:
        self._transactions = transactions
        self._watch = watch
        self._rng = random.Random()
        self._in_flight: set[int] = set()  # tally shards of the batches being booked

    async def handle(self, requests: Sequence[Declaration]) -> list[DecisionOut | BaseException]:
        """Book ``requests`` together; if that fails, one at a time."""
        try:
            return await self._book(requests)
        except Exception:
            if len(requests) == 1:
                log.exception("declaration %s could not be booked", requests[0])
                return [Unavailable("decision", "the declaration could not be booked; retry")]
            log.exception(
                "a batch of %d declarations failed; booking them one by one", len(requests)
            )
        out: list[DecisionOut | BaseException] = []
        for r in requests:
            try:
                out.extend(await self._book([r]))
            except Exception:
                log.exception("declaration %s could not be booked", r)
                out.append(Unavailable("decision", "the declaration could not be booked; retry"))
        return out

    async def _book(self, requests: Sequence[Declaration]) -> list[DecisionOut | BaseException]:
        # Like the purchase path: a tally shard no batch of this process holds, drawn at random.
        shard = self._rng.choice([k for k in range(ledger.POOL_SHARDS) if k not in self._in_flight])
        self._in_flight.add(shard)
        try:
            outcomes = await self._transactions.run(lambda s: book_declarations(s, requests, shard))
        finally:
            self._in_flight.discard(shard)
        booked = sorted({o.round_id for o in outcomes if isinstance(o, DecisionOut)})
        self._watch.booked(booked)
        return list(outcomes)


def decision_batcher(
    factory: sessionmaker[Session],
    async_factory: async_sessionmaker[AsyncSession] | None = None,
    on_complete: Callable[[int], None] | None = None,
    max_batch: int = 256,
    writers: int = 2,
) -> DecisionBatcher:
    """A batcher that books declarations; ``on_complete(round_id)`` (blocking: run in a thread)
    hears of a round whose every client has declared. ``writers`` batches at once (at most
    :data:`ledger.POOL_SHARDS`, one tally shard each)."""
    if writers > ledger.POOL_SHARDS:
        raise ValueError(f"writers: at most {ledger.POOL_SHARDS} (one shard each), got {writers}")
    transactions = Transactions(factory, async_factory)
    booking = DeclarationBooking(transactions, DeclaredWatch(transactions, on_complete))
    return MicroBatcher(booking.handle, max_batch=max_batch, name="declarations", writers=writers)
