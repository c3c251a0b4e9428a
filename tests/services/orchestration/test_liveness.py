"""Liveness through the real services: Redis crashes and comes back empty (every queued and
held message lost) while a round collects; the orchestration's reconciler re-drives the round
once its deadline passes and the round publishes within the bounded slack."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from benchmarks.soak import epoch
from mots.economics.utility import PowerUtility
from mots.local.agents import act, choose, register_population, wait_for_quote
from mots.local.demo import wait_round
from mots.local.launcher import RedisServer, Stack
from mots.platform.api.base import Strategy
from mots.platform.settings import DEV_OPERATOR_TOKEN
from tests.services.orchestration.conftest import OPERATOR, TYPES, UTILITY, stack_env

pytestmark = pytest.mark.integration
SLACK_S = 30.0
"""The most a round may be past its state's deadline (issue 15)."""


def overruns(body: dict[str, Any]) -> dict[str, float]:
    """Seconds each state was left after its deadline (negative: in time)."""
    deadlines = body.get("deadlines") or {}
    out = {}
    for t in body["transitions"]:
        if t["from"] in deadlines:
            left = datetime.fromisoformat(t["at"]).timestamp()
            out[t["from"]] = left - epoch(deadlines[t["from"]])
    return out


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server of this test's own (never the shared one on 6379), with AOF."""
    server = RedisServer(tmp_path / "redis-server")
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_a_round_outlives_a_redis_crash_that_loses_its_messages(
    private_redis: RedisServer, tmp_path: Path
) -> None:
    """Two clients stay silent, so the round waits for its collection deadline; Redis is
    SIGKILLed and restarted with its data removed (the worker's held poll message is gone). The
    reconciler re-drives the round past its deadline; it publishes, every state within 30 s of
    its deadline, and the ledger is exact."""
    env = stack_env(
        MOTS_COLLECT_TIMEOUT_S="12",
        MOTS_RECONCILE_INTERVAL_S="1",
        MOTS_RETRY_INTERVAL_S="1",
        MOTS_TASK_TIMEOUT_S="20",
    )
    stack = Stack(workdir=tmp_path / "stack", redis_url=private_redis.url, extra_env=env)
    stack.start(timeout_s=120)
    market = httpx.Client(base_url=stack.url("market"), timeout=60)
    orchestration = httpx.Client(base_url=stack.url("orchestration"), timeout=60, headers=OPERATOR)
    try:
        agents = register_population(market, TYPES, DEV_OPERATOR_TOKEN, deposit="10")
        round_id = orchestration.post("/v1/rounds", headers=OPERATOR).json()["round_id"]
        quote = wait_for_quote(market, agents[0], round_id)
        choices = choose(agents, quote, PowerUtility.model_validate(UTILITY))
        silent = [a for a in agents if choices[a.id] != Strategy.JOIN][:2]
        act(market, [a for a in agents if a not in silent], round_id, choices)
        opened = orchestration.get(f"/v1/rounds/{round_id}").json()
        assert opened["state"] == "collecting"
        assert quote.collect_deadline is not None  # the quote says until when it collects
        assert opened["deadlines"]["collecting"].endswith("Z")  # RFC 3339 UTC (issue 26)
        assert quote.collect_deadline.timestamp() == pytest.approx(
            epoch(opened["deadlines"]["collecting"])
        )
        private_redis.stop()
        shutil.rmtree(private_redis.workdir / "redis")  # the messages are lost, not replayed
        time.sleep(2.0)
        private_redis.start()
        body = wait_round(orchestration, round_id, 180)
        assert body["state"] == "published", body
        late = overruns(body)
        assert set(late) >= {"collecting", "training", "evaluating", "settling"}
        assert max(late.values()) <= SLACK_S, late
        check = market.get("/v1/ledger/check", headers=OPERATOR).json()
        assert check["unbalanced_transactions"] == 0 and Decimal(check["total"]) == 0
        assert "re-driving" in stack.tail("orchestration-worker", 400)
    finally:
        market.close()
        orchestration.close()
        stack.stop()
