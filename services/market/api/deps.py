"""Dependencies of the market routes, as ``Annotated`` aliases a route's signature reads as its needs.

The ones every service has (operator, session factory, Celery client) come from
:mod:`mots.platform.deps`; the market adds its clients' identity (:data:`CurrentClient`,
:data:`CallerDep`), its typed settings, the Idempotency-Key header and the round id in a path.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Header, Path, Request

from mots.platform.api.base import MAX_ID
from mots.platform.batching import MicroBatcher
from mots.platform.deps import (
    CeleryDep,
    Credentials,
    OperatorDep,
    SessionFactoryDep,
    app_settings,
    bearer,
    dead_token,
    live_claim,
    unauthorized,
)
from mots.platform.problem_types import ProblemError
from mots.platform.revocation import RevocationList
from services.market.auth import hash_token
from services.market.core.config import Settings
from services.market.models import Client

__all__ = [
    "BEARER_SECURITY",
    "AnyClient",
    "CallerDep",
    "CeleryDep",
    "CurrentClient",
    "IdempotencyKeyHeader",
    "OperatorDep",
    "RoundId",
    "SessionFactoryDep",
    "SettingsDep",
]

SettingsDep = Annotated[Settings, Depends(app_settings)]


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


async def _verified(request: Request, token: str) -> None:
    """401 unless the token's signature verifies, it has not expired and it is not on the
    revocation list (no database needed; a remembered token is refused within seconds)."""
    await live_claim(request, token)


async def any_client(request: Request, credentials: Credentials) -> Client:
    """The client whose bearer token the request carries, whatever its status (401 otherwise).

    A remembered token costs a dict lookup; a new one waits for the next batched query.
    """
    if credentials is None:
        raise unauthorized("Authorization: a bearer token is required")
    await _verified(request, credentials.credentials)
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


def _must_be_active(client: Client) -> Client:
    if client.status != "active":
        raise ProblemError(
            _STATUS_CODES.get(client.status, "forbidden"),
            f"Authorization: client {client.id} is {client.status}; only clients the operator"
            " attested (or approved) may declare, buy or download",
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
    await _verified(request, token)
    verifier = hash_token(token)
    client = _remembered(request).get(verifier)
    if client is not None:
        _must_be_active(client)
    return Caller(verifier, client.id if client is not None else None)


BEARER_SECURITY: dict[str, Any] = {"security": [{bearer.scheme_name: []}]}
"""A route's ``openapi_extra`` when it reads the bearer token without :data:`bearer`."""


CurrentClient = Annotated[Client, Depends(current_client)]
AnyClient = Annotated[Client, Depends(any_client)]
ReadingClient = Annotated[Client, Depends(reading_client)]
CallerDep = Annotated[Caller, Depends(caller)]
IdempotencyKeyHeader = Annotated[
    str,
    Header(
        alias="Idempotency-Key",
        min_length=8,
        max_length=128,
        pattern=r"^[A-Za-z0-9_.:-]+$",
        description="unique per intended operation; a retry with the same key is not booked twice",
    ),
]
RoundId = Annotated[int, Path(ge=1, le=MAX_ID, description="the round's id")]
