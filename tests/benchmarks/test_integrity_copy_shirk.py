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


def test_rescaled_shirker_after_round0_is_caught(fashion_dir: Path) -> None:
    """The shirker honest in round 0, from round 1 on E/4 of the steps rescaled to its honest
    norm: with the shipped policy (``min_spread_ratio`` 0.35) its round-2 update of seed 3 spans
    too few directions for E steps and fails ``rescaled`` (on the code before the check it passed
    every check, verified and paid 3 of 3); the 7 honest participants pass every round.
    Detection is probabilistic (docs/training.md: 2 of 24 runs at D = 120 at this bound), so
    this is seed 3's measured outcome, not a guarantee; the bond prices the rest."""
    t = run_trial("shirk_after_round0", 3, rounds=3, data_dir=fashion_dir)
    assert t.attackers == {3: "rescaled (round 2)"}
    assert t.caught and t.paid == 0
    assert (t.honest_rounds, t.honest_flagged) == (21, 0)
    assert min(v for _, k, v in t.spreads if k != 3) > VerificationPolicy().min_spread_ratio
