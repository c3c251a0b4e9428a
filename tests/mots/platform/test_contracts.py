"""The task contracts: every task declared once, routed to its queue, validated on both sides,
and named by a string literal nowhere but in the contracts module."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from prometheus_client import REGISTRY
from pydantic import ValidationError

from mots.platform import contracts
from mots.platform.celery_app import QUEUES, make_celery
from mots.platform.contracts import (
    ALL_TASKS,
    MarketRoundStatus,
    RoundRef,
    TaskSpec,
)

ROOT = Path(__file__).resolve().parents[3]
SCANNED = ("shared", "services", "edge", "benchmarks", "tests")
FILE_SUFFIX = r"(?:db|json|ya?ml|log|toml|txt|pt|py)[\"']"
QUEUE = "|".join(QUEUES)
QUOTED_TASK_NAME = re.compile(rf"""["'](?:{QUEUE})\.(?!{FILE_SUFFIX})\w+["']""")
"""A quoted ``<queue>.<verb>`` (file names such as ``market.db`` aside)."""


def _count(spec: TaskSpec[RoundRef, MarketRoundStatus], outcome: str) -> float:
    labels = {"service": spec.queue, "celery_task": spec.verb, "outcome": outcome}
    return REGISTRY.get_sample_value("mots_tasks_total", labels) or 0.0


SAMPLE = TaskSpec("market.sample", "market", RoundRef, MarketRoundStatus)
"""A task declared here only (not in the contracts), for the TaskSpec machinery's own tests."""


def test_every_task_is_declared_once_on_its_services_queue() -> None:
    names = [spec.name for spec in ALL_TASKS]
    assert len(names) == len(set(names))
    declared = [v for v in vars(contracts).values() if isinstance(v, TaskSpec)]
    assert set(declared) == set(ALL_TASKS)
    routes = make_celery("market", "redis://127.0.0.1:6379/0").conf.task_routes
    for spec in ALL_TASKS:
        assert spec.queue in QUEUES and spec.name == f"{spec.queue}.{spec.verb}"
        assert routes[spec.name] == {"queue": spec.queue}
    with pytest.raises(ValueError, match="must start with its queue"):
        TaskSpec(SAMPLE.name, "pricing", RoundRef, MarketRoundStatus)


def test_no_task_name_is_a_string_literal_outside_the_contracts_module() -> None:
    """A renamed task must fail at type-check time, so nobody may spell a name out."""
    allowed = {Path(contracts.__file__).resolve(), Path(__file__).resolve()}  # and this check
    found = []
    for folder in SCANNED:
        for path in (ROOT / folder).rglob("*.py"):
            if path.resolve() in allowed:
                continue
            for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if QUOTED_TASK_NAME.search(line) or "send_task(" in line:
                    found.append(f"{path.relative_to(ROOT)}:{lineno}: {line.strip()}")
    assert found == []
    # the check can fail, and file names are not task names
    assert QUOTED_TASK_NAME.search(f"app.task(name='{SAMPLE.name}')")
    assert QUOTED_TASK_NAME.search(f'"{QUEUES[2]}.start_round"')
    assert not QUOTED_TASK_NAME.search("tmp_path / 'market.db'")


def test_a_handler_takes_and_gives_json_validated_by_its_models() -> None:
    app = make_celery("market", "redis://127.0.0.1:6379/0")
    seen: list[RoundRef] = []

    @SAMPLE.handler(app)
    def publish(ref: RoundRef) -> MarketRoundStatus:
        seen.append(ref)
        if ref.round_id == 13:
            return "published"  # type: ignore[return-value]  # what mypy would refuse
        return MarketRoundStatus(round_id=ref.round_id, state="published")

    task = app.tasks[SAMPLE.name]
    ok, errors = _count(SAMPLE, "ok"), _count(SAMPLE, "error")
    assert task({"round_id": 7}) == {"round_id": 7, "state": "published"}
    assert seen == [RoundRef(round_id=7)]
    with pytest.raises(ValidationError, match="round_id"):
        task({"round": 7})
    with pytest.raises(TypeError, match="returned str"):
        task({"round_id": 13})
    assert _count(SAMPLE, "ok") == ok + 1
    assert _count(SAMPLE, "error") == errors + 2
    assert publish(RoundRef(round_id=8)).state == "published"  # still a plain function


def test_a_sender_must_send_the_declared_model() -> None:
    assert SAMPLE.body(RoundRef(round_id=3)) == {"round_id": 3}
    with pytest.raises(TypeError, match="takes RoundRef, not MarketRoundStatus"):
        SAMPLE.body(MarketRoundStatus(round_id=3, state="published"))  # type: ignore[arg-type]
