"""The resident edge trainer: wire format, and a real trainer process answering over its socket."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mots.training.config import TrainConfig
from mots.training.edge_trainer import (
    TrainerError,
    handle_train,
    ping,
    recv_frame,
    request_training,
    send_frame,
)
from mots.training.inprocess import run_inprocess


def test_frame_roundtrip() -> None:
    """Header and arrays (dtype, shape, bytes) survive a socket pair."""
    a, b = socket.socketpair()
    arrays = [np.arange(6, dtype=np.float32).reshape(2, 3), np.zeros(0, np.float32)]
    send_frame(a, {"op": "x", "n": 1}, arrays)
    header, got = recv_frame(b)
    assert header == {"op": "x", "n": 1}
    np.testing.assert_array_equal(got[0], arrays[0])
    assert got[1].shape == (0,)
    a.sendall(b"XXXX\x00\x00\x00\x00")
    with pytest.raises(TrainerError, match="magic"):
        recv_frame(b)
    a.close()
    b.close()


def _request(cfg: TrainConfig, round_index: int = 0) -> dict[str, object]:
    return {
        "config": cfg.model_dump(mode="json"),
        "type_index": 2,
        "client_index": 0,
        "round": round_index,
    }


def test_handle_train_is_the_inprocess_update(tiny: TrainConfig) -> None:
    """One client's update through handle_train equals the in-process engine's round for K = (0, 0, 1)."""
    cfg = tiny.model_copy(update={"rounds": 1})
    expected = run_inprocess([0, 0, 1], cfg, vectorised=False)[0].weights
    start = [np.zeros((10, 784), np.float32), np.zeros(10, np.float32)]
    new, info = handle_train(_request(cfg), start)
    np.testing.assert_allclose(new[0], expected[0], atol=1e-6)
    assert info["num_examples"] == 300 and info["samples"] == cfg.local_steps * cfg.batch_size


def test_trainer_process_over_socket(tiny: TrainConfig, tmp_path: Path) -> None:
    """A real trainer process: ping, train (same update as in process), errors reported, SIGTERM exits."""
    sock = Path("/tmp") / f"mots-test-{uuid.uuid4().hex[:12]}.sock"
    proc = subprocess.Popen(
        [sys.executable, "-m", "mots.training.edge_trainer", "--socket", str(sock)]
    )
    try:
        deadline = time.monotonic() + 60
        while not sock.exists():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        assert ping(sock)["pid"] == proc.pid
        cfg = tiny.model_copy(update={"rounds": 1})
        start = [np.zeros((10, 784), np.float32), np.zeros(10, np.float32)]
        new, info = request_training(sock, _request(cfg), start)
        local, _ = handle_train(_request(cfg), start)
        np.testing.assert_allclose(new[0], local[0], atol=1e-6)
        assert info["train_seconds"] > 0
        with pytest.raises(TrainerError, match="client_index"):
            bad = {**_request(cfg), "client_index": 7}
            request_training(sock, bad, start)
    finally:
        proc.terminate()
        assert proc.wait(timeout=20) == 0
    assert not sock.exists()
    with pytest.raises(TrainerError, match="cannot connect"):
        request_training(sock, {}, [])


def _task_request(task_name: str, root: Path, round_index: int) -> dict[str, object]:
    """A local update of ``task_name`` on the type-1 device's own folder (under ``root``)."""
    from mots.tasks.split import folder_name
    from mots.tasks.task_file import load_task
    from mots.training.task_run import task_train_config

    task = load_task(task_name)
    sizes = [t.data_size for t in task.economics.scenario.types]
    cfg = task_train_config(task, sizes, [t.count for t in task.economics.scenario.types])
    return {
        "config": cfg.model_dump(mode="json"),
        "type_index": 0,
        "client_index": 0,
        "round": round_index,
        "local_data": {
            "task": task.name,
            "path": str(root / task.name / folder_name(0, 0)),
            "spec": task.data.model_dump(mode="json"),
            "min_samples": int(sizes[0]),
            "network": task.network(),
        },
    }


def test_a_device_in_two_tasks_runs_keeps_each_tasks_data_and_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 36: a SuperNode serving a digits run and a breast-cancer run at once gets their
    messages interleaved; each task's folder is read (and checked) once, not at every switch, and
    an update is the same whatever the other task did between."""
    from mots.tasks.split import split_public
    from mots.tasks.task_file import load_task
    from mots.training import edge_trainer

    for name in ("digits", "breast-cancer"):
        task = load_task(name)
        types = task.economics.scenario.types
        split_public(
            task,
            tmp_path / name,
            sizes=tuple(int(t.data_size) for t in types),
            counts=tuple(t.count for t in types),
        )
    reads: list[str] = []
    real = edge_trainer._local_data

    def counting(local: dict[str, Any], pid: int) -> Any:
        reads.append(str(local["task"]))
        return real(local, pid)

    monkeypatch.setattr(edge_trainer, "_STATE", edge_trainer._State())
    monkeypatch.setattr(edge_trainer, "_local_data", counting)
    w = {name: [np.zeros_like(v) for v in _initial(name)] for name in ("digits", "breast-cancer")}
    out = {}
    for r in range(2):
        for name in ("digits", "breast-cancer"):
            out[(name, r)], _ = handle_train(_task_request(name, tmp_path, r), w[name])
    assert sorted(reads) == ["breast-cancer", "digits"], reads
    monkeypatch.setattr(edge_trainer, "_STATE", edge_trainer._State())  # a fresh node
    alone, _ = handle_train(_task_request("digits", tmp_path, 1), w["digits"])
    for a, b in zip(alone, out[("digits", 1)], strict=True):
        np.testing.assert_array_equal(a, b)


def _initial(name: str) -> list[Any]:
    """The task's global model's weights (their shapes)."""
    from mots.client.model_file import build_network
    from mots.tasks.task_file import load_task

    model = build_network(load_task(name).network())
    return [v.detach().numpy() for v in model.state_dict().values()]
