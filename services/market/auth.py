"""The market's clients' credentials, issued and checked: a signed bearer token
(:mod:`mots.platform.tokens`) shown once, stored as its SHA-256 (the client's current token:
rotating or revoking replaces it), and the checks that name a request's client
(:func:`any_client`, :func:`current_client`, :func:`reading_client`, and :func:`caller` for the
batched purchase path), which the routes take as ``services.market.api.deps``'s aliases.

One module because issuing a token, storing its verifier, remembering verified tokens per
process and checking a request's token against them is one concept (who the caller is); the
checks were in ``services/market/api/deps.py`` beside the aliases, apart from the verifier and
the lookup they use. Tokens carry 128 bits of randomness and a MAC, so an unsalted SHA-256 is a
sound verifier (no dictionary to attack); a token is looked up once per API process and
remembered (:func:`client_lookup` answers the lookups in flight with one query). Every service's
part of the check (signature, expiry, revocation list) is
:func:`mots.platform.revocation.live_claim`; the operator's token is checked by
:func:`mots.platform.deps.operator`.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Request
from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.orm import Session, sessionmaker

from mots.platform import revocation, tokens
from mots.platform.batching import MicroBatcher
from mots.platform.deps import Credentials, bearer
from mots.platform.problem_types import ProblemError
from mots.platform.revocation import RevocationList, dead_token, live_claim, unauthorized
from mots.platform.settings import PlatformSettings
from services.market.models import Client, RevokedToken

TOKEN_PREFIX = "mots_"


def new_token() -> str:
    """A random secret nobody holds: its hash, stored, revokes a client's token."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def issue_token(client_id: int, settings: PlatformSettings) -> tuple[str, int]:
    """A fresh signed token for ``client_id`` and its expiry (Unix seconds)."""
    expires_at = int(time.time()) + settings.token_ttl_s
    return tokens.sign(client_id, expires_at, settings.token_secret.get_secret_value()), expires_at


def publish_dead(
    session: Session, settings: PlatformSettings, token_verifier: str, reason: str
) -> None:
    """Put a token the market is replacing on the revocation list every service reads, until
    the latest it could expire: a row of ``revoked_tokens`` in the replacing transaction (the
    durable copy, published again at each start: :func:`republish_dead`) and the Redis set
    (if Redis fails, nothing is replaced and the request fails)."""
    until = int(time.time()) + settings.token_ttl_s + 1
    session.execute(delete(RevokedToken).where(RevokedToken.until < int(time.time())))
    session.merge(RevokedToken(verifier=token_verifier, reason=reason, until=until))
    revocation.publish(settings.redis_url, settings.redis_key_prefix, token_verifier, reason, until)


def republish_dead(factory: sessionmaker[Session], settings: PlatformSettings) -> int:
    """Publish every unexpired dead token of the market's database to this start's Redis key
    prefix (which may be new: ``mots platform up`` takes one per start); how many. Run by the
    market before it serves, so no service reads a list that forgot a token."""
    now = int(time.time())
    with factory() as session:
        rows = session.execute(
            select(RevokedToken.verifier, RevokedToken.reason, RevokedToken.until).where(
                RevokedToken.until >= now
            )
        ).all()
    entries = [(v, reason, float(until)) for v, reason, until in rows]
    revocation.republish(settings.redis_url, settings.redis_key_prefix, entries)
    return len(entries)


def hash_token(token: str) -> str:
    """The stored verifier of a token (the revocation list's form too)."""
    return revocation.verifier(token)


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


CLIENT_CACHE_SIZE = 100_000
"""Verified tokens remembered per API process (forgotten after ``MOTS_TOKEN_CACHE_S``)."""


def _remembered(request: Request) -> dict[str, Client]:
    """This process's verified tokens, emptied every ``token_cache_s`` seconds: an approval, a
    revocation or a rotation made through another process is seen within that time."""
    state = request.app.state
    now = time.monotonic()
    if now - state.clients_cached_at > state.settings.token_cache_s:
        state.clients_by_token.clear()
        state.clients_cached_at = now
    known: dict[str, Client] = state.clients_by_token
    return known


