"""A buyer with PyTorch alone uses any task's model file (issue 36): the digits (8×8 images,
.npz folder) and breast-cancer (CSV) tasks train on participants' folders to a model file that
``examples/buyer/classify.py`` rebuilds and scores on data in the task's own format, matching
the accuracy the file records."""

from __future__ import annotations

from pathlib import Path

import pytest

from mots.tasks.local_data import write_folder
from mots.tasks.public import load_public
from mots.tasks.split import split_public
from mots.tasks.task_file import load_task
from mots.tasks.training import train_task
from tests.examples.torch_only import run_classify, torch_only_python

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("name", ["digits", "breast-cancer"])
def test_a_task_model_classifies_the_tasks_own_format_with_torch_alone(
    name: str, tmp_path: Path
) -> None:
    """Train the shipped task on its demo folders, write the evaluation split as a buyer's folder
    in the task's format, classify it in a torch-only environment: the file's accuracy to 0.1%."""
    task = load_task(name)
    folders = split_public(task, tmp_path / "data")
    model = train_task(task, [(i, f) for (i, _), f in folders.items()], tmp_path / "model.pt2")
    public = load_public(str(task.evaluation.public))
    buyer = write_folder(task.data, tmp_path / "buyer", public.x_test, public.y_test)
    got = run_classify(torch_only_python(), model.path, "--data", str(buyer))
    assert abs(got["accuracy"] - got["metadata_accuracy"]) <= 0.001, got
    assert got["accuracy"] > 0.8, got  # both tasks learn: well above chance (0.1 and 0.63)
