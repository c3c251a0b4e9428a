"""The revocation list every service reads: client tokens that are dead before their expiry.

Client tokens are verified without the market's database (:mod:`mots.platform.tokens`), so a
token the market rotated or revoked would otherwise work on pricing and orchestration until it
expires. The market adds each such token's verifier (its SHA-256, with why it died) to a Redis
sorted set, scored by when the token would have expired anyway (pruned after), and bumps a
version counter, in the same step as it replaces the token; every API process reads the
counter at most every :data:`REFRESH_S` seconds and the set only when the counter moved, so a
dead token is refused everywhere within about a second for one Redis round trip per second per
process. When Redis cannot be read the last list read is used for :data:`MAX_STALE_S`; after
that client tokens are answered 503 (operator tokens still work).
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
from fastapi import HTTPException, status

log = logging.getLogger(__name__)

KEY = "revoked-tokens"
VERSION_KEY = "revoked-tokens:version"
REFRESH_S = 1.0
"""How often an API process asks whether the list changed (the bound is 5 s: issue 24)."""
MAX_STALE_S = 30.0
"""How long a process trusts the last list read while Redis cannot be reached."""


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


class RevocationList:
    """One API process's copy of the list, refreshed on use at most every :data:`REFRESH_S`."""

    def __init__(self, redis_url: str, prefix: str) -> None:
        self._url, self._prefix = redis_url, prefix
        self._dead: dict[str, str] = {}
        self._version: bytes | None = None
        self._checked_at = float("-inf")
        self._read_at = float("-inf")
        self._refreshing = False

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
        now = time.monotonic()
        if self._refreshing or now - self._checked_at < REFRESH_S:
            return
        self._refreshing = True
        try:
            await anyio.to_thread.run_sync(self._read)
            self._read_at = time.monotonic()
        except redis.RedisError as exc:
            log.warning("the revocation list could not be read: %s", exc)
        finally:
            self._checked_at = time.monotonic()
            self._refreshing = False

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
        when the list could
        not be read for :data:`MAX_STALE_S` seconds."""
        await self._refresh()
        while self._refreshing and self._read_at == float("-inf"):  # the first read: wait for it
            await anyio.sleep(0.01)
        if time.monotonic() - self._read_at > MAX_STALE_S:
            raise HTTPException(
                status.HTTP_503_SERVICE_UNAVAILABLE,
                "Authorization: the token revocation list is unavailable (Redis); retry",
                headers={"Retry-After": "1"},
            )
        return self._dead.get(verifier(token))
