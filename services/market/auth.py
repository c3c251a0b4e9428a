"""Client credentials: a random bearer token shown once at registration, stored as its SHA-256.

Tokens carry 256 bits of randomness, so an unsalted SHA-256 is a sound verifier (no dictionary
to attack); a token is looked up once per API process and remembered (:func:`client_lookup`
answers the lookups in flight with one query). The operator's token is checked by
:func:`mots.platform.deps.operator`.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.orm import Session, sessionmaker

from mots.platform.batching import MicroBatcher
from services.market.models import Client

TOKEN_PREFIX = "mots_"


def new_token() -> str:
    """A fresh client token."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """The stored verifier of a token."""
    return hashlib.sha256(token.encode()).hexdigest()


def client_lookup(
    factory: sessionmaker[Session],
    async_factory: async_sessionmaker[AsyncSession] | None = None,
    max_batch: int = 256,
) -> MicroBatcher[str, Client | None]:
    """Verifier → client (None if unknown), the lookups in flight answered by one query.

    On the event loop with ``async_factory`` (PostgreSQL), else in a worker thread.
    """

    def find(session: Session, verifiers: Sequence[str]) -> list[Client | None]:
        found = {
            c.token_hash: c
            for c in session.scalars(
                select(Client).where(Client.token_hash.in_(sorted(set(verifiers))))
            )
        }
        return [found.get(v) for v in verifiers]

    if async_factory is not None:
        loop_factory = async_factory

        async def on_loop(verifiers: Sequence[str]) -> list[Client | None]:
            async with loop_factory() as session:
                return await session.run_sync(find, verifiers)

        return MicroBatcher(on_loop, max_batch=max_batch, name="tokens")

    def in_thread(verifiers: Sequence[str]) -> list[Client | None]:
        with factory() as session:
            return find(session, verifiers)

    return MicroBatcher.threaded(in_thread, max_batch=max_batch, name="tokens")
