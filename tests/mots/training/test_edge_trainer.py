"""The resident edge trainer: wire format, and a real trainer process answering over its socket."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

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
