"""``make bench-solver`` at a small size: both tables print and every solve checks out."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_solver_bench_agrees_with_enumeration_at_small_sizes() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_solver",
         "--repeats", "1", "--tries", "1", "--cap", "4096", "--tail", "1"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "all checks passed" in done.stdout
    assert "MISMATCH" not in done.stdout
