"""Demo folders from a public set and a task trained on them (issue 36): the split gives each
client the samples the training code's partition gives it, and training a task reads only the
participants' folders and writes a model file with its own network, metric and preprocessing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from mots.cli.main import cli
from mots.client.model_file import file_metadata, load_state
from mots.tasks.local_data import read_folder
from mots.tasks.public import load_public
from mots.tasks.split import split_public
from mots.tasks.task_file import load_task
from mots.tasks.training import train_task
from mots.training.config import TrainConfig
from mots.training.partition import shard_indices


@pytest.mark.parametrize("partition", ["iid", "label_skew"])
def test_the_split_is_the_training_partition(tmp_path: Path, partition: str) -> None:
    """Folder type-i-j holds client (i, j)'s shard of the training code, in order."""
    task = load_task("digits")
    folders = split_public(task, tmp_path, counts=(2, 1, 1), partition=partition, seed=4)  # type: ignore[arg-type]
    public = load_public("sklearn-digits")
    config = TrainConfig(sizes=(20, 50, 100), counts=(2, 1, 1), partition=partition, seed=4)
    clients = [(0, 0), (0, 1), (1, 0), (2, 0)]
    assert sorted(folders) == clients
    for (i, j), idx in zip(clients, shard_indices(public.y_train, config, clients), strict=True):
        x, y, problems = read_folder(task.data, folders[(i, j)])
        assert not problems and folders[(i, j)].name == f"type-{i + 1}-{j:03d}"
        np.testing.assert_array_equal(x, public.x_train[idx])
        np.testing.assert_array_equal(y, public.y_train[idx])


def test_a_task_trains_on_the_folders_to_a_model_file(tmp_path: Path) -> None:
    """breast-cancer (CSV): the model file loads in one call with torch alone, carries
    the task, the labels and the standardisation, and beats the majority class."""
    task = load_task("breast-cancer")
    folders = split_public(task, tmp_path / "data")
    model = train_task(task, [(i, f) for (i, _), f in folders.items()], tmp_path / "m.pt2")
    meta = file_metadata(model.path)["metadata"]
    assert meta["task"] == {"name": "breast-cancer", "version": 1}
    assert meta["class_names"] == ["malignant", "benign"] and meta["input_shape"] == [30]
    assert len(meta["preprocessing"]["offset"]) == 30 and meta["participants"] == [4, 3, 2]
    assert list(load_state(model.path)) == ["linear.weight", "linear.bias"]
    rows = torch.rand(5, 30)
    assert torch.export.load(model.path).module()(rows).shape == (5, 2)  # PyTorch alone
    assert model.accuracy > 0.9 and model.losses[-1] < model.losses[0]


def test_training_refuses_a_folder_below_its_types_d(tmp_path: Path) -> None:
    """A type-3 participant (D = 60) given a type-1 folder (15 samples): refused, named."""
    task = load_task("breast-cancer")
    folders = split_public(task, tmp_path / "data")
    with pytest.raises(ValueError, match="holds 15 samples, fewer than the 60"):
        train_task(task, [(2, folders[(0, 0)])], tmp_path / "m.pt2")


def test_mots_data_split_and_check(tmp_path: Path) -> None:
    """The CLI: split writes the folders; check says it fits (exit 0) or why not (exit 1)."""
    runner = CliRunner()
    out = runner.invoke(cli, ["data", "split", "breast-cancer", str(tmp_path)])
    assert out.exit_code == 0 and "9 participants' folders" in out.output, out.output
    ok = runner.invoke(cli, ["data", "check", "breast-cancer", str(tmp_path / "type-3-000")])
    assert ok.exit_code == 0 and "fits task breast-cancer: 60 samples" in ok.output
    few = runner.invoke(
        cli, ["data", "check", "breast-cancer", str(tmp_path / "type-1-000"), "--data-size", "60"]
    )
    assert few.exit_code == 1 and "fewer than the 60 this participant attested" in few.output
    wrong = runner.invoke(cli, ["data", "check", "digits", str(tmp_path / "type-1-000")])
    assert wrong.exit_code == 1 and "no .npz file in the folder" in wrong.output
    unknown = runner.invoke(cli, ["data", "check", "nope", str(tmp_path)])
    assert unknown.exit_code == 1 and "no task file of that name" in unknown.output
