"""Adding a task is adding a file (issue 36, item 5): a fourth task, written here as a task
file and one architecture module of its own (neither in the project), with data this test makes,
is validated, split into participants' folders, checked, and trained to a model file that
PyTorch rebuilds from the file alone; no file of the project changes."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from mots.client.model_file import load_model
from mots.tasks.local_data import check_data, write_folder
from mots.tasks.task_file import load_task
from mots.tasks.training import train_task

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
    types:
      - {name: phone, count: 3, data_size: 40, cost: 0.1}
      - {name: laptop, count: 2, data_size: 90, cost: 0.3}
    error_model: {eps0: 0.2, d_gamma2: 4.0}
    utility: {kind: power, scale: 1.0, exponent: 3.0}
  mechanism: swan_robust
  subsidy_budget: 5
rounds: {collection_window_s: 20, fedavg_rounds: 15, local_steps: 10, batch_size: 16, lr: 0.5}
evaluation: {path: evaluation}
"""


def _rings(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    y = rng.integers(0, 3, n)
    angle = y * 2 * np.pi / 3 + rng.normal(0, 0.3, n)  # three arcs of one circle
    radius = 2 + rng.normal(0, 0.3, n)
    return np.stack([radius * np.cos(angle), radius * np.sin(angle)], 1).astype(np.float32), y


def test_a_fourth_task_from_a_file_and_one_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Task file + architecture module in a folder of the test's own; name lookup through
    $MOTS_TASKS_DIR; participants' folders checked against their D; a model file whose own
    network classifies the rings."""
    package = tmp_path / "modules" / "rings_arch"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "bottleneck.py").write_text(textwrap.dedent(ARCHITECTURE))
    monkeypatch.syspath_prepend(str(tmp_path / "modules"))
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "rings.yaml").write_text(TASK)
    monkeypatch.setenv("MOTS_TASKS_DIR", str(tasks))

    task = load_task("rings")
    rng = np.random.default_rng(7)
    write_folder(task.data, tasks / "evaluation", *_rings(600, rng))
    folders = []
    for i, t in enumerate(task.economics.scenario.types):
        for j in range(t.count):
            folder = write_folder(
                task.data, tmp_path / f"{t.name}-{j}", *_rings(int(t.data_size), rng)
            )
            assert check_data(task.name, task.data, folder, int(t.data_size)).ok
            folders.append((i, folder))

    result = train_task(task, folders, tmp_path / "rings.pt2", evaluation_base=tasks)

    assert result.accuracy > 0.8 and result.losses[-1] < result.losses[0]
    model = load_model(result.path)  # rebuilt from the file's own network
    x, y = _rings(300, rng)
    predicted = model(torch.from_numpy(x / 3.0)).argmax(1).numpy()
    assert (predicted == y).mean() > 0.8
    assert "rings_arch" in sys.modules  # the architecture came from the test's own module
