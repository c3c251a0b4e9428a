"""Whether a service accepts a client token now, and why not: signed and unexpired
(:func:`mots.platform.tokens.verify`), and not dead before its expiry (the revocation list);
each refusal with its own problem code. :func:`live_claim` is the one check every service runs.

One module because it is one decision on every authenticated request: the verdict, the list it
reads and the refusals it words were three places (the verdict and refusals in
``mots.platform.deps``), read together each time. The token's format stays in
:mod:`mots.platform.tokens`, which the client SDK imports without the services' dependencies
(FastAPI, Redis).

Client tokens are verified without the market's database, so a token the market rotated or
revoked would otherwise work on pricing and orchestration until it expires. The market adds
each such token's verifier (its SHA-256, with why it died) to a Redis sorted set, scored by
when the token would have expired anyway (pruned after), and bumps a version counter, in the
same step as it replaces the token; every API process reads the counter at most every
``MOTS_REVOCATION_REFRESH_S`` seconds (:data:`REFRESH_S`) and the set only when the counter
moved, so a dead token is refused everywhere within about a second for one Redis round trip per
second per process. When Redis cannot be read the last list read is used for
``MOTS_REVOCATION_MAX_STALE_S`` (:data:`MAX_STALE_S`); after that client tokens are answered 503
(operator tokens still work). A quiet spell is not a failure: the burst after it waits for one
read (:class:`RevocationList`).

The market also keeps each dead token in its own database (``revoked_tokens``) and publishes the
unexpired ones again when it starts (:func:`republish`): the key prefix may be new at each start
(``mots platform up``), and a list only in Redis would be forgotten there.
"""

from __future__ import annotations

import hashlib
import logging
import time
from functools import cache
from typing import cast

import anyio
import anyio.to_thread
import redis
from fastapi import HTTPException, Request, status

from mots.platform import tokens
from mots.platform.problem_types import ProblemError
from mots.platform.settings import PlatformSettings

log = logging.getLogger(__name__)

KEY = "revoked-tokens"
VERSION_KEY = "revoked-tokens:version"
REFRESH_S = 1.0
"""The default of ``MOTS_REVOCATION_REFRESH_S``: how often an API process asks whether the list
changed (the bound is 5 s: issue 24)."""
MAX_STALE_S = 30.0
"""The default of ``MOTS_REVOCATION_MAX_STALE_S``: how long a process trusts the last list read
while Redis cannot be reached."""


def verifier(token: str) -> str:
    """The stored form of a token (SHA-256 hex; the market stores its clients' tokens so)."""
    return hashlib.sha256(token.encode()).hexdigest()


@cache
def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)


def publish(redis_url: str, prefix: str, token_verifier: str, reason: str, until: float) -> None:
    """Add a dead token's verifier to the list until ``until`` (Unix s; its expiry or later)."""
    pipe = _client(redis_url).pipeline(transaction=True)
    pipe.zadd(f"{prefix}{KEY}", {f"{token_verifier}:{reason}": until})
    pipe.zremrangebyscore(f"{prefix}{KEY}", "-inf", time.time())
    pipe.incr(f"{prefix}{VERSION_KEY}")
    pipe.execute()


def republish(redis_url: str, prefix: str, entries: list[tuple[str, str, float]]) -> None:
    """Put the market's durable list (``(verifier, reason, until)`` each) on this prefix's set
    and bump its version, even when empty: readers see it within their refresh interval."""
    pipe = _client(redis_url).pipeline(transaction=True)
    if entries:
        key = f"{prefix}{KEY}"
        pipe.zadd(key, {f"{v}:{reason}": until for v, reason, until in entries})
    pipe.zremrangebyscore(f"{prefix}{KEY}", "-inf", time.time())
    pipe.incr(f"{prefix}{VERSION_KEY}")
    pipe.execute()


