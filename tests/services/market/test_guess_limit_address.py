"""The enrolment-code guess limit keys on the address the market can trust (issue 37, point 7):
the TCP peer, or, only for a peer listed in ``MOTS_TRUSTED_PROXIES``, the address that proxy
appended to ``X-Forwarded-For``. Against a live market API (uvicorn as the launcher runs it)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from mots.local.launcher import Stack

pytestmark = pytest.mark.integration

GUESSES = 15
VICTIM = "127.0.0.2"
"""The victim's own address: loopback too, so the test can connect from it."""


@pytest.fixture
def market(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Stack]:
    """A live market API (its worker too) with the environment the test's marker names."""
    env = getattr(request, "param", {})
    stack = Stack(workdir=tmp_path, extra_env=env)
    stack.start(timeout_s=120, services=("market",))
    try:
        yield stack
    finally:
        stack.stop()


def _code(stack: Stack) -> str:
    """A real enrolment code for a few registrations."""
    r = httpx.post(
        stack.url("market") + "/v1/enrolments",
        json={"type_name": "t", "data_size": 50, "cost": "0.5", "uses": 5, "ttl_s": 600},
        headers={"Authorization": f"Bearer {stack.operator_token}"},
    )
    r.raise_for_status()
    return str(r.json()["code"])


def _guess(http: httpx.Client, forwarded: str | None) -> int:
    """One registration with a made-up code; its status."""
    headers = {} if forwarded is None else {"X-Forwarded-For": forwarded}
    body = {"name": "guess", "enrolment_code": f"guess-{random.getrandbits(64):x}"}
    return http.post("/v1/clients", json=body, headers=headers).status_code


def _rotating() -> str:
    return f"10.{random.randrange(256)}.{random.randrange(256)}.{random.randrange(1, 255)}"


def test_a_rotating_forwarded_for_does_not_escape_the_limit(market: Stack) -> None:
    """15 guesses from one peer, each claiming another X-Forwarded-For: 10 answered 401, then
    429 (the header is not trusted from a peer that is no configured proxy)."""
    with httpx.Client(base_url=market.url("market"), timeout=30) as http:
        answers = [_guess(http, _rotating()) for _ in range(GUESSES)]
    assert answers == [401] * 10 + [429] * (GUESSES - 10)


def test_a_spoofed_victim_address_does_not_get_the_victim_refused(market: Stack) -> None:
    """An attacker guesses 15 times claiming the victim's address in X-Forwarded-For; the victim,
    connecting from that address, then registers with its real code: 201."""
    with httpx.Client(base_url=market.url("market"), timeout=30) as http:
        answers = [_guess(http, VICTIM) for _ in range(GUESSES)]
    assert answers[-1] == 429
    transport = httpx.HTTPTransport(local_address=VICTIM)
    with httpx.Client(base_url=market.url("market"), transport=transport, timeout=30) as victim:
        r = victim.post("/v1/clients", json={"name": "victim", "enrolment_code": _code(market)})
    assert r.status_code == 201, r.text


@pytest.mark.parametrize("market", [{"MOTS_TRUSTED_PROXIES": "127.0.0.1"}], indirect=True)
def test_behind_a_trusted_proxy_the_address_it_appended_counts(market: Stack) -> None:
    """Requests through a configured proxy (127.0.0.1 here): the attacker's own entries in
    X-Forwarded-For rotate, the proxy appends its real address last; that address is limited
    (429 after 10), and the victim whose address the attacker also wrote registers (201)."""
    attacker, victim = "198.51.100.66", "203.0.113.9"
    with httpx.Client(base_url=market.url("market"), timeout=30) as http:
        answers = [_guess(http, f"{victim}, {_rotating()}, {attacker}") for _ in range(GUESSES)]
        assert answers == [401] * 10 + [429] * (GUESSES - 10)
        r = http.post(
            "/v1/clients",
            json={"name": "victim", "enrolment_code": _code(market)},
            headers={"X-Forwarded-For": victim},
        )
    assert r.status_code == 201, r.text
