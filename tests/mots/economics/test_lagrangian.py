"""Proposition 1's split, the Lagrangian (Eq. 12), its supporting λ, and θ (Eq. 11)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mots.economics import ClientType, ErrorModel, Scenario
from mots.economics.error import generalization_error
from mots.economics.lagrangian import (
    MAX_THETA_TYPES,
    Lagrangian,
    Theta,
    choose_constraint_form,
    constraint_term,
    grid_or_candidates,
    regime_split,
    supporting_multiplier,
    vertex_aggregates,
    vertex_index,
    vertex_states,
)
from mots.economics.welfare import welfare_all_served
from tests.mots.economics.strategies import scenarios


def _market(sigma2: float = 0.0, eps0: float = 0.0, eps_req: float | None = None) -> Scenario:
    return Scenario(
        types=[
            ClientType(name="a", count=10, data_size=50, cost=0.5),
            ClientType(name="b", count=5, data_size=120, cost=1.2),
            ClientType(name="c", count=5, data_size=300, cost=3.0),
        ],
        error_model=ErrorModel(d_gamma2=2000.0, sigma2=sigma2, eps0=eps0),
        eps_req=eps_req,
    )


def test_regime_split_follows_proposition_1() -> None:
    """I_H = {i : D_i > dγ²/σ²}: with dγ²/σ² = 200 only D = 300 is high; σ² = 0 makes all low."""
    low, high = regime_split(_market(sigma2=10.0))
    assert low.tolist() == [0, 1] and high.tolist() == [2]
    low, high = regime_split(_market())
    assert low.tolist() == [0, 1, 2] and high.tolist() == []


def test_constraint_term_uses_the_eq3_part_against_eps_req_minus_eps0() -> None:
    """Shifted g = (ε − ε0 − σ²)^−1 − (ε_req − ε0 − σ²)^−1, ≥ 0 exactly when ε ≤ ε_req."""
    sc = _market(sigma2=1.0, eps0=0.5, eps_req=3.0)
    eps = np.array([2.0, 3.0, 4.0])
    g = constraint_term(sc, eps, "shifted")
    np.testing.assert_allclose(g, 1 / (eps - 1.5) - 1 / 1.5)
    assert g[0] > 0 and g[1] == pytest.approx(0.0) and g[2] < 0
    np.testing.assert_allclose(constraint_term(sc, eps, "unshifted"), 1 / eps - 1 / 3.0)
    np.testing.assert_array_equal(constraint_term(sc, eps, "none"), 0.0)
    assert constraint_term(sc, np.array([np.inf]), "shifted")[0] == pytest.approx(-1 / 1.5)


def test_constraint_form_falls_back_where_the_reciprocal_jumps() -> None:
    """No ε_req → none; all ε above ε0 + σ² → the paper's shifted form; otherwise unshifted."""
    assert choose_constraint_form(_market(), 1.0) == "none"
    sc = _market(sigma2=1.0, eps0=0.5, eps_req=3.0)
    assert choose_constraint_form(sc, 1.6) == "shifted"
    assert choose_constraint_form(sc, 1.5) == "unshifted"
    assert choose_constraint_form(sc.with_eps_req(1.4), 1.6) == "unshifted"


def test_vertex_aggregates_match_the_vertex_states() -> None:
    """Doubling gives ΣK_i, ΣK_i/D_i, ΣK_i C_i of every vertex in the tensor's C order."""
    sc = _market()
    tot, inv, cost = vertex_aggregates(sc)
    x = vertex_states(sc.counts)
    np.testing.assert_array_equal(tot, x.sum(axis=1))
    np.testing.assert_allclose(inv, x @ (1 / sc.sizes))
    np.testing.assert_allclose(cost, x @ sc.costs)
    assert x[5].tolist() == [10, 0, 5]
    assert vertex_index([10, 0, 5], sc.counts) == 5
    assert vertex_index([3, 0, 5], sc.counts) is None


def _theta_by_eq11(lagr: Lagrangian, counts: np.ndarray, k: np.ndarray) -> float:
    """θ(K) = Σ_x L(x) Π_i [(2K_i − N_i)x_i + (N_i − K_i)N_i]/N_i², term by term."""
    total = 0.0
    for x in vertex_states(counts):
        weight = np.prod(((2 * k - counts) * x + (counts - k) * counts) / counts**2)
        total += float(lagr(x)) * weight
    return total


