"""``make bench-training`` at a small size: 3 SuperNodes, 2 rounds, both edge layouts measured and
stopped."""

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
    rows = {r["layout"]: r for r in report["rows"]}
    assert set(rows) == {"subprocess", "warm"}  # both layouts on the same nodes, in one run
    for row in rows.values():
        assert row["nodes"] == 3 and "error" not in row
        assert row["round_s"] > 0 and row["floor_s"] > 0 and row["slowest_training_s"] > 0
        assert row["idle_edge_rss_mib"] > 50  # torch and Flower are resident somewhere
    for d in report["layouts"]:
        assert d["left_running"] == 0
        assert len(d["real_round_s"]) == len(d["floor_round_s"]) == 2
        assert math.isfinite(d["epsilon"]) and d["epsilon"] > 0
    assert report["verdict"]["round_limit_s"] >= 10.0
