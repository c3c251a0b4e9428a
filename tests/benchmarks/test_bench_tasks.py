"""``make bench-tasks``'s ratios: each task's round beside others over its own round alone."""

from __future__ import annotations

from typing import Any

from benchmarks.bench_tasks import ROWS, TARGET, ratios_to_alone


def _row(tasks: list[str], seconds: list[float]) -> dict[str, Any]:
    return {"tasks": tasks, "round_s": dict(zip(tasks, seconds, strict=True))}


def test_every_task_of_a_row_of_several_is_measured_alone_first() -> None:
    alone = [r[0] for r in ROWS if len(r) == 1]
    assert all(t in alone for r in ROWS for t in r)
    assert ROWS.index(["fashion-mnist", "digits"]) > max(ROWS.index([t]) for t in alone)


def test_a_paired_round_is_divided_by_its_own_task_alone_not_another_task() -> None:
    """Digits' 10 FedAvg rounds take longer than fashion-mnist's 5: 70 s beside fashion-mnist
    is 1.09× its 64 s alone (met), though 1.23× fashion-mnist's 57 s alone."""
    rows = [
        _row(["fashion-mnist"], [57.0]),
        _row(["digits"], [64.4]),
        _row(["breast-cancer"], [65.2]),
        _row(["fashion-mnist", "digits"], [62.3, 70.4]),
        _row(["fashion-mnist", "digits", "breast-cancer"], [78.9, 89.9, 151.0]),
    ]
    solo, pair, verdict = ratios_to_alone(rows)
    assert solo == {"fashion-mnist": 57.0, "digits": 64.4, "breast-cancer": 65.2}
    assert pair["ratio_to_alone"]["digits"] == 70.4 / 64.4
    assert rows[-1]["ratio_to_alone"]["breast-cancer"] == 151.0 / 65.2
    assert verdict == {"fashion-mnist": "met", "digits": "met"}


def test_the_verdict_is_per_task() -> None:
    rows = [
        _row(["fashion-mnist"], [50.0]),
        _row(["digits"], [40.0]),
        _row(["fashion-mnist", "digits"], [50.0 * TARGET, 40.0 * TARGET + 1.0]),
    ]
    assert ratios_to_alone(rows)[2] == {"fashion-mnist": "met", "digits": "missed"}
