"""Attacks on what a request may hold (issue 24, point 5), in the money suite's registry
(:data:`benchmarks.integrity.money.ATTACKS`), run on its fresh platform over real HTTP.

- ``deep_json``: every JSON route of every API with a body nested 1,000 and 100,000 levels deep
  (arrays and objects), without a token: caught when 4xx problem+json (never 5xx).
- ``cursor_overflow``: every list route with cursors holding 2^63, 2^64 and 10^30: caught when 422.
- ``huge_non_json_body``: a POST announcing 50 MB (text/plain, form, octet-stream and JSON) on each
  API, without sending it: caught when 413 comes back before any byte of the body is sent; and a
  chunked body streamed past the cap: caught when 413 comes back before 8 MiB were sent; the
  APIs' resident memory grows by less than 64 MiB over it all.
- ``duplicate_keys``: every JSON route with a field given twice, and a deposit whose ``amount``
  is given as 1 then 1000: caught when 422 and the wallet's balance is unchanged.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx

from benchmarks.integrity.money import (
    OPERATOR,
    Attack,
    MoneyPlatform,
    attack,
    balances,
    json_operations,
)
from mots.local.launcher import SERVICES_WITH_API
from mots.platform.paging import encode_cursor

ANNOUNCED_BYTES = 50_000_000
STREAM_LIMIT_BYTES = 8 << 20
MEMORY_GROWTH_LIMIT = 64 << 20
CONTENT_TYPES = (
    "text/plain",
    "application/x-www-form-urlencoded",
    "application/octet-stream",
    "application/json",
)


def _request(client: httpx.Client, method: str, path: str, **kw: Any) -> httpx.Response | None:
    """The answer, or None when the connection failed (the service crashed or reset it)."""
    try:
        return client.request(method, path, **kw)
    except httpx.TransportError:
        return None


def _is_problem(r: httpx.Response | None, *statuses: int) -> bool:
    if r is None:
        return False
    ok_status = r.status_code in statuses if statuses else 400 <= r.status_code < 500
    return ok_status and r.headers.get("content-type", "").startswith("application/problem+json")


def _code(r: httpx.Response | None) -> str:
    return "no answer" if r is None else str(r.status_code)


def _deep_bodies() -> Iterator[bytes]:
    for depth in (1_000, 100_000):
        yield b"[" * depth + b"]" * depth
        yield b'{"a":' * depth + b"1" + b"}" * depth


@attack("deep_json")
def deep_json(p: MoneyPlatform) -> Attack:
    """Deeply nested JSON on every body route of every API, no token: 4xx, never 5xx."""
    out = Attack()
    for service in SERVICES_WITH_API:
        client = p.api(service)
        doc = client.get("/openapi.json").raise_for_status().json()
        for method, path, _ in json_operations(doc):
            for body in _deep_bodies():
                r = _request(
                    client, method, path, content=body, headers={"Content-Type": "application/json"}
                )
                out.record(_is_problem(r), f"{service} {method} {path} -> {_code(r)}")
    return out


def _list_routes(doc: dict[str, Any]) -> Iterator[str]:
    for path, ops in doc.get("paths", {}).items():
        op = ops.get("get", {})
        if any(prm.get("name") == "cursor" for prm in op.get("parameters", [])):
            yield path


@attack("cursor_overflow")
def cursor_overflow(p: MoneyPlatform) -> Attack:
    """Cursors holding integers beyond 64 bits on every list route: 422 naming the cursor."""
    out = Attack()
    token = p.honest[0].auth
    for service in SERVICES_WITH_API:
        client = p.api(service)
        doc = client.get("/openapi.json").raise_for_status().json()
        for path in _list_routes(doc):
            headers = token if path.startswith("/v1/me") else OPERATOR
            for value in (2**63, 2**64, 10**30):
                params = {"cursor": encode_cursor(value)}
                r = _request(client, "GET", path, params=params, headers=headers)
                ok = _is_problem(r, 422) and r is not None and "cursor" in r.text
                out.record(ok, f"{service} {path} cursor {value} -> {_code(r)}")
    return out


def _port(p: MoneyPlatform, service: str) -> int:
    return p.stack.ports[service]


def _status_of(sock: socket.socket) -> int | None:
    """The status of the response on ``sock``, or None when none came (timeout or closed)."""
    try:
        head = sock.recv(4096)
    except OSError:
        return None
    return int(head[9:12]) if head.startswith(b"HTTP/1.1 ") else None


def _announced(port: int, path: str, content_type: str) -> int | None:
    """POST announcing 50 MB and sending none of it: the status answered within 5 s."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {ANNOUNCED_BYTES}\r\n\r\n".encode()
        )
        return _status_of(sock)