class RevocationList:
    """One API process's copy of the list, refreshed on use at most every ``refresh_s``.

    The staleness bound: a request is answered from a copy read at most ``refresh_s`` seconds
    ago, or waits for the read in flight (one Redis round trip, at most its 2 s socket
    timeout), never for a second one. Only when that read fails does a request use an older
    copy, for up to ``max_stale_s`` seconds after the last good read; after that, 503. So a quiet
    spell longer than ``max_stale_s`` never turns the burst that ends it into 503s (issue 37:
    the requests that came while the first one's refresh was in flight used to see the copy as
    stale and were refused).
    """

    def __init__(
        self,
        redis_url: str,
        prefix: str,
        refresh_s: float = REFRESH_S,
        max_stale_s: float = MAX_STALE_S,
    ) -> None:
        self._url, self._prefix = redis_url, prefix
        self.refresh_s, self.max_stale_s = refresh_s, max_stale_s
        self._dead: dict[str, str] = {}
        self._version: bytes | None = None
        self._checked_at = float("-inf")
        self._read_at = float("-inf")
        self._inflight: anyio.Event | None = None

    def _read(self) -> None:
        """Ask Redis for the version; read the set when it moved (in a worker thread)."""
        client = _client(self._url)
        version = cast(bytes | None, client.get(f"{self._prefix}{VERSION_KEY}"))
        if version != self._version:
            key = f"{self._prefix}{KEY}"
            members = cast(list[bytes], client.zrangebyscore(key, time.time(), "+inf"))
            dead = {}
            for m in members:
                token_verifier, _, reason = m.decode().partition(":")
                dead[token_verifier] = reason
            self._dead, self._version = dead, version

    async def _refresh(self) -> None:
        """Read the list when the copy is older than ``refresh_s``; a request that finds a read
        in flight and a copy older than that waits for the read instead of starting another."""
        now = time.monotonic()
        if now - self._read_at <= self.refresh_s:
            return
        if self._inflight is not None:
            await self._inflight.wait()
            return
        if now - self._checked_at < self.refresh_s:  # the last read failed a moment ago
            return
        done = self._inflight = anyio.Event()
        try:
            await anyio.to_thread.run_sync(self._read)
            self._read_at = time.monotonic()
        except redis.RedisError as exc:
            log.warning("the revocation list could not be read: %s", exc)
        finally:
            self._checked_at = time.monotonic()
            self._inflight = None
            done.set()

    async def why_dead_now(self, token: str) -> str | None:
        """Why ``token`` is dead, reading Redis now (for a token the market no longer knows,
        so that its refusal names the reason at once); None when not listed or unreadable."""
        try:
            await anyio.to_thread.run_sync(self._read)
            self._read_at = self._checked_at = time.monotonic()
        except redis.RedisError as exc:
            log.warning("the revocation list could not be read: %s", exc)
        return self._dead.get(verifier(token))

    async def why_dead(self, token: str) -> str | None:
        """Why ``token`` is dead (``rotated``, ``revoked``, ``client-revoked``), or None; 503
        only when Redis could not be read for ``max_stale_s`` seconds."""
        await self._refresh()
        if time.monotonic() - self._read_at > self.max_stale_s:
            raise HTTPException(
                status.HTTP_503_SERVICE_UNAVAILABLE,
                "Authorization: the token revocation list is unavailable (Redis); retry",
                headers={"Retry-After": "1"},
            )
        return self._dead.get(verifier(token))


# The verdict and its refusals


def unauthorized(detail: str, code: str = "unauthenticated") -> ProblemError:
    """A 401 answer asking for a bearer token; ``detail`` names the header and the rule,
    ``code`` the problem type (:mod:`mots.platform.problem_types`)."""
    return ProblemError(code, detail, headers={"WWW-Authenticate": "Bearer"})


def client_claim(token: str, settings: PlatformSettings) -> tokens.Claim | tokens.Invalid:
    """A client token's verified claim (signature and expiry), or why it is refused."""
    return tokens.verify(token, settings.token_secret.get_secret_value(), time.time())


_DEAD = {
    "rotated": "the token was replaced by a newer one (rotated or reissued); use that",
    "revoked": "the token was revoked; the operator may issue a new one "
    "(POST /v1/clients/{id}/token)",
    "client-revoked": "the operator revoked this client; its tokens no longer work",
}


def dead_token(why: str) -> ProblemError:
    """The refusal of a token on the revocation list, by why it died: rotated or revoked, 401
    (``token-rotated``, ``token-revoked``); its client revoked, 403 (``client-revoked``)."""
    detail = f"Authorization: {_DEAD.get(why, 'the token is no longer valid')}"
    if why == "client-revoked":
        return ProblemError("client-revoked", detail)
    code = "token-rotated" if why == "rotated" else "token-revoked"
    return unauthorized(detail, code)


def invalid_token(why: tokens.Invalid) -> ProblemError:
    """The 401 of a token that does not verify: ``token-expired`` or ``token-invalid``."""
    code = "token-expired" if why is tokens.Invalid.EXPIRED else "token-invalid"
    return unauthorized(f"Authorization: {why.value}", code)


async def live_claim(request: Request, token: str) -> tokens.Claim:
    """A client token's claim if it verifies, has not expired and is not on the revocation
    list (:class:`RevocationList`, read by every service); refused otherwise, each
    reason with its own code (:func:`invalid_token`, :func:`dead_token`)."""
    claim = client_claim(token, request.app.state.settings)
    if isinstance(claim, tokens.Invalid):
        raise invalid_token(claim)
    revocations: RevocationList = request.app.state.revocations
    why = await revocations.why_dead(token)
    if why is not None:
        raise dead_token(why)
    return claim
