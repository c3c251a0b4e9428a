"""Running a unit of work in one database transaction, retried on lock conflicts and races.

PostgreSQL may abort a transaction on a deadlock (40P01) or serialization failure (40001); a
concurrent insert may violate a unique constraint that the retry then reads as "already done".
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar

from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.orm import Session, sessionmaker

T = TypeVar("T")
RETRYABLE_SQLSTATES = {"40001", "40P01"}


def _retryable(exc: DBAPIError) -> bool:
    if isinstance(exc, IntegrityError) or exc.connection_invalidated:
        # A dropped connection (e.g. the database restarted): its transaction did not commit,
        # or, if the drop hit the COMMIT, the retry reads what it booked (idempotency keys).
        return True
    code = getattr(exc.orig, "sqlstate", None)
    return code in RETRYABLE_SQLSTATES or "database is locked" in str(exc.orig)


def in_transaction(
    factory: sessionmaker[Session], work: Callable[[Session], T], tries: int = 8
) -> T:
    """Run ``work`` in a fresh transaction, committing on success and retrying retryable errors."""
    for attempt in range(tries):
        try:
            with factory() as session, session.begin():
                return work(session)
        except DBAPIError as exc:
            if attempt == tries - 1 or not _retryable(exc):
                raise
            time.sleep(0.002 * (2**attempt))
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
            await asyncio.sleep(0.002 * (2**attempt))
    raise AssertionError("unreachable")
