"""The SDK's own example of a market of many tasks (the ``mots.client`` docstring, issue 36) runs
as written against the real market: the operator stores digits from its task file and enrols a
device into it."""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

import mots.client
from mots.client import MarketClient

ROOT = Path(__file__).resolve().parents[3]


def _task_example() -> str:
    """The docstring's second code block (the one that names a task)."""
    doc = mots.client.__doc__ or ""
    blocks = re.findall(r"::\n\n((?:    .*\n|\n)+)", doc)
    (block,) = [b for b in blocks if "task=" in b]
    return "\n".join(line[4:] for line in block.splitlines())


def test_the_sdk_docstring_example_of_tasks_runs(
    market: TestClient, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its calls go to the market app (its transport stands in for the network), from the
    repository's root as the example's relative path expects; digits is stored and listed, and
    the code it prints enrols a device into digits."""
    monkeypatch.chdir(ROOT)
    transport: Any = market._transport  # the TestClient's in-process transport
    namespace = {
        "MarketClient": functools.partial(MarketClient, transport=transport),
        "operator_token": "dev-operator-token",
    }
    exec(compile(_task_example(), "mots.client docstring", "exec"), namespace)
    printed = capsys.readouterr().out
    assert "('digits', 1, <TaskStatus.ACTIVE: 'active'>)" in printed, printed
    code = printed.split()[-1]
    r = market.post("/v1/clients", json={"name": "pi-12", "enrolment_code": code})
    assert r.status_code == 201 and r.json()["task"] == "digits", r.text
