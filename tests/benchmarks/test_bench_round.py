"""``make bench-round`` end to end on the in-process trainer: a round is published and timed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def _bench_round(out: Path) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_round", "--trainer", "inprocess",
         "--rounds", "1", "--train-rounds", "1", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    (row,) = json.loads((out / "round.json").read_text())["rounds"]
    return row


def test_one_round_is_published_and_its_time_accounted_for(tmp_path: Path) -> None:
    """Run twice into one folder: each run is a fresh market (round 1, no clients of the last
    run waiting to declare), so its time is this run's alone."""
    _bench_round(tmp_path)
    row = _bench_round(tmp_path)
    assert row["round_id"] == 1
    assert row["state"] == "published"
    phases = row["phase_seconds"]
    assert list(phases) == ["open", "collecting", "training", "evaluating", "settling"]
    # The persisted transitions cover the whole round; platform time is the rest of it.
    assert sum(phases.values()) == pytest.approx(row["round_seconds"], abs=0.05)
    work = row["training_seconds"] + row["evaluation_seconds"]
    assert row["platform_seconds"] == pytest.approx(row["round_seconds"] - work)
    assert 0 < row["platform_share"] < 1
    assert len(row["fedavg_round_seconds"]) == 1  # --train-rounds 1
    assert 0 < row["round_calls"] <= 7  # issue 38: counted from the round's call log
