"""The orchestration's trainer sends every task's round to the Flower federation (issue 36): a
digits round and a breast-cancer round, started at the same time, each train on a local
federation of their own (its SuperNodes holding that task's ``data-<task>`` folders) as a Flower
run, both at once (their trainings overlap in time: neither waits for the other's lock), and
each publishes its task's model file, whose ε the platform's evaluation measures again."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from mots.client.model_file import file_metadata
from mots.tasks.task_file import load_task
from mots.tasks.training import evaluate_model_file
from services.orchestration.core.config import Settings
from services.orchestration.trainer import Trainer


@pytest.mark.integration
@pytest.mark.slow  # two local federations and two Flower runs: about a minute and a half
def test_two_tasks_rounds_train_on_flower_at_the_same_time(tmp_path: Path) -> None:
    """K = (1, 0, 1) of digits and of breast-cancer, one thread each."""
    settings = Settings(
        trainer="deployment",
        federation_dir=str(tmp_path / "fed"),
        artifact_dir=str(tmp_path / "art"),
        superlink_port=0,
    )
    trainer = Trainer(settings)
    spans: dict[str, tuple[float, float]] = {}
    results: dict[str, Any] = {}

    def train(task: str, round_id: int) -> None:
        sizes = [float(t.data_size) for t in load_task(task).economics.scenario.types]
        start = time.monotonic()
        results[task] = trainer.train([1, 0, 1], sizes, [0, 1, 2], round_id, task=task)
        spans[task] = (start, time.monotonic())

    threads = [
        threading.Thread(target=train, args=(t, r))
        for r, t in enumerate(["digits", "breast-cancer"], start=1)
    ]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=600)
    finally:
        trainer.stop()
    assert set(results) == {"digits", "breast-cancer"}, "a training failed (see the log)"
    (a0, a1), (b0, b1) = spans["digits"], spans["breast-cancer"]
    overlap = min(a1, b1) - max(a0, b0)
    assert overlap > 0.5 * min(a1 - a0, b1 - b0), spans  # at once, not one after the other
    for task, res in results.items():
        assert res.metadata["engine"] == "deployment", res.metadata
        assert [p["status"] for p in res.participants] == ["verified", "verified"]
        meta = file_metadata(res.artifact_path)["metadata"]
        assert meta["task"]["name"] == task
        eps, _ = evaluate_model_file(load_task(task), res.artifact_path)
        assert abs(eps - res.epsilon) < 1e-5, (task, eps, res.epsilon)
