"""Tests of the reference solvers by enumeration (the definition of "exact" for the fast solver)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from mots.economics import ClientType, ErrorModel, PowerUtility, Scenario
from mots.economics.error import generalization_error
from mots.economics.exhaustive import (
    MAX_ENUMERATED_STATES,
    all_states,
    exhaustive_min_error,
    exhaustive_optimum,
    state_count,
)
from mots.economics.welfare import welfare_all_served, welfare_fl


def _two_types(eps_req: float | None = None) -> Scenario:
    return Scenario(
        types=[
            ClientType(name="small", count=3, data_size=50.0, cost=0.1),
            ClientType(name="large", count=2, data_size=300.0, cost=0.6),
        ],
        error_model=ErrorModel(d_gamma2=2000.0, sigma2=0.0),
        utility=PowerUtility(scale=40.0, exponent=16.0),
        eps_req=eps_req,
    )


def test_all_states_lists_every_vector_once_empty_first() -> None:
    """all_states enumerates Π(N_i + 1) distinct vectors in range, the empty state first."""
    states = all_states([2, 1, 3])
    assert states.shape == (state_count([2, 1, 3]), 3) == (24, 3)
    assert (states[0] == 0).all()
    expected = set(itertools.product(range(3), range(2), range(4)))
    assert {tuple(int(v) for v in row) for row in states} == expected


def test_all_states_refuses_huge_enumerations() -> None:
    """More states than the guard is a clear error naming counts."""
    with pytest.raises(ValueError, match="counts"):
        all_states([MAX_ENUMERATED_STATES, 1])


def test_exhaustive_optimum_matches_a_direct_loop() -> None:
    """The vectorised enumeration agrees with a plain Python loop over states."""
    sc = _two_types()
    for framework, welfare in (("mots", welfare_all_served), ("fl", welfare_fl)):
        best = max(
            (float(welfare(sc, np.array(k))), k)
            for k in itertools.product(range(4), range(3))
            if sum(k) > 0
        )
        found = exhaustive_optimum(sc, framework)
        assert found is not None
        assert found[1] == pytest.approx(best[0], rel=1e-12)
        assert tuple(found[0]) == best[1]


def test_exhaustive_optimum_respects_eps_req_and_reports_infeasible() -> None:
    """Under ε_req only states with ε ≤ ε_req count; below ε_min there is none."""
    eps_min = exhaustive_min_error(_two_types())[1]
    sc = _two_types(eps_req=eps_min * 1.05)
    k, _, eps = exhaustive_optimum(sc) or (None, 0.0, 0.0)
    assert k is not None
    assert eps <= sc.eps_req_value
    assert float(generalization_error(k, sc.sizes, sc.error_model)) == pytest.approx(eps)
    assert exhaustive_optimum(_two_types(eps_req=eps_min * 0.99)) is None


def test_exhaustive_optimum_rejects_an_unknown_framework() -> None:
    """Only "mots" and "fl" are frameworks."""
    with pytest.raises(ValueError, match="framework"):
        exhaustive_optimum(_two_types(), "other")


def test_exhaustive_min_error_is_the_minimum_over_non_empty_states() -> None:
    """ε_min is the smallest ε of any non-empty state."""
    sc = _two_types()
    state, eps = exhaustive_min_error(sc)
    all_eps = generalization_error(all_states(sc.counts)[1:], sc.sizes, sc.error_model)
    assert eps == pytest.approx(float(all_eps.min()))
    assert state.sum() > 0
