"""The token revocation list against the live services (issue 37, points 1 and 2): dead tokens
stay dead on every service after the platform restarts with a new Redis key prefix (the list
lives in the market's database), and a quiet spell longer than the list's staleness bound does
not turn a burst of valid requests into 503s."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from mots.local.agents import Agent, register_population
from mots.local.launcher import Stack

pytestmark = pytest.mark.integration

APIS = ("market", "pricing", "orchestration")
READS = {"market": "/v1/me", "pricing": "/v1/mechanisms", "orchestration": "/v1/rounds"}
"""A route of each API that any active client may read with its token."""
KIND = {"name": "type-1", "data_size": 50, "cost": "0.5"}


def _stack(workdir: Path, database_url: str, **env: str) -> Stack:
    """The three APIs (and their workers) on ``workdir``, the market's database at
    ``database_url`` (SQLite's default file there, or PostgreSQL); a new Redis key prefix."""
    market = {} if database_url.startswith("sqlite") else {"market": database_url}
    stack = Stack(workdir=workdir, database_urls=market, extra_env=env)
    stack.start(timeout_s=180, services=APIS)
    return stack


def _refusals(stack: Stack, token: str) -> dict[str, tuple[int, str | None]]:
    """What each API answers a read with ``token``: (status, problem code)."""
    out = {}
    with httpx.Client(timeout=30) as http:
        for api in APIS:
            r = http.get(stack.url(api) + READS[api], headers={"Authorization": f"Bearer {token}"})
            out[api] = (r.status_code, r.json().get("code") if r.status_code >= 400 else None)
    return out


def _kill_tokens(market: httpx.Client, agents: list[Agent], operator: str) -> dict[str, str]:
    """Four tokens made dead four ways: token → the problem code every service must answer."""
    op = {"Authorization": f"Bearer {operator}"}
    a, b, c, d = agents
    market.post("/v1/me/token", headers=a.auth).raise_for_status()
    market.delete("/v1/me/token", headers=b.auth).raise_for_status()
    market.post(f"/v1/clients/{c.id}/token", headers=op).raise_for_status()
    market.delete(f"/v1/clients/{d.id}", headers=op).raise_for_status()
    return {
        a.token: "token-rotated",
        b.token: "token-revoked",
        c.token: "token-rotated",
        d.token: "client-revoked",
    }


def test_dead_tokens_stay_dead_on_every_service_after_a_restart(
    database_url: str, tmp_path: Path
) -> None:
    """Rotated, self-revoked, operator-reissued and operator-revoked tokens; the platform stopped
    and started again on the same workdir (a new Redis key prefix, as `mots platform up` gets):
    every API still refuses each with its code, and a live token still works everywhere."""
    stack = _stack(tmp_path, database_url)
    try:
        with httpx.Client(base_url=stack.url("market"), timeout=30) as market:
            agents = register_population(market, [{**KIND, "count": 5}], stack.operator_token)
            dead = _kill_tokens(market, agents[:4], stack.operator_token)
        first_prefix = stack.key_prefix
    finally:
        stack.stop()
    stack = _stack(tmp_path, database_url)
    try:
        assert stack.key_prefix != first_prefix
        for token, code in dead.items():
            status = 403 if code == "client-revoked" else 401
            assert _refusals(stack, token) == {api: (status, code) for api in APIS}
        assert _refusals(stack, agents[4].token) == {api: (200, None) for api in APIS}
    finally:
        stack.stop()


async def _burst(url: str, token: str, n: int) -> Counter[int]:
    """``n`` concurrent reads with ``token``; how many got each status."""
    limits = httpx.Limits(max_connections=n)
    async with httpx.AsyncClient(timeout=60, limits=limits) as http:
        answers = await asyncio.gather(
            *(http.get(url, headers={"Authorization": f"Bearer {token}"}) for _ in range(n))
        )
    return Counter(r.status_code for r in answers)


def test_a_burst_after_a_quiet_spell_is_answered(database_url: str, tmp_path: Path) -> None:
    """Each API idle for longer than the list's staleness bound (set to 1 s here, refreshed every
    0.2 s), then 100 concurrent requests with a valid token: all 200, none 503."""
    stack = _stack(
        tmp_path, database_url, MOTS_REVOCATION_REFRESH_S="0.2", MOTS_REVOCATION_MAX_STALE_S="1"
    )
    try:
        with httpx.Client(base_url=stack.url("market"), timeout=30) as market:
            (agent,) = register_population(market, [{**KIND, "count": 1}], stack.operator_token)
        for api in APIS:
            url = stack.url(api) + READS[api]
            assert asyncio.run(_burst(url, agent.token, 1)) == Counter({200: 1})
            time.sleep(1.5)  # quiet: past the refresh interval and the staleness bound
            assert asyncio.run(_burst(url, agent.token, 100)) == Counter({200: 100}), api
    finally:
        stack.stop()
