"""The network part's verdict (tests/containers/faults.py): a fault round must end by its rule
with nothing lost or paid twice, and the round after the SuperLink's restart must be published
(a federation that does not recover fails the part, though its round still ends by rule)."""

from __future__ import annotations

from typing import Any

from tests.containers import faults


def _row(kind: str, outcome: str, lost: int | None = 0, twice: int | None = 0) -> dict[str, Any]:
    return {"kind": kind, "outcome": outcome, "lost": lost, "paid_twice": twice}


def test_every_fault_ending_by_rule_holds() -> None:
    rows = [
        _row("edge_cut", "published"),
        _row("market_restart", "published"),
        _row("superlink_restart", "settled_by_rule (training failed)"),
        _row("after_superlink_restart", "published"),
    ]
    assert faults.verdict(rows) == {}


def test_the_round_after_the_superlink_restart_must_publish() -> None:
    rows = [
        _row("superlink_restart", "settled_by_rule (training failed)"),
        _row("after_superlink_restart", "settled_by_rule (training failed)"),
    ]
    assert faults.verdict(rows) == {"failed": ["after_superlink_restart"]}


def test_an_error_a_loss_or_a_double_payment_fails() -> None:
    rows = [
        _row("edge_cut", "error: RuntimeError: round 3 never training", None, None),
        _row("market_restart", "published", lost=1),
        _row("superlink_restart", "settled_by_rule", twice=1),
    ]
    assert faults.verdict(rows) == {"failed": ["edge_cut", "market_restart", "superlink_restart"]}


def test_the_part_runs_the_recovery_round_right_after_the_restart() -> None:
    """after_superlink_restart is run (and judged) right after superlink_restart."""
    import inspect

    src = inspect.getsource(faults.run_faults)
    assert src.index('("superlink_restart"') < src.index('("after_superlink_restart"')
    assert "after_superlink_restart" in faults.MUST_PUBLISH