def _streamed(port: int, path: str, content_type: str) -> tuple[int | None, int]:
    """A chunked body streamed in 64 KiB chunks until the server answers (or 8 MiB went):
    the status answered and how many bytes were sent."""
    chunk = b"x" * 65536
    sent = 0
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: {content_type}\r\n"
            "Transfer-Encoding: chunked\r\n\r\n".encode()
        )
        sock.setblocking(False)
        while sent < STREAM_LIMIT_BYTES:
            try:
                head = sock.recv(4096)
                if head:
                    return (int(head[9:12]) if head.startswith(b"HTTP/1.1 ") else None), sent
                return None, sent  # closed without an answer
            except BlockingIOError:
                pass
            except OSError:
                break
            try:
                sock.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            except BlockingIOError:
                time.sleep(0.01)
                continue
            except OSError:
                break
            sent += len(chunk)
        sock.setblocking(True)
        sock.settimeout(5)
        return _status_of(sock), sent


def _rss(p: MoneyPlatform) -> int:
    """The resident memory of the APIs' processes (bytes), from /proc."""
    total = 0
    for proc in p.stack.processes:
        if proc.name.endswith("-api"):
            try:
                status = Path(f"/proc/{proc.popen.pid}/status").read_text()
            except OSError:
                continue
            for line in status.splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
    return total


_BODY_ROUTES = {"market": "/v1/deposits", "pricing": "/v1/quote", "orchestration": "/v1/rounds"}


@attack("huge_non_json_body")
def huge_non_json_body(p: MoneyPlatform) -> Attack:
    """Bodies announced or streamed beyond the cap, of every content type, no token: 413 before
    the body is read, and the APIs' memory stays bounded."""
    out = Attack()
    before = _rss(p)
    for service in SERVICES_WITH_API:
        port, path = _port(p, service), _BODY_ROUTES[service]
        for content_type in CONTENT_TYPES:
            status = _announced(port, path, content_type)
            out.record(status == 413, f"{service} {content_type} announced 50 MB -> {status}")
            status, sent = _streamed(port, path, content_type)
            out.record(status == 413, f"{service} {content_type} chunked {sent} B -> {status}")
    grown = _rss(p) - before
    out.record(grown < MEMORY_GROWTH_LIMIT, f"the APIs' memory grew by {grown} bytes")
    out.extra.append({"rss_growth_bytes": grown})
    return out


def _duplicated(fields: list[str]) -> Iterator[bytes]:
    for name in fields:
        yield f'{{"{name}": 1, "{name}": 2}}'.encode()
    yield b'{"nested": {"k": 1, "k": 2}}'


@attack("duplicate_keys")
def duplicate_keys(p: MoneyPlatform) -> Attack:
    """A key given twice in any body of any API: 422; a deposit of 1-then-1000 books nothing."""
    out = Attack()
    token = p.honest[0].auth
    for service in SERVICES_WITH_API:
        client = p.api(service)
        doc = client.get("/openapi.json").raise_for_status().json()
        headers = token if service == "market" else OPERATOR
        for method, path, fields in json_operations(doc):
            for body in _duplicated(fields):
                headers = {**headers, "Content-Type": "application/json"}
                r = _request(client, method, path, content=body, headers=headers)
                out.record(_is_problem(r, 422), f"{service} {method} {path} {body!r} -> {_code(r)}")
    victim = p.honest[0]
    before = balances(p, [victim])[victim.id]
    body = f'{{"client_id": {victim.id}, "amount": "1", "amount": "1000"}}'.encode()
    headers = {**OPERATOR, "Content-Type": "application/json", "Idempotency-Key": "dup-keys-1"}
    r = _request(p.market, "POST", "/v1/deposits", content=body, headers=headers)
    booked = balances(p, [victim])[victim.id] - before
    out.record(
        _is_problem(r, 422) and booked == 0,
        f"deposit with amount twice -> {_code(r)}, booked {booked}",
        paid=max(booked, Decimal(0)),
    )
    return out


GUESSES = 30
GUESS_ADDRESS = "127.0.0.2"
"""The guesser's own source address (the loopback's /8), so that its throttling does not hold up
the suite's honest registrations from 127.0.0.1."""


@attack("code_guessing")
def code_guessing(p: MoneyPlatform) -> Attack:
    """Made-up enrolment codes in a burst from one address: each refused (401), and after a few
    failures the address is throttled (429 with Retry-After) so guessing cannot go on at speed:
    caught when every guess is refused and at most the throttle's allowance were checked."""
    import secrets

    out = Attack()
    transport = httpx.HTTPTransport(local_address=GUESS_ADDRESS)
    base = str(p.market.base_url)
    checked = throttled = 0
    with httpx.Client(base_url=base, transport=transport, timeout=30) as guesser:
        for _ in range(GUESSES):
            body = {"name": "guess", "enrolment_code": "enrol_" + secrets.token_urlsafe(32)}
            r = guesser.post("/v1/clients", json=body)
            checked += r.status_code == 401
            throttled += r.status_code == 429 and int(r.headers.get("Retry-After", "0")) > 0
            out.record(r.status_code in (401, 429), f"guess -> {r.status_code}")
    out.record(
        throttled > 0 and checked <= GUESSES // 2,
        f"{checked} of {GUESSES} guesses were checked, {throttled} throttled",
    )
    out.extra.append({"guesses": GUESSES, "checked": checked, "throttled": throttled})
    return out
