"""Per-IP rate limits in Redis (fixed one-minute windows), shared by every API process.

Used where the market lets an unauthenticated caller create state (open self-registration): more
than the limit in a window is refused with 429 and ``Retry-After`` until the window ends; and
where a caller may guess a secret (enrolment codes): after :data:`CODE_FAILURES_PER_MINUTE`
failed attempts from one address in a window, its attempts are refused 429 unchecked until the
window ends. The address is the TCP peer's, or behind a configured reverse proxy the one it
appended to ``X-Forwarded-For`` (:func:`client_address`).
"""

from __future__ import annotations

import ipaddress
import time
from functools import cache
from typing import cast

import redis
from fastapi import HTTPException, Request, status

WINDOW_S = 60
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
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


@cache
def _networks(setting: str) -> tuple[Network, ...]:
    """``MOTS_TRUSTED_PROXIES`` parsed (validated by its settings group)."""
    entries = filter(None, (e.strip() for e in setting.split(",")))
    return tuple(ipaddress.ip_network(e, strict=False) for e in entries)


def _trusted(address: str, proxies: tuple[Network, ...]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in proxies)


def client_address(request: Request) -> str:
    """The address the per-address limits count: the TCP peer, unless the peer is a configured
    proxy (``MOTS_TRUSTED_PROXIES``); then the rightmost ``X-Forwarded-For`` entry that is no
    such proxy (what the nearest proxy saw: entries left of it are the caller's to write).

    The peer is the socket's own only because the services run uvicorn without its proxy
    headers (``--no-proxy-headers``: launcher, ``mots.platform.serve``, the image), which would
    otherwise trust any header from 127.0.0.1 (issue 37: a rotating header escaped the limit, a
    spoofed one got its victim refused)."""
    peer = request.client.host if request.client is not None else "unknown"
    proxies = _networks(request.app.state.settings.trusted_proxies)
    if not proxies or not _trusted(peer, proxies):
        return peer
    forwarded = ",".join(request.headers.getlist("x-forwarded-for"))
    for entry in reversed([e.strip() for e in forwarded.split(",") if e.strip()]):
        if not _trusted(entry, proxies):
            return entry
    return peer


def take(request: Request, name: str, per_minute: int) -> None:
    """Count one ``name`` call from the caller's address (:func:`client_address`); 429 beyond
    ``per_minute`` in this window."""
    ip = client_address(request)
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
    ip = client_address(request)
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