def forget_client(request: Request, client_id: int) -> None:
    """Drop a client's remembered tokens from this process (after a status or token change)."""
    known: dict[str, Client] = request.app.state.clients_by_token
    for verifier in [v for v, c in known.items() if c.id == client_id]:
        known.pop(verifier, None)


async def any_client(request: Request, credentials: Credentials) -> Client:
    """The client whose bearer token the request carries, whatever its status (401 otherwise).

    A remembered token costs a dict lookup; a new one waits for the next batched query.
    """
    if credentials is None:
        raise unauthorized("Authorization: a bearer token is required")
    await live_claim(request, credentials.credentials)  # signed, unexpired, not revoked
    verifier = hash_token(credentials.credentials)
    known = _remembered(request)
    client = known.get(verifier)
    if client is not None:
        return client
    lookup: MicroBatcher[str, Client | None] = request.app.state.client_lookup
    client = await lookup.submit(verifier)
    if client is not None and client.status == "revoked":
        raise dead_token("client-revoked")
    if client is None:  # unknown tokens are not remembered
        revocations: RevocationList = request.app.state.revocations
        why = await revocations.why_dead_now(credentials.credentials)
        if why is not None:  # rotated or revoked here a moment ago: say which
            raise dead_token(why)
        raise unauthorized("Authorization: the token is not a registered client's")
    if len(known) >= CLIENT_CACHE_SIZE:
        known.clear()
    known[verifier] = client
    return client


_STATUS_CODES = {
    "pending": "client-pending",
    "revoked": "client-revoked",
    "left": "client-departed",
}


def refusal_reason(client_id: int, status: str) -> str:
    """Why a client that is not active is refused a declaration or a purchase, in words true of
    its status (issue 40): a client that left still reads its wallet and entries and downloads
    what it bought or trained, so its refusal must not say it may not download; a pending
    client may do none of these until the operator approves it."""
    if status == "left":
        return (
            f"client {client_id} has left the market; it may still read its"
            " wallet and entries and download the models it bought or trained, but may no"
            " longer declare or buy"
        )
    if status == "pending":
        return (
            f"client {client_id} is pending (not yet approved by the operator);"
            " it may declare, buy or download once approved"
        )
    return (
        f"client {client_id} is {status}; only clients the operator attested"
        " (or approved) may declare, buy or download"
    )


def _must_be_active(client: Client) -> Client:
    if client.status != "active":
        raise ProblemError(
            _STATUS_CODES.get(client.status, "forbidden"),
            f"Authorization: {refusal_reason(client.id, client.status)}",
        )
    return client


async def current_client(client: Annotated[Client, Depends(any_client)]) -> Client:
    """The caller, an active client (403 for a pending one)."""
    return _must_be_active(client)


async def reading_client(client: Annotated[Client, Depends(any_client)]) -> Client:
    """The caller reading what is its own (wallet, entries, models it may download): an active
    client, or one that has left the market (403 for a pending one)."""
    return client if client.status == "left" else _must_be_active(client)


@dataclass(frozen=True, slots=True)
class Caller:
    """A request's bearer-token verifier, with its client's id when this process knows it."""

    verifier: str
    client_id: int | None


async def caller(request: Request) -> Caller:
    """The caller's token verifier, not yet checked unless remembered (401 without a token).

    For the batched purchase path: an unknown verifier is resolved inside the batch's own
    transaction (one query for the whole batch), which answers 401 if no client has it. Reads
    the ``Authorization`` header itself, as :data:`bearer` would: a dependency without
    sub-dependencies costs FastAPI less on this, the market's hottest route (whose OpenAPI
    entry names the scheme: :data:`BEARER_SECURITY`).
    """
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise unauthorized("Authorization: a bearer token is required")
    await live_claim(request, token)
    verifier = hash_token(token)
    client = _remembered(request).get(verifier)
    if client is not None:
        _must_be_active(client)
    return Caller(verifier, client.id if client is not None else None)


BEARER_SECURITY: dict[str, Any] = {"security": [{bearer.scheme_name: []}]}
"""A route's ``openapi_extra`` when it reads the bearer token without :data:`bearer`."""
