"""The ClientApp trains the run's task's architecture (issue 36): a run that carries a task
(:func:`mots.training.task_run.task_run_config`) makes a node train that task's network on its
``data-<task>`` folder, for an image task (digits, 8×8) and a tabular one (breast-cancer, 30
columns: no (C, H, W) model of the training config fits it); a node without a folder for the
task refuses the round rather than train the public set. Called as flwr-clientapp calls it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, RecordDict

from edge.flower_app import client_app
from mots.client.model_file import build_network
from mots.tasks.split import split_public
from mots.tasks.task_file import load_task
from mots.training import flower_messages as fm
from mots.training.task_run import task_run_config, task_train_config
from tests.edge.flower_app.test_client_app import _context, task_identity

__all__ = ["task_identity"]  # the autouse fixture, imported to apply here too


def _run(name: str, tmp_path: Path) -> tuple[dict[str, object], Path, list[np.ndarray]]:
    """A run of task ``name`` (population 1, 1, 1), the type-3 device's folder, and the task's
    network's initial weights (what the ServerApp sends in round 0)."""
    task = load_task(name)
    sizes = [int(t.data_size) for t in task.economics.scenario.types]
    cfg = task_train_config(task, sizes, [1, 1, 1], rounds=1)
    run = {
        **fm.run_config(cfg, [0, 0, 1], str(tmp_path)),
        **task_run_config(task),
        fm.RUN_NOOP: False,
    }
    folders = split_public(task, tmp_path / "data", sizes=tuple(sizes), counts=(1, 1, 1))
    torch.manual_seed(0)
    net = build_network(task.network())
    weights = [v.detach().numpy().copy() for v in net.state_dict().values()]
    return run, folders[(2, 0)], weights


def _msg(weights: list[np.ndarray]) -> Message:
    content = RecordDict({"arrays": ArrayRecord(weights), "config": ConfigRecord({"round": 0})})
    return Message(content, dst_node_id=7, message_type=MessageType.TRAIN)


@pytest.mark.parametrize("name", ["digits", "breast-cancer"])
def test_a_task_run_trains_the_tasks_network_on_the_nodes_folder(name: str, tmp_path: Path) -> None:
    """The reply has the task network's shapes and moved from the sent weights, on the folder's
    own samples (D of type 3)."""
    run, folder, weights = _run(name, tmp_path)
    reply = client_app.app(_msg(weights), _context(run, **{f"data-{name}": str(folder)}))
    assert not reply.has_error(), reply.error
    new = reply.content.array_records["arrays"].to_numpy_ndarrays()
    assert [w.shape for w in new] == [w.shape for w in weights]
    assert any(not np.allclose(a, b) for a, b in zip(new, weights, strict=True))
    metrics = reply.content.metric_records["metrics"]
    assert metrics["num_examples"] == int(load_task(name).economics.scenario.types[2].data_size)


def test_a_task_run_on_a_node_without_its_folder_is_refused(tmp_path: Path) -> None:
    """A node of the public-set layout (no data-<task> at all) does not train a task's round."""
    run, _, weights = _run("digits", tmp_path)
    with pytest.raises(ValueError, match="no data for task digits"):
        client_app.app(_msg(weights), _context(run))