@settings(max_examples=60, deadline=None)
@given(sc=scenarios(max_types=4), data=st.data())
def test_theta_contraction_equals_eq11(sc: Scenario, data: st.DataObject) -> None:
    """The tensor contraction reproduces Eq. (11) literally, at vertices equals L, and is linear per axis."""
    lagr = Lagrangian(sc, 0.0, "none")
    values = lagr.from_totals(*vertex_aggregates(sc))
    theta = Theta(values, sc.counts)
    k = np.array([data.draw(st.integers(0, int(n))) for n in sc.counts])
    size = 1e-9 * max(
        1.0, float(np.max(np.abs(values)))
    )  # sums of terms this large carry that much noise
    assert float(theta(k)) == pytest.approx(_theta_by_eq11(lagr, sc.counts, k), abs=size)
    x = vertex_states(sc.counts)
    np.testing.assert_allclose(theta(x), lagr(x), rtol=1e-12, atol=1e-3 * size)
    i = data.draw(st.integers(0, sc.n_types - 1))
    line = np.tile(k, (int(sc.counts[i]) + 1, 1))
    line[:, i] = np.arange(sc.counts[i] + 1)
    along = theta(line)
    np.testing.assert_allclose(np.diff(along), theta.slopes(k)[i], rtol=1e-7, atol=size)


def test_theta_refuses_too_many_types() -> None:
    """2^I vertices: more than MAX_THETA_TYPES types is a clear error naming the field."""
    sc = Scenario(
        types=[
            ClientType(name=f"t{i}", count=1, data_size=10.0 + i, cost=0.0)
            for i in range(MAX_THETA_TYPES + 1)
        ],
        error_model=ErrorModel(d_gamma2=100.0),
    )
    with pytest.raises(ValueError, match="types: θ interpolates"):
        vertex_aggregates(sc)


def test_lagrangian_is_welfare_plus_lambda_times_the_constraint() -> None:
    """L(K) = Σ[N_i U − K_i C_i] + λ g(ε(K)) (Eq. 12)."""
    sc = _market(eps_req=1.3)
    lagr = Lagrangian(sc, 2.5, "shifted")
    k = np.array([[10, 5, 5], [0, 5, 5], [1, 0, 0]])
    eps = generalization_error(k, sc.sizes, sc.error_model)
    expected = welfare_all_served(sc, k) + 2.5 * (1 / eps - 1 / 1.3)
    np.testing.assert_allclose(lagr(k), expected)


def test_multiplier_between_bounds() -> None:
    """A violator needs λ ≥ 2, a better-error state allows λ ≤ 4: λ = 3 supports K*."""
    choice = supporting_multiplier(np.array([5.0, 7.0, 3.0]), np.array([0.0, -1.0, 0.5]), 0, True)
    assert choice.supports and choice.lam == pytest.approx(3.0)
    assert (choice.lower, choice.upper) == pytest.approx((2.0, 4.0))


def test_multiplier_with_no_upper_bound_is_strictly_inside() -> None:
    """Only violators: λ = 2·lower so that K* is the strict maximum."""
    choice = supporting_multiplier(np.array([5.0, 7.0]), np.array([0.0, -1.0]), 0, True)
    assert choice.supports and choice.lam == pytest.approx(4.0) and math.isinf(choice.upper)


def test_multiplier_duality_gap_is_reported() -> None:
    """λ ≥ 2 and λ ≤ 1 cannot both hold: flagged, λ = lower bound used."""
    choice = supporting_multiplier(np.array([5.0, 7.0, 3.0]), np.array([0.0, -1.0, 2.0]), 0, True)
    assert not choice.supports and choice.lam == pytest.approx(2.0)
    assert "no λ supports K*" in choice.reason


def test_multiplier_without_requirement() -> None:
    """No ε_req: λ = 0, supported iff K* has the highest welfare on the domain."""
    ok = supporting_multiplier(np.array([5.0, 4.0]), np.zeros(2), 0, False)
    assert ok.supports and ok.lam == 0.0
    bad = supporting_multiplier(np.array([-1.0, 0.0]), np.zeros(2), 0, False)
    assert not bad.supports and bad.lam == 0.0 and "empty state" in bad.reason


def test_high_regime_domain_is_the_grid_or_candidates() -> None:
    """Small markets enumerate every state; large ones use K*'s axis lines, its neighbours and 0."""
    sc = _market(sigma2=10.0)
    states, kind = grid_or_candidates(sc, np.array([0, 0, 5]))
    assert kind == "grid" and len(states) == 11 * 6 * 6
    big = Scenario(
        types=[
            ClientType(name=f"t{i}", count=100, data_size=100.0 * (i + 1), cost=1.0)
            for i in range(4)
        ],
        error_model=ErrorModel(d_gamma2=2000.0, sigma2=10.0),
    )
    opt = np.array([0, 0, 7, 100])
    states, kind = grid_or_candidates(big, opt)
    assert kind == "candidates"
    rows = {tuple(s) for s in states.tolist()}
    assert (
        (0, 0, 0, 0) in rows
        and tuple(opt) in rows
        and (0, 0, 8, 99) in rows
        and (0, 0, 50, 100) in rows
    )
    assert np.all((states >= 0) & (states <= big.counts))
