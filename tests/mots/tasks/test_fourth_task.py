"""Adding a task is adding a file (issue 36, item 5): a fourth task, written here as a task
file and one architecture module of its own (neither in the project), with data this test makes,
is validated, split into participants' folders, checked and trained to a model file that PyTorch
rebuilds from the file alone; and a real platform round of it (the four services, Celery, Redis,
a local Flower federation, as ``make demo`` runs them) goes to publication. No file of the
project changes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from decimal import Decimal
from pathlib import Path

import httpx
import numpy as np
import pytest
import torch

from mots.client import MarketClient
from mots.client.model_file import file_metadata, load_model
from mots.local.demo import (
    buyer_model_path,
    check_ledger,
    enrol_task,
    open_task_round,
    start_redis,
    task_summary,
    wait_round,
)
from mots.local.keys import process_secrets
from mots.local.launcher import Stack
from mots.platform.api.base import Strategy
from mots.tasks.local_data import check_data, write_folder
from mots.tasks.split import folder_name
from mots.tasks.task_file import load_task
from mots.tasks.training import train_task

ROOT = Path(__file__).resolve().parents[3]

ARCHITECTURE = '''
"""A one-hidden-layer network: the fourth task's own architecture."""

from mots.tasks.architectures import flat_size, layer


def describe(input_shape, num_classes, width=8):
    return {
        "type": "Sequential",
        "layers": [
            layer("flatten", "Flatten"),
            layer("hidden", "Linear", in_features=flat_size(input_shape), out_features=width),
            layer("act", "ReLU"),
            layer("out", "Linear", in_features=width, out_features=num_classes),
        ],
    }
