"""Per-IP rate limits in Redis (fixed one-minute windows), shared by every API process.

Used where the market lets an unauthenticated caller create state (open self-registration): more
than the limit in a window is refused with 429 and ``Retry-After`` until the window ends; and
where a caller may guess a secret (enrolment codes): after :data:`CODE_FAILURES_PER_MINUTE`
failed attempts from one address in a window, its attempts are refused 429 unchecked until the
window ends.
"""

from __future__ import annotations

import time
from typing import cast

import redis
from fastapi import HTTPException, Request, status

WINDOW_S = 60
CODE_FAILURES_PER_MINUTE = 10
"""Failed enrolment-code attempts one address may make per window before it is throttled (codes
are 256-bit, so this stops no honest device: a typo or two; it stops guessing at speed)."""


def _redis(request: Request) -> redis.Redis:
    """The app's Redis client (made on first use)."""
    state = request.app.state
    client: redis.Redis | None = getattr(state, "rate_limit_redis", None)
    if client is None:
        client = redis.Redis.from_url(state.settings.redis_url)
        state.rate_limit_redis = client
    return client


def take(request: Request, name: str, per_minute: int) -> None:
    """Count one ``name`` call from the caller's IP; 429 beyond ``per_minute`` in this window."""
    ip = request.client.host if request.client is not None else "unknown"
    now = int(time.time())
    window = now // WINDOW_S
    key = f"{request.app.state.settings.redis_key_prefix}rate:{name}:{ip}:{window}"
    r = _redis(request)
    pipe = r.pipeline()
    pipe.incr(key)
    pipe.expire(key, WINDOW_S + 1)
    count = int(pipe.execute()[0])
    if count > per_minute:
        retry = (window + 1) * WINDOW_S - now
        raise HTTPException(
            status.HTTP_429_TOO_MANY_REQUESTS,
            f"{name}: at most {per_minute} per minute from one address; retry in {retry} s",
            headers={"Retry-After": str(max(retry, 1))},
        )


def _failure_key(request: Request, name: str) -> tuple[str, int, int]:
    ip = request.client.host if request.client is not None else "unknown"
    now = int(time.time())
    window = now // WINDOW_S
    return f"{request.app.state.settings.redis_key_prefix}fail:{name}:{ip}:{window}", window, now


def refuse_if_failing(request: Request, name: str, allowed: int) -> None:
    """429 (with ``Retry-After``) when the caller's address already failed ``allowed`` times in
    this window: its attempt is not checked at all."""
    key, window, now = _failure_key(request, name)
    failures = cast(bytes | None, _redis(request).get(key))
    if failures is not None and int(failures) >= allowed:
        retry = (window + 1) * WINDOW_S - now
        raise HTTPException(
            status.HTTP_429_TOO_MANY_REQUESTS,
            f"{name}: {allowed} failed attempts from this address in a minute; retry in {retry} s",
            headers={"Retry-After": str(max(retry, 1))},
        )


def count_failure(request: Request, name: str) -> None:
    """Count one failed attempt of the caller's address in this window."""
    key, _, _ = _failure_key(request, name)
    pipe = _redis(request).pipeline()
    pipe.incr(key)
    pipe.expire(key, WINDOW_S + 1)
    pipe.execute()
