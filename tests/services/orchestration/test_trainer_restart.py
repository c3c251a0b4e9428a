"""Issue 40, item 1: the orchestration's local federation after a restart (the training worker
stopped and started again on the same federation directory, as `platform down` / `platform up`
do), after its processes were killed while it was idle, and when it cannot start: real SuperLink,
warm-fork template and SuperNodes, real training on Fashion-MNIST."""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path

import pytest

from mots.platform.contracts import TrainResult
from mots.training.federation import LocalFederation
from mots.training.processes import alive
from services.orchestration.core.config import Settings
from services.orchestration.trainer import Trainer

pytestmark = pytest.mark.integration


def _settings(tmp_path: Path, **extra: object) -> Settings:
    """A one-node federation (type 0) training one short FedAvg round."""
    values: dict[str, object] = {
        "trainer": "deployment",
        "artifact_dir": str(tmp_path / "artifacts"),
        "federation_dir": str(tmp_path / "federation"),
        "superlink_port": 0,
        "train_rounds": 1,
        "train_local_steps": 2,
        "train_test_subset": 200,
        "train_lr": 0.05,
        **extra,
    }
    return Settings.model_validate(values)


def _round(trainer: Trainer, round_id: int) -> TrainResult:
    """Train K = (1) of one type on the trainer's local federation; the round publishes."""
    started = time.perf_counter()
    result = trainer.train([1], [300.0], [0], round_id)
    assert result.completed == [1], result
    assert Path(result.artifact_path).is_file()
    print(f"round {round_id}: {time.perf_counter() - started:.1f} s")  # the figure, with -s
    return result


def test_a_round_after_the_worker_restarted_on_the_same_workdir_publishes(
    fashion_dir: Path, tmp_path: Path
) -> None:
    """Round, stop (as `platform down` does), a new trainer on the same federation directory
    (`platform up`), round: the second federation waits for its own template and SuperNodes,
    probed, rather than passing at once on the first run's log lines; each start has its own
    logs (the previous one kept as NAME.log.1)."""
    settings = _settings(tmp_path)
    first = Trainer(settings)
    try:
        _round(first, 1)
    finally:
        first.stop()
    second = Trainer(settings)
    try:
        _round(second, 2)
        fed = second._federation
        assert isinstance(fed, LocalFederation)
        node_ids = {int(n["node_id"]) for n in fed.nodes}
        assert node_ids <= fed.online_node_ids()
        logs = fed.workdir / "logs"
        assert (logs / "supernode-00.log.1").is_file() and (logs / "template.log.1").is_file()
    finally:
        second.stop()


def test_a_round_after_the_federation_was_killed_publishes(
    fashion_dir: Path, tmp_path: Path
) -> None:
    """Every federation process SIGKILLed between rounds (an OOM killer, an operator's kill):
    the next round finds it broken by probing it and starts it afresh, and publishes."""
    trainer = Trainer(_settings(tmp_path))
    try:
        _round(trainer, 1)
        fed = trainer._federation
        assert isinstance(fed, LocalFederation)
        pids = fed.all_pids()
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while any(alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "superlink" in " ".join(fed.faults()) and "exited" in " ".join(fed.faults())
        _round(trainer, 2)
        assert trainer._federation is not fed and trainer._federation.faults() == []
    finally:
        trainer.stop()


def test_a_federation_that_cannot_start_is_the_platforms_fault(tmp_path: Path) -> None:
    """The SuperLink's port taken by another program: the round fails with a PlatformFault that
    says so, not with the participants reported as dropped."""
    from mots.training.processes import PlatformFault

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        trainer = Trainer(_settings(tmp_path, superlink_port=port))
        with pytest.raises(PlatformFault, match=r"platform fault: .*did not start.*in use"):
            trainer.train([1], [300.0], [0], 1)
    assert trainer._federation is None
