"""Per-IP rate limits in Redis (fixed one-minute windows), shared by every API process.

Used where the market lets an unauthenticated caller create state (open self-registration): more
than the limit in a window is refused with 429 and ``Retry-After`` until the window ends.
"""

from __future__ import annotations

import time

import redis
from fastapi import HTTPException, Request, status

WINDOW_S = 60


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
