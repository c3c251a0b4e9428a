"""Issue 37's ``shirk_after_round0`` row judged by deterrence (``benchmarks/integrity/copy_shirk.py``,
:func:`deterrence`): payoff sums from the tries' measured detection, with the bond a deployment
quotes; and the attacking trainer's rescaling (``benchmarks/integrity/adversary.py``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from benchmarks import bench_integrity as bench
from benchmarks.integrity.adversary import rescaled
from benchmarks.integrity.copy_shirk import MEASURED_Q, deterrence, row_bond
from mots.economics.bond import shirk_gain


def test_no_bond_and_a_caught_half_leave_shirking_profitable() -> None:
    """Without a bond (q = 1, the code's default) a shirker caught in 4 of 8 tries still gains:
    missed it keeps (1 − φ)·C_i = 0.75, caught it loses φ·C_i = 0.25, mean 0.25 > 0 (honest)."""
    d = deterrence(8, 4, 56, 0, bond_rate=1.0, work_fraction=0.25)
    assert d["bond_over_cost"] == 0.0
    assert d["shirk_payoff_sum"] == pytest.approx(4 * 0.75 - 4 * 0.25)
    assert d["shirk_payoff_mean"] == pytest.approx(0.25) and d["honest_payoff_mean"] == 0.0
    assert d["deterred"] is False


@pytest.mark.parametrize(("caught", "deterred"), [(1, False), (2, False), (3, True), (8, True)])
def test_the_bond_deters_when_the_measured_rate_exceeds_the_rate_it_was_sized_for(
    caught: int, deterred: bool
) -> None:
    """B_i sized for q = 0.25 (B_i = 2·C_i): with 8 tries the marginal joiner's mean gain is
    (1 − φ)(1 − q̂/q), negative only for q̂ > 0.25, i.e. 3 or more caught (2 of 8 is q exactly:
    indifferent, not deterred); the sums agree with mots.economics.bond.shirk_gain."""
    d = deterrence(8, caught, 56, 0, bond_rate=0.25, work_fraction=0.25)
    assert d["bond_over_cost"] == pytest.approx(2.0)
    q = caught / 8
    expected = shirk_gain(0.5, 0.5, 1.0, 2.0, q, 0.25)  # U + r = C = 1: the marginal joiner
    assert d["shirk_payoff_mean"] == pytest.approx(expected)
    assert d["deterred"] is deterred


def test_honest_flags_cost_the_honest_their_bond_too() -> None:
    """An honest participant flagged did the work and forfeits r_i, the model and B_i: −(1 + 2)
    each; with enough of them shirking beats honesty again (the false positives' price)."""
    d = deterrence(8, 3, 10, 2, bond_rate=0.25, work_fraction=0.25)
    assert d["honest_payoff_sum"] == pytest.approx(-6.0)
    assert d["honest_payoff_mean"] == pytest.approx(-0.6)
    assert d["shirk_payoff_mean"] > d["honest_payoff_mean"] and d["deterred"] is False


def test_one_try_is_never_a_verdict() -> None:
    """A row needs at least two tries (the issue's rule), whatever they show."""
    assert deterrence(1, 1, 7, 0, bond_rate=0.25, work_fraction=0.25)["deterred"] is False


def test_the_bench_judges_a_deterrence_row_on_deterrence(monkeypatch: pytest.MonkeyPatch) -> None:
    """A row whose target is "deterred" passes with shirkers paid when the bond deters and fails
    when it does not; the table says which, with the payoff sums."""
    row = {"tried": 8, "refused_or_caught": 5, "paid": "3", "target": "deterred"}
    row |= deterrence(8, 5, 56, 0, bond_rate=0.25, work_fraction=0.25)
    report: dict[str, Any] = {
        "attacks": {"shirk_after_round0": row},
        "honest": {"participant_rounds": 200, "flagged": 0},
        "ledger_balanced": None,
        "latency_ratio": None,
    }
    assert bench.targets(report)["shirk_after_round0"] is True
    assert "deterred: detected 0.62" in bench.table(report)
    report["attacks"]["shirk_after_round0"] |= deterrence(8, 1, 56, 0, 0.25, 0.25)
    assert bench.targets(report)["shirk_after_round0"] is False
    assert "NOT deterred" in bench.table(report)
    assert row_bond().bond_detection_rate == MEASURED_Q
    monkeypatch.setenv("MOTS_BOND_DETECTION_RATE", "0.3")
    assert row_bond().bond_detection_rate == 0.3


def test_the_attacking_trainer_rescales_to_the_honest_norm_keeping_its_directions() -> None:
    """``rescaled``: the lazy update's direction at the honest update's norm."""
    rng = np.random.default_rng(0)
    sent = [
        rng.standard_normal((4, 3)).astype(np.float32),
        rng.standard_normal(3).astype(np.float32),
    ]
    lazy = [a + 0.1 * rng.standard_normal(a.shape).astype(np.float32) for a in sent]
    honest = [a + 2.0 * rng.standard_normal(a.shape).astype(np.float32) for a in sent]

    def delta(w: list[np.ndarray]) -> np.ndarray:
        return np.concatenate([(a - s).ravel() for a, s in zip(w, sent, strict=True)])

    out = rescaled(sent, lazy, honest)
    assert np.linalg.norm(delta(out)) == pytest.approx(np.linalg.norm(delta(honest)), rel=1e-5)
    cos = delta(out) @ delta(lazy) / np.linalg.norm(delta(out)) / np.linalg.norm(delta(lazy))
    assert cos == pytest.approx(1.0, abs=1e-5)


def test_the_unit_harness_still_corrupts_every_update_attack() -> None:
    """``simulate`` sends every name of ``ATTACKS`` it does not train itself through ``corrupt``;
    issue 37's trainer-only attacks stay out of that list (with them in it ``make
    bench-integrity``'s unit level raised ValueError on ``sybil_twin``)."""
    from benchmarks.integrity.adversary import ATTACKS, RUN_ATTACKS, corrupt

    rng = np.random.default_rng(1)
    sent = [np.zeros((2, 2), dtype=np.float32)]
    honest = [np.ones((2, 2), dtype=np.float32)]
    own = ("label_flip", "garbage_data", "stale_replay", "lazy_steps")
    for name in ATTACKS:
        if name not in own:
            assert len(corrupt(name, sent, honest, lambda: honest, rng)) == 1, name
    assert not set(RUN_ATTACKS) & set(ATTACKS)
