"""``make bench-market`` end to end at a small size: the harness runs and the ledger balances.

Correctness only (the bench's targets are for the README, not asserted here): every purchase is
booked once, the baseline really books one purchase per transaction, and the ledger check the
bench runs afterwards finds every account exact.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def _bench(out: Path, *args: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_market", "--purchases", "300", "--seconds", "60",
         "--out", str(out), *args],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "balanced exactly" in done.stdout
    return json.loads(next(out.glob("market-*.json")).read_text())


def _booked_all(run: dict, measured: int) -> None:
    assert run["status_codes"] == {"201": measured}  # JSON keys are strings
    assert run["booked"] == 300
    assert run["ledger"]["balanced_exactly"] is True
    assert run["ledger"]["unbalanced_transactions"] == 0
    assert run["ledger"]["pool_expected"] == "375.000000"  # 300 × 1.250000


def test_on_postgresql_with_its_baseline(tmp_path: Path) -> None:
    report = _bench(tmp_path, "--db", "postgresql")
    _booked_all(report, 100)
    _booked_all(report["baseline"], 100)
    # The baseline books one purchase per transaction; the default batches them.
    assert report["baseline"]["max_batch"] == 1
    assert report["baseline"]["batching"]["purchases"]["mean_size"] == 1.0
    assert report["max_batch"] == 256 and report["writers"] == 2
    assert report["healthz_floor"]["status_codes"] == {"200": 100}


def test_on_sqlite_with_one_writer_by_default(tmp_path: Path) -> None:
    report = _bench(tmp_path, "--db", "sqlite", "--no-baseline")
    _booked_all(report, 100)
    assert report["baseline"] is None and report["writers"] == 1
