"""Group commit for single registrations with an enrolment code (``POST /v1/clients``): the
registrations in flight are booked together, one transaction each batch
(:func:`~services.market.registration.register_enrolled`), as declarations and purchases are.

One transaction per registration would hold its code's row locked (the use it takes) through
the client's insert and the commit, so every device enrolled with one code would register one
after another; a batch takes all its uses of a code in one write. A batch that fails (say, a type
that no longer matches its live clients) is booked again one registration at a time, so one bad
request cannot fail the others.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TypeAlias

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.orm import Session, sessionmaker

from mots.platform.batching import MicroBatcher
from services.market.errors import Refusal, Unavailable
from services.market.purchase_batcher import Transactions
from services.market.registration import Enrolled, Registered, register_enrolled

log = logging.getLogger(__name__)

RegistrationBatcher: TypeAlias = MicroBatcher[Enrolled, Registered]


class RegistrationBooking:
    """:meth:`handle` registers a batch in one transaction; if that fails, one at a time."""

    def __init__(
        self,
        transactions: Transactions,
        max_types: int,
        token_for: Callable[[int], tuple[str, int]],
    ) -> None:
        self._transactions = transactions
        self._max_types = max_types
        self._token_for = token_for

    async def _book(self, requests: Sequence[Enrolled]) -> list[Registered | Refusal]:
        return await self._transactions.run(
            lambda s: register_enrolled(s, requests, self._max_types, self._token_for)
        )

    async def handle(self, requests: Sequence[Enrolled]) -> list[Registered | BaseException]:
        """Register ``requests`` together; if the batch fails, each alone (its own answer)."""
        try:
            return list(await self._book(requests))
        except Exception as exc:
            if len(requests) == 1:
                return [exc if isinstance(exc, Refusal) else self._unavailable(requests[0])]
            log.info("a batch of %d registrations failed (%s); one by one", len(requests), exc)
        out: list[Registered | BaseException] = []
        for r in requests:
            try:
                out.extend(await self._book([r]))
            except Refusal as exc:
                out.append(exc)
            except Exception:
                out.append(self._unavailable(r))
        return out

    @staticmethod
    def _unavailable(r: Enrolled) -> Unavailable:
        log.exception("registration of %r could not be booked", r.name)
        return Unavailable("enrolment_code", "the registration could not be booked; retry")


def registration_batcher(
    factory: sessionmaker[Session],
    async_factory: async_sessionmaker[AsyncSession] | None,
    max_types: int,
    token_for: Callable[[int], tuple[str, int]],
    max_batch: int = 256,
    writers: int = 2,
) -> RegistrationBatcher:
    """A batcher that registers enrolled devices, ``writers`` batches at once (on the event loop
    with ``async_factory``, PostgreSQL; else in worker threads)."""
    booking = RegistrationBooking(Transactions(factory, async_factory), max_types, token_for)
    return MicroBatcher(booking.handle, max_batch=max_batch, name="registrations", writers=writers)
