"""A running platform (four services, real Redis and Celery workers) for the round tests."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from mots.local.agents import Agent, register_population
from mots.local.launcher import Stack
from mots.platform.settings import DEV_OPERATOR_TOKEN

OPERATOR = {"Authorization": f"Bearer {DEV_OPERATOR_TOKEN}"}
TYPES = [
    {"name": "type-1", "count": 4, "data_size": 50, "cost": "0.5"},
    {"name": "type-3", "count": 2, "data_size": 300, "cost": "3.0"},
]
UTILITY = {"kind": "power", "scale": 1.0, "exponent": 8.0}


def stack_env(**extra: str) -> dict[str, str]:
    """Small, fast settings: in-process training of a tiny config, short collection."""
    return {
        "MOTS_TRAINER": "inprocess",
        "MOTS_TRAIN_ROUNDS": "2",
        "MOTS_TRAIN_LOCAL_STEPS": "2",
        "MOTS_TRAIN_TEST_SUBSET": "500",
        "MOTS_EVAL_TEST_SUBSET": "500",
        "MOTS_UTILITY": json.dumps(UTILITY),
        "MOTS_COLLECT_TIMEOUT_S": "30",
        "MOTS_POLL_INTERVAL_S": "0.2",
        **extra,
    }


@pytest.fixture
def platform(
    redis_url: str, tmp_path: Path
) -> Iterator[tuple[Stack, httpx.Client, httpx.Client, list[Agent]]]:
    """The four services with a registered, funded population of six clients."""
    stack = Stack(workdir=tmp_path / "stack", redis_url=redis_url, extra_env=stack_env())
    stack.start(timeout_s=120)
    market = httpx.Client(base_url=stack.url("market"), timeout=60)
    orchestration = httpx.Client(base_url=stack.url("orchestration"), timeout=60, headers=OPERATOR)
    try:
        agents = register_population(market, TYPES, DEV_OPERATOR_TOKEN, deposit="10")
        yield stack, market, orchestration, agents
    finally:
        market.close()
        orchestration.close()
        stack.stop()
