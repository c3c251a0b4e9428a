"""`make demo`'s summary table prints a round settled by rule (a type with nobody joining, no
model, no price) instead of crashing with a KeyError, as a demo under port contention once did."""

from __future__ import annotations

import pytest

from mots.local.demo import print_summary


def test_a_round_settled_by_rule_prints(capsys: pytest.CaptureFixture[str]) -> None:
    print_summary(
        {
            "round_id": 3,
            "task": "digits",
            "state": "settled_by_rule",
            "rule": "collection window closed with no coalition",
            "participants": {"type-2": 0},
            "buyers": {"type-1": 2},
            "rewards": {},
            "price": None,
            "welfare": None,
        }
    )
    out = capsys.readouterr().out
    assert "settled by rule: collection window closed" in out
    assert "type-1" in out and "type-2" in out
    assert "price p           -" in out
