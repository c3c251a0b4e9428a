"""Sweeps of Figs. 6-9 on a known error model: Proposition 3, infeasible points, the mechanisms' runs."""

from __future__ import annotations

import math

import numpy as np

from mots.reproduce.grids import build_scenario, error_range, zero_welfare_cost
from mots.reproduce.sweeps import default_starts, framework_sweep, mechanism_sweep
from tests.mots.reproduce.conftest import SIZES, TRUE_MODEL


def test_framework_sweep_mots_never_below_fl_and_nan_where_infeasible() -> None:
    """W_MoTS* ≥ W_FL* (Proposition 3) at each feasible ε_req; ε_req < ε_min gives NaN, not a number."""
    lo, hi = error_range(build_scenario(SIZES, TRUE_MODEL, 0.0))
    c0 = zero_welfare_cost(build_scenario(SIZES, TRUE_MODEL, 0.0))
    sw = framework_sweep(SIZES, TRUE_MODEL, "eps_req", [0.9 * lo, lo * 1.001, hi], 0.5 * c0)
    assert math.isnan(sw.w_mots[0]) and sw.k_mots[0] is None
    for wm, wf in zip(sw.w_mots[1:], sw.w_fl[1:], strict=True):
        assert wm >= wf
    assert sw.to_dict()["w_mots"][0] is None


def test_framework_sweep_at_negligible_cost() -> None:
    """Near-zero cost, no ε_req: MoTS trains the ε-minimising coalition and everyone gets the model
    (W* = N·U(ε_min)); FL trains everyone (more model holders beat a better model); nobody is paid."""
    sc = build_scenario(SIZES, TRUE_MODEL, 0.0)
    lo, _ = error_range(sc)
    sw = framework_sweep(SIZES, TRUE_MODEL, "cost", [1e-9], math.inf)
    assert sw.k_mots[0] == [0, 5, 5]
    np.testing.assert_allclose(sw.eps_mots[0], lo)
    np.testing.assert_allclose(sw.w_mots[0], 20 * float(sc.utility.value(lo)), rtol=1e-9)
    assert sw.k_fl[0] == [10, 5, 5]
    assert sw.ic_fl[0] == 0.0
    assert abs(sw.ic_mots[0]) <= 1e-9 * sw.w_mots[0]


def test_default_starts_are_valid_and_seeded() -> None:
    """Three fixed starts plus distinct random non-empty ones within the counts, the same for one seed."""
    a = default_starts([10, 5, 5], 4, seed=3)
    assert a == default_starts([10, 5, 5], 4, seed=3)
    assert a[:3] == [[1, 0, 0], [10, 0, 0], [10, 5, 5]]
    assert len({tuple(s) for s in a}) == 7
    assert all(
        sum(s) > 0 and all(0 <= k <= n for k, n in zip(s, [10, 5, 5], strict=True)) for s in a
    )


def test_mechanism_sweep_robust_swan_reaches_the_optimum() -> None:
    """The platform's SWAN settles at K* from every start; welfare there equals W*; moves are counted."""
    c0 = zero_welfare_cost(build_scenario(SIZES, TRUE_MODEL, 0.0))
    starts = default_starts([10, 5, 5], 1, seed=0)
    sw = mechanism_sweep(
        SIZES,
        TRUE_MODEL,
        "cost",
        [0.2 * c0, 0.6 * c0],
        math.inf,
        starts,
        ("swan_robust", "dynamic"),
    )
    robust = sw.series["swan_robust"]
    assert robust.reached_optimum == [1.0, 1.0]
    np.testing.assert_allclose(robust.welfare, sw.optimum)
    assert all(m > 0 for m in robust.moves)
    assert len(sw.series["dynamic"].welfare) == 2
