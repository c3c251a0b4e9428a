"""Percentage improvements of MoTS over FL on tiny hand-computed sweeps."""

from __future__ import annotations

import math

import pytest
from numpy.testing import assert_allclose

from mots.reproduce.improvement import incentive_change, welfare_improvement


def test_welfare_improvement_is_the_mean_of_pointwise_ratios() -> None:
    """(20−10)/10 = 100 %, (5−(−5))/5 = 200 % → mean 150 %; totals (10+10)/(10+5) = 133.3 %."""
    imp = welfare_improvement([20.0, 5.0], [10.0, -5.0])
    assert_allclose(imp.mean_pct, 150.0)
    assert_allclose(imp.totals_pct, 100.0 * 20.0 / 15.0)
    assert_allclose(imp.median_pct, 150.0)
    assert (imp.points_used, imp.points_total) == (2, 2)


def test_median_resists_a_near_zero_denominator() -> None:
    """One point with W_FL = 0.01 makes the mean explode; the median stays at the typical 100 %."""
    imp = welfare_improvement([20.0, 20.0, 10.0], [10.0, 10.0, 0.01])
    assert imp.mean_pct > 30_000
    assert_allclose(imp.median_pct, 100.0)


def test_infeasible_points_and_zero_denominators_are_left_out() -> None:
    """NaN (infeasible) and W_FL = 0 points do not enter the mean; the count says so."""
    imp = welfare_improvement([30.0, math.nan, 7.0], [10.0, 4.0, 0.0])
    assert_allclose(imp.mean_pct, 200.0)
    assert imp.points_used == 1
    assert imp.points_total == 3
    assert_allclose(imp.totals_pct, 100.0 * (20.0 + 7.0) / 10.0)


def test_incentive_change_counts_reduction_as_negative() -> None:
    """IC_FL = 4 → IC_MoTS = 1 is −75 %; MoTS paying nothing is −100 %; IC_FL = 0 points are skipped."""
    imp = incentive_change([1.0, 0.0, 3.0], [4.0, 2.0, 0.0])
    assert_allclose(imp.mean_pct, (-75.0 - 100.0) / 2)
    assert imp.points_used == 2
    assert_allclose(imp.totals_pct, 100.0 * (1.0 + 0.0 + 3.0 - 6.0) / 6.0)


def test_a_surplus_counts_as_zero_cost_not_as_more_than_100_percent() -> None:
    """IC_MoTS = −3 (the platform collects more than it pays) is a −100 % change, Problem 1's [·]^+."""
    imp = incentive_change([-3.0, math.nan], [2.0, 1.0])
    assert_allclose(imp.mean_pct, -100.0)
    assert imp.points_used == 1


def test_no_usable_point_gives_nan_not_a_number() -> None:
    """A sweep where FL never pays has no defined incentive-cost change."""
    imp = incentive_change([0.0, 0.0], [0.0, 0.0])
    assert math.isnan(imp.mean_pct)
    assert math.isnan(imp.totals_pct)
    assert imp.to_dict()["mean_pct"] is None


def test_mismatched_series_are_rejected_with_the_rule() -> None:
    """Both series must have one value per sweep point."""
    with pytest.raises(ValueError, match="equal length"):
        welfare_improvement([1.0, 2.0], [1.0])
