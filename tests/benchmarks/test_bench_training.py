"""``make bench-training`` at a small size: 3 SuperNodes, 2 rounds, everything measured and stopped."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


def test_a_small_training_bench_measures_every_part_and_leaves_no_process(tmp_path: Path) -> None:
    out = tmp_path / "training.json"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_training", "--rounds", "2", "--nodes", "1,1,1",
         "--steps", "20", "--repeats", "1", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(out.read_text())
    assert report["participants"] == [1, 1, 1]
    assert {t["model"] for t in report["throughput"]} == {"logistic", "cnn"}
    assert all(t["ours_sps"] > 0 and t["plain_sps"] > 0 for t in report["throughput"])
    deployment = report["deployment"]
    assert deployment["nodes"] == 3 and deployment["left_running"] == 0
    assert len(deployment["real_round_s"]) == len(deployment["floor_round_s"]) == 2
    assert math.isfinite(deployment["epsilon"]) and deployment["epsilon"] > 0
    assert deployment["summary"]["target_s"] > 0
