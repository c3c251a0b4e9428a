"""Measurement with real training: parallel workers give the same points; an interrupted run resumes."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from mots.reproduce.measure import DEFAULT_DATA_DIR, measure_setting
from mots.reproduce.settings import MNIST_LIKE, QUICK

pytestmark = pytest.mark.skipif(
    not (DEFAULT_DATA_DIR / "t10k-labels-idx1-ubyte.gz").exists(),
    reason="Fashion-MNIST not installed (make system / apt-get install dataset-fashion-mnist)",
)
TINY = replace(QUICK, rounds_override=1, test_subset=100)
COALITIONS = [[0, 0, 1], [1, 0, 1], [2, 0, 1], [0, 1, 1]]


def test_two_workers_measure_the_same_points_as_one(tmp_path: Path) -> None:
    """Each run is seeded, so training in two processes gives the sequential run's ε exactly."""
    one = measure_setting(MNIST_LIKE, TINY, tmp_path / "a", coalitions=COALITIONS, seeds=[0, 1])
    two = measure_setting(
        MNIST_LIKE, TINY, tmp_path / "b", coalitions=COALITIONS, seeds=[0, 1], workers=2
    )
    assert [p["epsilon"] for p in one.points] == [p["epsilon"] for p in two.points]
    assert [(p["seed"], p["participants"]) for p in two.points] == [
        (s, k) for s in (0, 1) for k in COALITIONS
    ]
    assert not list((tmp_path / "b" / "measured").glob("*.partial.jsonl"))


def test_an_interrupted_measurement_resumes_from_its_partial_file(tmp_path: Path) -> None:
    """Points already in <cache>.partial.jsonl are kept, not retrained; the rest are trained."""
    first = measure_setting(MNIST_LIKE, TINY, tmp_path, coalitions=COALITIONS, seeds=[0])
    cache = next((tmp_path / "measured").glob("*.json"))
    kept = {**first.points[0], "epsilon": 9.5}  # a value training cannot produce here
    cache.with_suffix(".partial.jsonl").write_text(json.dumps(kept) + "\n")
    cache.unlink()
    again = measure_setting(MNIST_LIKE, TINY, tmp_path, coalitions=COALITIONS, seeds=[0])
    assert again.points[0]["epsilon"] == 9.5
    assert [p["epsilon"] for p in again.points[1:]] == [p["epsilon"] for p in first.points[1:]]
    assert again.config["resumed_points"] == 1
    with pytest.raises(ValueError, match="workers"):
        measure_setting(MNIST_LIKE, TINY, tmp_path, coalitions=COALITIONS, workers=0)
