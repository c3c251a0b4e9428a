"""``make bench-scale`` at N≈50 on SQLite: one full round published, the issue's row format."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def test_a_small_scale_run_publishes_and_writes_its_row(tmp_path: Path) -> None:
    """48 clients: 24 registered in bulk and 24 one ``POST /v1/clients`` each with an enrolment
    code, every one declares or buys, the round publishes with the
    ledger exact, and scale.json holds the row as the issue specifies it."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_scale", "--sizes", "48",
         "--databases", "sqlite", "--out", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    (row,) = json.loads((tmp_path / "scale.json").read_text())["rows"]
    assert {
        "clients", "database", "register_per_s", "declare_per_s", "state_seconds",
        "platform_seconds", "peak_rss_mib", "published", "ledger_balanced",
    } <= set(row)  # fmt: skip
    assert (row["clients"], row["database"]) == (48, "sqlite")
    assert row["published"] and row["ledger_balanced"]
    assert row["register_per_s"] > 0 and row["declare_per_s"] > 0
    assert row["single_registrations"] == 24 and row["register_single_per_s"] > 0
    for phase in ("register_single", "declare"):  # where each phase's CPU went
        cpu = row["cpu_seconds"][phase]
        assert cpu["wall"] > 0 and 0 <= cpu.get("machine-busy-share", 0) <= 1
        assert set(cpu) <= {"wall", "machine-busy", "machine-busy-share", "load-generator"} | set(
            row["peak_rss_mib"]
        ) | {f"market-api.{k}" for k in (1, 2, 3)}
    assert sum(row["moves"].values()) == 48
    phases = row["state_seconds"]
    assert {"collecting", "training", "evaluating", "settling"} <= set(phases)
    own = sum(v for k, v in phases.items() if k not in ("collecting", "training", "evaluating"))
    assert row["platform_seconds"] == pytest.approx(own)
    assert {"market-api", "market-worker", "orchestration-worker"} <= set(row["peak_rss_mib"])
    assert all(0 < mib < 4096 for mib in row["peak_rss_mib"].values())
    assert "bench-scale" in done.stdout
