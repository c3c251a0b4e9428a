"""The orchestration's training settings reach the training engine's configuration."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from services.orchestration.core.config import Settings
from services.orchestration.trainer import Trainer


def test_cross_device_sampling_settings_reach_the_train_config(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """MOTS_TRAIN_FRACTION and MOTS_TRAIN_MIN_CLIENTS set FedAvg's per-round sample; by
    default every participant trains every round."""
    assert Trainer(Settings())._config([8, 16], [0, 0, 1]).fraction_train == 1.0
    monkeypatch.setenv("MOTS_TRAIN_FRACTION", "0.25")
    monkeypatch.setenv("MOTS_TRAIN_MIN_CLIENTS", "3")
    config = Trainer(Settings())._config([8, 16], [0, 0, 1])
    assert (config.fraction_train, config.min_train_clients) == (0.25, 3)
    assert config.counts == (2, 1)
    monkeypatch.setenv("MOTS_TRAIN_FRACTION", "1.5")
    with pytest.raises(ValueError, match="train_fraction"):
        Settings()


def test_superlink_port_zero_takes_a_free_block_not_the_fixed_port() -> None:
    """`--free-ports` (MOTS_SUPERLINK_PORT=0): the local SuperLink's block of ports is found free
    when the federation starts, so it never collides with another platform's fixed 9500."""
    import socket

    from mots.training.federation import ports_needed
    from services.orchestration.trainer import superlink_port

    assert superlink_port(9500, 4) == 9500
    with socket.socket() as held:
        taken = superlink_port(0, 4)  # the block a first federation would take: now in use
        held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as a server binds
        held.bind(("127.0.0.1", taken))
        held.listen()
        port = superlink_port(0, 4)
        block = range(port, port + ports_needed(4))
        assert taken not in block
        for p in block:
            # SO_REUSEADDR as the SuperLink's gRPC server sets it: a port an earlier test's
            # federation left in TIME_WAIT is free to a server, not to a bare bind
            with socket.socket() as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind(("127.0.0.1", p))


@pytest.mark.parametrize(("removed", "stopped"), [([17], True), ([], False)])
def test_a_local_federation_whose_keys_were_unregistered_is_started_afresh(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, removed: list[int], stopped: bool
) -> None:
    """Issue 24: a Flower run that unregistered a removed participant's key leaves that local
    node unable to connect, so the trainer stops the local federation after the round (the next
    round starts it with every node registered again); a run without removals keeps it."""
    import mots.training.runner as runner
    from mots.training.artifacts import TrainingResult

    class Local:
        stops = 0

        def stop(self) -> list[int]:
            Local.stops += 1
            return []

    def train(*args: object, **kwargs: object) -> TrainingResult:
        meta = {"completed_participants": [1], "removed_nodes": removed}
        return TrainingResult(
            epsilon=0.5, losses=[0.5], round_seconds=[1.0], artifact_path=None,
            artifact_sha256=None, metadata=meta,
        )  # fmt: skip

    trainer = Trainer(Settings(trainer="deployment", artifact_dir=str(tmp_path)))
    monkeypatch.setattr(runner, "train_coalition", train)
    monkeypatch.setattr(trainer, "_ensure_federation", lambda types, sizes, task, version: Local())
    trainer._federation = Local()
    trainer.train([1], [50.0], [0], round_id=1)
    assert (Local.stops == 1) is stopped and (trainer._federation is None) is stopped


def test_a_tasks_round_trains_with_its_task_files_fedavg_settings() -> None:
    """Issue 36: a digits round's FedAvg (R, E, b, η0, aggregation, w0) is its task file's
    ``rounds:`` and ``model.init``, not the deployment's MOTS_TRAIN_* (which stay the default
    task's); the population's D_i and N_i are the round's."""
    from mots.tasks.task_file import load_task

    trainer = Trainer(Settings())
    spec = load_task("digits").rounds
    config = trainer._task_config("digits", [20.0, 50.0, 100.0], [0, 0, 1, 2])
    got = (config.rounds, config.local_steps, config.batch_size, config.lr, config.aggregation)
    assert got == (spec.fedavg_rounds, spec.local_steps, spec.batch_size, spec.lr, spec.aggregation)
    assert (config.sizes, config.counts, config.zero_init) == ((20, 50, 100), (2, 1, 1), False)
    assert trainer._task_config("fashion-mnist", [8, 16], [0, 0, 1]) == trainer._config(
        [8, 16], [0, 0, 1]
    )


def test_a_round_trains_the_task_version_it_was_pinned_to(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Issue 36: with version 2 stored at the market, a round pinned to version 1 hands the
    engine version 1 (its FedAvg rounds and its architecture) and its federation the pin."""
    import mots.training.runner as runner
    from mots.training.artifacts import TrainingResult
    from tests.mots.tasks.test_stored import NAME, URL, fake_market, task_text

    market = fake_market(monkeypatch)
    market.store(task_text(1, hidden=32, fedavg_rounds=7))
    market.store(task_text(2, hidden=64, fedavg_rounds=3))
    seen: dict[str, Any] = {}

    def train(*args: object, **kwargs: object) -> TrainingResult:
        seen["task"], seen["config"] = kwargs["task"], args[1]
        return TrainingResult(
            epsilon=0.5, losses=[0.5], round_seconds=[1.0], artifact_path=None,
            artifact_sha256=None, metadata={"completed_participants": [1]},
        )  # fmt: skip

    def federation(types: object, sizes: object, task: str, version: int | None) -> None:
        seen["federation"] = (task, version)

    settings = Settings(trainer="deployment", artifact_dir=str(tmp_path), market_internal_url=URL)
    trainer = Trainer(settings)
    monkeypatch.setattr(runner, "train_coalition", train)
    monkeypatch.setattr(trainer, "_ensure_federation", federation)
    trainer.train([1], [20.0], [0], round_id=1, task=NAME, task_version=1)
    assert seen["task"].version == 1 and seen["task"].model.args == {"hidden": [32]}
    assert seen["config"].rounds == 7
    assert seen["federation"] == (NAME, 1)
