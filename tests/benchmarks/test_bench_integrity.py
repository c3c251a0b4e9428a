"""``make bench-integrity``'s report: suites merged into the contract of issue 13 item 7, the
targets judged, and a suite run end to end through the command line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from benchmarks import bench_integrity as bench
from benchmarks.integrity.suite import SuiteResult


def _fed() -> SuiteResult:
    return SuiteResult(
        "federation",
        attacks={
            "free_rider": {"tried": 3, "refused_or_caught": 3, "paid": "0"},
            "label_flip": {
                "tried": 3,
                "refused_or_caught": 2,
                "paid": "0",
                "harmful_tries": 2,
                "harmful_caught": 2,
            },
        },
        honest_rounds=30,
        honest_flagged=0,
        latency_ratio=1.04,
    )


def test_merge_follows_the_contract_and_judges_the_targets() -> None:
    """Attacks, honest rounds and the latency ratio in the contract's keys; label_flip is judged
    on its harmful tries; a missed attack or too many honest flags miss a target."""
    money = SuiteResult(
        "market",
        attacks={"greedy_declaration": {"tried": 2, "refused_or_caught": 2, "paid": "0"}},
        honest_rounds=10,
        ledger_balanced=True,
    )
    report = bench.merge([_fed(), money])
    assert set(report) >= {"attacks", "honest", "ledger_balanced", "latency_ratio"}
    assert report["honest"] == {"participant_rounds": 40, "flagged": 0}
    assert report["ledger_balanced"] is True and report["latency_ratio"] == 1.04
    assert all(bench.targets(report).values())
    report["attacks"]["free_rider"]["refused_or_caught"] = 2
    report["honest"]["flagged"] = 1
    missed = {k for k, ok in bench.targets(report).items() if not ok}
    assert missed == {"free_rider", "honest_flagged"}
    assert "free_rider" in bench.table(report)
    with pytest.raises(ValueError, match="two suites"):
        bench.merge([_fed(), _fed()])


def test_the_command_runs_a_suite_and_writes_the_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--suite names a module with run(workdir, options); the JSON lands in --out."""
    module = type(sys)("fake_suite")
    module.run = lambda workdir, options: _fed()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fake_suite", module)
    code = bench.main(["--out", str(tmp_path), "--suite", "fake_suite"])
    report = json.loads((tmp_path / "integrity.json").read_text())
    assert code == 0 and report["attacks"]["free_rider"]["paid"] == "0"
    assert report["ledger_balanced"] is None  # no suite here moves money
