"""Sweep axes: the scenario builder, c0, the ε_req axis and the substitution of the paper's fixed values."""

from __future__ import annotations

import math

import pytest
from numpy.testing import assert_allclose

from mots.economics.optimum import solve_mots_optimum
from mots.reproduce.grids import (
    build_scenario,
    cost_axis,
    error_range,
    fixed_requirement,
    requirement_axis,
    zero_welfare_cost,
)
from tests.mots.reproduce.conftest import SIZES, TRUE_MODEL


def test_costs_are_proportional_to_data_size() -> None:
    """C_i = c·D_i with the paper's N = 10/5/5 and U = 40·ε^−16."""
    sc = build_scenario(SIZES, TRUE_MODEL, 0.5, eps_req=0.7)
    assert_allclose(sc.costs, [25.0, 60.0, 150.0])
    assert sc.counts.tolist() == [10, 5, 5]
    assert sc.eps_req == 0.7
    assert float(sc.utility.value(1.0)) == 40.0


def test_negative_cost_is_rejected_naming_the_field() -> None:
    """A per-sample cost below zero is an input error."""
    with pytest.raises(ValueError, match="per_sample_cost"):
        build_scenario(SIZES, TRUE_MODEL, -1.0)


def test_c0_separates_positive_from_negative_optimal_welfare() -> None:
    """Just below c0 the MoTS optimum has W* > 0; just above, W* < 0."""
    c0 = zero_welfare_cost(build_scenario(SIZES, TRUE_MODEL, 0.0))
    below = solve_mots_optimum(build_scenario(SIZES, TRUE_MODEL, 0.99 * c0))
    above = solve_mots_optimum(build_scenario(SIZES, TRUE_MODEL, 1.01 * c0))
    assert below.welfare > 0 > above.welfare


def test_axes_span_the_stated_ranges() -> None:
    """Costs from 0.05·c0 to 1.5·c0; ε_req from ε_min (feasible) to ε_max."""
    costs = cost_axis(100.0, 5)
    assert_allclose([costs[0], costs[-1]], [5.0, 150.0])
    lo, hi = error_range(build_scenario(SIZES, TRUE_MODEL, 0.0))
    reqs = requirement_axis(lo, hi, 6)
    assert reqs[0] >= lo and math.isclose(reqs[0], lo, rel_tol=1e-6)
    assert_allclose(reqs[-1], hi)
    assert reqs == sorted(reqs)
    solve_mots_optimum(build_scenario(SIZES, TRUE_MODEL, 1.0, eps_req=reqs[0]))  # feasible


def test_paper_requirement_is_kept_inside_the_range_and_replaced_outside() -> None:
    """ε_req = 1.35 is kept when the fitted ε range contains it, replaced (with a reason) when not."""
    kept = fixed_requirement("ε_req", 1.35, 1.30, 1.40)
    assert kept.used == 1.35
    replaced = fixed_requirement("ε_req", 1.35, 0.585, 1.284)
    assert_allclose(replaced.used, 0.585 + 0.1 * (1.284 - 0.585))
    assert "never binding" in replaced.reason
    below = fixed_requirement("ε_req", 0.5, 0.585, 1.284)
    assert "below" in below.reason
