"""A task pinned to a version (issue 36): a market-only task's stored version is read by
``GET /v1/tasks/{name}?version=N`` once per process; a task file that now declares another
version than the pin is refused, never mixed."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from mots.client.errors import MarketError
from mots.platform.api.tasks import TaskOut, TaskStatus
from mots.tasks import stored
from mots.tasks.stored import TaskVersionChanged, pinned_task
from mots.tasks.task_file import SHIPPED_DIR, TASKS_DIR_ENV

NAME = "digits-pinned"
URL = "http://market.test"


def task_text(
    version: int, scale: float = 2.0, hidden: int = 32, name: str = NAME, fedavg_rounds: int = 0
) -> str:
    """digits' task file as ``name`` at ``version``, with its own U(ε) scale and hidden width
    (and, if not 0, its own FedAvg rounds R)."""
    data = yaml.safe_load((Path(SHIPPED_DIR) / "digits.yaml").read_text(encoding="utf-8"))
    data["name"], data["version"] = name, version
    data["economics"]["scenario"]["utility"]["scale"] = scale
    data["model"]["args"] = {"hidden": [hidden]}
    if fedavg_rounds:
        data["rounds"]["fedavg_rounds"] = fedavg_rounds
    return yaml.safe_dump(data, sort_keys=False)


class FakeMarket:
    """The market's stored versions of tasks (``GET /v1/tasks/{name}[?version=N]``), and every
    (name, version) it was asked for."""

    def __init__(self) -> None:
        self.versions: dict[str, dict[int, str]] = {}
        self.asked: list[tuple[str, int | None]] = []

    def store(self, text: str) -> None:
        """Store a version (``POST /v1/tasks``)."""
        data = yaml.safe_load(text)
        self.versions.setdefault(data["name"], {})[data["version"]] = text

    def task(self, name: str, version: int | None = None) -> TaskOut:
        """A stored version (the latest when none is named), or the market's 404."""
        self.asked.append((name, version))
        held = self.versions.get(name, {})
        number = max(held, default=0) if version is None else version
        if number not in held:
            raise MarketError(404, f"task {name!r} version {version} is not stored", "GET", "/")
        text = held[number]
        return TaskOut(
            name=name,
            version=number,
            status=TaskStatus.ACTIVE,
            description="",
            created_at=datetime.now(UTC),
            spec={},
            content=text,
        )


def fake_market(monkeypatch: pytest.MonkeyPatch) -> FakeMarket:
    """A fake market behind every :class:`~mots.client.market.MarketClient` of the test, with
    the per-process cache of stored versions emptied."""
    from mots.client.market import MarketClient

    fake = FakeMarket()

    def task(_: Any, name: str, version: int | None = None) -> TaskOut:
        return fake.task(name, version)

    monkeypatch.setattr(MarketClient, "task", task)
    stored._stored_version.cache_clear()
    return fake


@pytest.fixture
def market(monkeypatch: pytest.MonkeyPatch) -> FakeMarket:
    """The fake market (:func:`fake_market`)."""
    return fake_market(monkeypatch)


def test_a_pinned_stored_version_is_read_once_and_outlives_a_newer_one(market) -> None:
    """Pinned to version 1, the task reads as version 1 after version 2 is stored (asked of the
    market once: a stored version never changes); unpinned it reads as version 2."""
    market.store(task_text(1, scale=2.0))
    assert pinned_task(NAME, 1, URL, "t").economics.scenario.utility.scale == 2.0
    market.store(task_text(2, scale=5.0, hidden=64))
    again = pinned_task(NAME, 1, URL, "t")
    assert (again.version, again.economics.scenario.utility.scale) == (1, 2.0)
    assert again.model.args == {"hidden": [32]}
    assert market.asked.count((NAME, 1)) == 1
    assert pinned_task(NAME, None, URL, "t").version == 2


def test_a_task_file_edited_to_another_version_is_refused(tmp_path, monkeypatch, market) -> None:
    """A task file that declares version 2 where the round was pinned to version 1 is
    :class:`TaskVersionChanged`, naming both versions; at version 1 it is used as it is."""
    folder = tmp_path / "tasks"
    folder.mkdir()
    monkeypatch.setenv(TASKS_DIR_ENV, str(folder))
    path = folder / f"{NAME}.yaml"
    path.write_text(task_text(1), encoding="utf-8")
    assert pinned_task(NAME, 1, URL, "t").version == 1
    path.write_text(task_text(2), encoding="utf-8")
    with pytest.raises(TaskVersionChanged, match=r"now declares version 2.*opened on version 1"):
        pinned_task(NAME, 1, URL, "t")
    assert market.asked == []  # a task file is never overridden by the market's copy