'''

TASK = """
name: rings
version: 2
description: three classes of points on three arcs of a circle (data this test makes)
data:
  format: csv
  input_shape: [2]
  dtype: float32
  labels: [inner, middle, outer]
  csv: {file: points.csv, features: [u, v], label: ring}
  scale: 3.0
model:
  architecture: rings_arch.bottleneck
  args: {width: 16}
  init: random
economics:
  scenario:
    types:    # SWAN's K*: both laptops join, the phone (dear to train, little data) buys
      - {name: phone, count: 1, data_size: 40, cost: 1.0}
      - {name: laptop, count: 2, data_size: 120, cost: 0.3}
    error_model: {eps0: 0.2, d_gamma2: 4.0}
    utility: {kind: power, scale: 1.0, exponent: 3.0}
  mechanism: swan_robust
  subsidy_budget: 5
rounds: {collection_window_s: 20, fedavg_rounds: 2, local_steps: 20, batch_size: 16, lr: 0.5}
evaluation: {path: evaluation}   # beside this file
"""


def _rings(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    y = rng.integers(0, 3, n)
    angle = y * 2 * np.pi / 3 + rng.normal(0, 0.3, n)  # three arcs of one circle
    radius = 2 + rng.normal(0, 0.3, n)
    return np.stack([radius * np.cos(angle), radius * np.sin(angle)], 1).astype(np.float32), y


def _add_the_task(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The task file (with its evaluation folder beside it) in a folder named by
    $MOTS_TASKS_DIR, and its architecture module in a folder on PYTHONPATH (this process's and
    every process it starts: the services, the SuperNodes, the ServerApp); the tasks folder."""
    modules = tmp_path / "modules"
    package = modules / "rings_arch"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "bottleneck.py").write_text(textwrap.dedent(ARCHITECTURE))
    monkeypatch.syspath_prepend(str(modules))
    path = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(modules), *([path] if path else [])]))
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "rings.yaml").write_text(TASK)
    monkeypatch.setenv("MOTS_TASKS_DIR", str(tasks))
    return tasks


def _participants(tasks: Path, root: Path, seed: int) -> list[tuple[int, Path]]:
    """The platform's evaluation data beside the task file, and one folder of its own per
    participant (client j of type i in ``root/type-<i+1>-<jjj>``, D_i samples), each checked."""
    task = load_task("rings")
    rng = np.random.default_rng(seed)
    write_folder(task.data, tasks / "evaluation", *_rings(600, rng))
    folders = []
    for i, t in enumerate(task.economics.scenario.types):
        for j in range(t.count):
            folder = write_folder(
                task.data, root / folder_name(i, j), *_rings(int(t.data_size), rng)
            )
            assert check_data(task.name, task.data, folder, int(t.data_size)).ok
            folders.append((i, folder))
    return folders


def _project_status() -> str:
    """``git status`` of the project: every changed, added or removed file, untracked ones too."""
    return subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip


def test_a_fourth_task_from_a_file_and_one_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Task file + architecture module in a folder of the test's own; name lookup through
    $MOTS_TASKS_DIR; participants' folders checked against their D; a model file whose own
    network classifies the rings."""
    tasks = _add_the_task(tmp_path, monkeypatch)
    folders = _participants(tasks, tmp_path / "devices", seed=7)

    result = train_task(load_task("rings"), folders, tmp_path / "rings.pt2")

    assert result.accuracy > 0.8 and result.losses[-1] < result.losses[0]
    model = load_model(result.path)  # rebuilt from the file's own network
    x, y = _rings(300, np.random.default_rng(8))
    predicted = model(torch.from_numpy(x / 3.0)).argmax(1).numpy()
    assert (predicted == y).mean() > 0.8
    assert "rings_arch" in sys.modules  # the architecture came from the test's own module


@pytest.mark.integration
@pytest.mark.slow  # four services, a local federation of three SuperNodes and a Flower run
def test_a_round_of_the_fourth_task_runs_to_publication(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The platform as ``make demo`` starts it, told only where the task file is
    ($MOTS_TASKS_DIR), where its module is (PYTHONPATH) and where each device's own folder is
    (MOTS_DEVICE_DATA_DIR): the operator stores the task, its clients enrol and best-respond to
    SWAN's quote, the laptops train on the federation, the round is evaluated, settled and
    published, the participants are paid, the ledger is exact, and the buyer's download is a
    model file that PyTorch alone rebuilds (as ``examples/buyer/classify.py`` loads it) and that
    classifies the rings with its own preprocessing (chance: 1/3)."""
    before = _project_status()
    start = time.monotonic()
    tasks = _add_the_task(tmp_path, monkeypatch)
    devices = tmp_path / "devices"
    _participants(tasks, devices / "rings", seed=11)
    workdir = tmp_path / "platform"
    (workdir / "logs").mkdir(parents=True)
    redis_url, redis_proc = start_redis(workdir)
    stack = Stack(
        workdir=workdir,
        redis_url=redis_url,
        extra_env={
            "MOTS_TRAINER": "deployment",
            "MOTS_DEVICE_DATA_DIR": str(devices),
            "MOTS_POLL_INTERVAL_S": "0.2",
        },
    )
    operator_token = process_secrets().operator_token
    try:
        stack.start(timeout_s=180)
        ready = time.monotonic() - start
        market = MarketClient(stack.url("market"), timeout_s=60)
        orchestration = httpx.Client(
            base_url=stack.url("orchestration"), timeout=60,
            headers={"Authorization": f"Bearer {operator_token}"},
        )  # fmt: skip
        with market, orchestration:
            rnd = enrol_task(market, operator_token, "rings")
            open_task_round(orchestration, market, rnd)
            got = wait_round(orchestration, rnd.round_id, timeout_s=240)
            assert got["state"] == "published", (got, stack.tail("orchestration-worker"))
            assert got["task"] == "rings"
            summary = task_summary(market, rnd, got, "deployment", tmp_path)
            check_ledger(market, operator_token, None, summary)
            paid = {
                a.id: [
                    e.amount
                    for e in market.with_token(a.token).balance().entries
                    if e.kind == "reward" and e.round_id == rnd.round_id
                ]
                for a in rnd.agents
                if rnd.choices[a.id] is Strategy.JOIN
            }
        done = time.monotonic() - start
    finally:
        stack.stop(timeout_s=60)
        stack.forget_redis()  # this platform's keys in the shared Redis
        if redis_proc is not None:
            redis_proc.terminate()
            redis_proc.wait(timeout=10)
    seconds = time.monotonic() - start

    assert summary["participants"] == {"phone": 0, "laptop": 2}, summary
    assert summary["buyers"] == {"phone": 1, "laptop": 0}, summary
    assert set(summary["verification"].values()) == {"verified"}, summary["verification"]
    ledger = summary["ledger"]
    assert ledger["unbalanced_transactions"] == ledger["mismatched_accounts"] == 0, ledger
    assert Decimal(ledger["total"]) == Decimal(ledger["accounts"]["round_pools"]) == 0, ledger
    reward = Decimal(str(summary["rewards"]["laptop"]))
    assert len(paid) == 2 and all(p == [reward] for p in paid.values()), (paid, reward)
    assert summary["buyer_download_verified"] is True

    model_file = buyer_model_path(tmp_path, rnd.round_id)
    model = load_model(model_file)  # torch.export.load(path).module(): PyTorch alone
    pre = file_metadata(model_file)["metadata"]["preprocessing"]
    x, y = _rings(300, np.random.default_rng(12))
    x = (x - np.asarray(pre["offset"], np.float32)) / np.asarray(pre["divide_by"], np.float32)
    assert (model(torch.from_numpy(x)).argmax(1).numpy() == y).mean() > 0.8

    assert _project_status() == before  # no file of the project was written
    print(  # the figures, with -s
        f"the rings round: platform ready {ready:.1f} s, round published and checked {done:.1f} s, "
        f"stopped {seconds:.1f} s; per state {summary['phase_seconds']}"
    )
