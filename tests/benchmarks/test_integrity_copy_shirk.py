"""Issue 37's ``sybil_twin`` and ``shirk_after_round0`` (``benchmarks/integrity/copy_shirk.py``):
real Fashion-MNIST, the edge nodes' local update and the ServerApp's verify_round with the
server's holdout, in process."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.integrity.copy_shirk import run_trial
from mots.training.verification import VerificationPolicy

pytestmark = [pytest.mark.slow]


def test_sybil_twin_is_withheld_and_honest_pass(fashion_dir: Path) -> None:
    """One update sent by two accounts: both fail ``duplicate`` in round 0 (so neither is
    paid); the 7 honest participants pass, their updates never within 2 × the copy bound of
    another's (on today's main both accounts were verified in every round, 5 of 5)."""
    t = run_trial("sybil_twin", 0, rounds=1, data_dir=fashion_dir)
    assert t.attackers == {0: "duplicate (round 0)", 1000: "duplicate (round 0)"}
    assert t.caught and t.paid == 0
    assert (t.honest_rounds, t.honest_flagged) == (7, 0)
    assert t.honest_copy_distance > 2 * VerificationPolicy().copy_distance


@pytest.mark.xfail(
    strict=True,
    reason="an E/4 update rescaled to an honest norm from round 1 on passes every per-update "
    "check (docs/training.md, 'Copies and shirking': the bond that makes it unprofitable)",
)
def test_rescaled_shirker_after_round0_is_caught(fashion_dir: Path) -> None:
    """The shirker honest in round 0, from round 1 on E/4 of the steps rescaled to its honest
    norm: not caught by verification (a known limit, measured in the bench)."""
    t = run_trial("shirk_after_round0", 0, rounds=3, data_dir=fashion_dir)
    assert t.honest_flagged == 0
    assert t.caught
