"""A task other than Fashion-MNIST trains on the Flower federation (issue 36): `mots data split
digits` cuts each participant's folder, `mots federation up --data digits=DIR` points each
SuperNode at its own, and a run that carries the digits task trains the task's MLP there: every
update verified against the server's own holdout (a seeded sample of the task's evaluation
data), the quality gate passed, and each round's model file the task's ``mots-model/2``, whose
ε the platform's evaluation of a task's model file measures again and which a buyer's
``examples/buyer/classify.py`` scores with PyTorch alone (a node whose folder does not fit is
refused: tests/edge/flower_app/test_client_app_task_model.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mots.client.model_file import file_metadata
from mots.tasks.local_data import write_folder
from mots.tasks.public import load_public
from mots.tasks.task_file import load_task
from mots.tasks.training import evaluate_model_file
from mots.training.federation import LocalFederation, free_port_block, ports_needed
from mots.training.runner import train_coalition
from mots.training.task_run import task_train_config
from tests.examples.torch_only import run_classify, torch_only_python

MOTS = str(Path(sys.executable).parent / "mots")


def _mots(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([MOTS, *args], capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.integration
@pytest.mark.slow  # a federation up and a Flower run: about a minute on 2 loaded cores
def test_a_digits_round_trains_on_supernodes_and_publishes_the_tasks_model(
    tmp_path: Path,
) -> None:
    """K = (1, 0, 1) of digits on SuperNodes, each on its own folder: verified, published, the
    file's ε re-measured and classify.py's accuracy the file's."""
    task = load_task("digits")
    data = tmp_path / "data"
    split = _mots("data", "split", "digits", str(data), "--counts", "1,1,1")
    assert split.returncode == 0, split.stdout + split.stderr
    port = free_port_block(ports_needed(3))
    workdir = tmp_path / "fed"
    up = _mots(
        "federation", "up", "--nodes", "3", "--counts", "1,1,1", "--port", str(port),
        "--workdir", str(workdir), "--data", f"digits={data}",
    )  # fmt: skip
    assert up.returncode == 0, up.stdout + up.stderr
    fed = LocalFederation.attach(workdir)
    sizes = [int(t.data_size) for t in task.economics.scenario.types]
    cfg = task_train_config(task, sizes, [1, 1, 1], rounds=3)
    try:
        res = train_coalition(
            [1, 0, 1], cfg, engine="deployment", federation=fed, task=task,
            artifact_dir=tmp_path / "art",
        )  # fmt: skip
        status = res.metadata["participant_status"]
        assert [r["status"] for r in status] == ["verified", "verified"], status
        assert res.metadata["quality_gate"]["passed"], res.metadata["quality_gate"]
        assert res.losses[-1] < res.losses[0], res.losses
        assert res.artifact_path is not None
        meta = file_metadata(res.artifact_path)["metadata"]
        assert meta["task"] == {"name": "digits", "version": task.version}
        assert meta["network"] == task.network()
        eps, accuracy = evaluate_model_file(task, res.artifact_path)
        assert abs(eps - res.epsilon) < 1e-5, (eps, res.epsilon)
        public = load_public(str(task.evaluation.public))
        buyer = write_folder(task.data, tmp_path / "buyer", public.x_test, public.y_test)
        got = run_classify(torch_only_python(), res.artifact_path, "--data", str(buyer))
        assert abs(got["accuracy"] - accuracy) <= 0.001, (got, accuracy)
        assert got["accuracy"] > 0.5, got  # learned: chance is 0.1
    finally:
        down = _mots("federation", "down", "--workdir", str(workdir))
    assert down.returncode == 0, down.stdout + down.stderr
