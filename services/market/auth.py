"""Client credentials: a signed bearer token (:mod:`mots.platform.tokens`) shown once, stored as
its SHA-256 (the client's current token: rotating or revoking replaces it).

Tokens carry 128 bits of randomness and a MAC, so an unsalted SHA-256 is a sound verifier (no
dictionary to attack); a token is looked up once per API process and remembered (:func:`client_lookup`
answers the lookups in flight with one query). The operator's token is checked by
:func:`mots.platform.deps.operator`.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.orm import Session, sessionmaker

from mots.platform import revocation, tokens
from mots.platform.batching import MicroBatcher
from mots.platform.settings import PlatformSettings
from services.market.models import Client

TOKEN_PREFIX = "mots_"


def new_token() -> str:
    """A random secret nobody holds: its hash, stored, revokes a client's token."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def issue_token(client_id: int, settings: PlatformSettings) -> tuple[str, int]:
    """A fresh signed token for ``client_id`` and its expiry (Unix seconds)."""
    expires_at = int(time.time()) + settings.token_ttl_s
    return tokens.sign(client_id, expires_at, settings.token_secret.get_secret_value()), expires_at


def publish_dead(settings: PlatformSettings, token_verifier: str, reason: str) -> None:
    """Put a token the market is replacing on the revocation list every service reads, until
    the latest it could expire (inside the replacing transaction: if Redis fails, nothing is
    replaced and the request fails)."""
    until = time.time() + settings.token_ttl_s
    revocation.publish(settings.redis_url, settings.redis_key_prefix, token_verifier, reason, until)


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
