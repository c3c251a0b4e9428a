"""The paper's SWAN (Mechanism 1): λ, L0, τ (Eq. 13), θ-based schedule, and issue 2's stall."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mots.economics import ClientType, ErrorModel, PowerUtility, Scenario
from mots.economics.best_response import buy_payoff, join_payoff
from mots.economics.dynamics import run_dynamics
from mots.economics.error import generalization_error
from mots.economics.lagrangian import vertex_states
from mots.economics.mechanisms.swan import SwanMechanism, swan_summary
from mots.economics.welfare import welfare_all_served
from mots.scenario_file import load_scenario
from tests.mots.economics.strategies import scenarios


@pytest.fixture
def stall() -> Scenario:
    return load_scenario("examples/scenarios/stall.yaml")


def test_stall_instance_summary(stall: Scenario) -> None:
    """K* = (4, 4), W* ≈ 5.41, λ = 0 (no ε_req), τ = (W*/N)/(L(K*) − L0), budget balance at K*."""
    s = swan_summary(stall)
    assert s.regime == "low" and s.high_types.size == 0
    assert s.optimum.participants.tolist() == [4, 4]
    assert s.optimum.welfare == pytest.approx(5.4072, abs=1e-4)
    assert s.lam == 0.0 and s.lambda_supports_optimum and s.constraint_form == "none"
    assert s.L_optimum == pytest.approx(s.optimum.welfare)
    x = vertex_states(stall.counts)
    assert pytest.approx(float(np.min(welfare_all_served(stall, x)))) == s.L0
    assert s.tau == pytest.approx(s.optimum.welfare / 8 / (s.L_optimum - s.L0))
    assert not s.tau_is_limit
    u = float(stall.utility.value(s.optimum.epsilon))
    assert s.price == pytest.approx(u - s.optimum.welfare / 8)
    np.testing.assert_allclose(s.rewards, stall.costs - u + s.optimum.welfare / 8)
    assert s.incentive_cost == pytest.approx(0.0, abs=1e-12)


def test_stall_instance_theta_values(stall: Scenario) -> None:
    """Issue 2's numbers: θ(1,0) ≈ −0.30, θ(2,0) ≈ −0.60, θ(1,1) ≈ −0.32."""
    theta = SwanMechanism(stall).potential(np.array([[1, 0], [2, 0], [1, 1]]))
    np.testing.assert_allclose(theta, [-0.30, -0.60, -0.32], atol=5e-3)


def test_paper_dynamics_stall_at_the_one_participant_corner(stall: Scenario) -> None:
    """From K = (1, 0) both single moves lower θ and the participant may not leave: welfare stays −0.30."""
    mech = SwanMechanism(stall)
    result = run_dynamics(stall, mech, [1, 0])
    assert result.final_participants.tolist() == [1, 0] and result.moves == 0
    assert result.welfare == pytest.approx(-0.30, abs=5e-3)
    reached = run_dynamics(stall, mech, [0, 4])
    assert reached.final_participants.tolist() == [4, 4] and reached.final_buyers.tolist() == [0, 0]


def test_payoffs_are_eq6_and_equal_tau_times_theta_gap(stall: Scenario) -> None:
    """U − C_i + r_i(K') = U − p(K') = τ[θ(K') − L0] at any state K'."""
    mech = SwanMechanism(stall)
    states = np.array([[1, 0], [2, 3], [4, 4], [0, 2]])
    join, buy = mech.payoffs(states)
    u = stall.utility.value(generalization_error(states, stall.sizes, stall.error_model))
    prices, rewards = mech.quote_many(states)
    np.testing.assert_allclose(join, join_payoff(u[:, None], stall.costs, rewards), atol=1e-12)
    np.testing.assert_allclose(buy, buy_payoff(u, prices), atol=1e-12)
    np.testing.assert_allclose(buy, mech.tau * (mech.potential(states) - mech.floor), atol=1e-12)
    assert mech.payoffs(np.array([[0, 0]]))[1][0] == -np.inf


def _binding() -> Scenario:
    """Two types where ε_req excludes the unconstrained optimum (found by a seeded search, rounded)."""
    return Scenario(
        types=[
            ClientType(name="a", count=2, data_size=389.0, cost=2.18),
            ClientType(name="b", count=2, data_size=449.3, cost=3.24),
        ],
        error_model=ErrorModel(d_gamma2=909.0, sigma2=1.73),
        utility=PowerUtility(scale=14.2, exponent=2.78),
        eps_req=1.9423,
    )


def test_binding_requirement_gets_a_positive_supporting_lambda() -> None:
    """ε_req binds: λ > 0 and K* maximises L over X while the unconstrained optimum violates ε_req."""
    sc = _binding()
    free = swan_summary(sc.with_eps_req(None)).optimum
    s = swan_summary(sc)
    assert free.epsilon > sc.eps_req_value and free.welfare > s.optimum.welfare
    assert s.lam > 0 and s.lambda_supports_optimum and s.constraint_form == "shifted"
    mech = SwanMechanism(sc)
    x = vertex_states(sc.counts)
    assert np.all(mech.lagrangian(x) <= s.L_optimum + 1e-12)
    assert s.incentive_cost == pytest.approx(0.0, abs=1e-9)
    for start in x[1:]:
        assert (
            run_dynamics(sc, mech, start).final_participants.tolist()
            == s.optimum.participants.tolist()
        )


def test_nonpositive_welfare_takes_the_tau_limit() -> None:
    """W* ≤ 0: τ → 0+ (tau = 0, flagged); p(K*) = U, r_i = C_i − U, incentive cost −W*."""
    sc = Scenario(
        types=[ClientType(name="a", count=3, data_size=50, cost=5.0)],
        error_model=ErrorModel(d_gamma2=2000.0),
    )
    s = swan_summary(sc)
    assert s.optimum.welfare <= 0 and s.tau_is_limit and s.tau == 0.0
    u = float(sc.utility.value(s.optimum.epsilon))
    assert s.price == pytest.approx(u)
    np.testing.assert_allclose(s.rewards, sc.costs - u)
    assert s.incentive_cost == pytest.approx(-s.optimum.welfare)
    assert not s.lambda_supports_optimum and "no λ supports K*" in s.lambda_reason


def test_high_regime_prices_with_l_over_the_grid() -> None:
    """I_H ≠ ∅: the potential is L itself and L0 is its minimum over every state."""
    sc = Scenario(
        types=[
            ClientType(name="a", count=4, data_size=50, cost=0.1),
            ClientType(name="b", count=4, data_size=300, cost=0.6),
        ],
        error_model=ErrorModel(d_gamma2=2000.0, sigma2=10.0),
    )
    mech = SwanMechanism(sc)
    s = mech.summary
    assert s.regime == "high" and s.high_types.tolist() == [1] and s.domain == "grid"
    grid = np.array([[a, b] for a in range(5) for b in range(5)])
    np.testing.assert_allclose(mech.potential(grid), mech.lagrangian(grid))
    assert pytest.approx(float(np.min(mech.lagrangian(grid)))) == s.L0


def test_high_regime_with_errors_below_the_shift_uses_the_unshifted_term() -> None:
    """ε − ε0 − σ² < 0 is possible in the high regime; the paper's reciprocal is replaced there."""
    sc = Scenario(
        types=[ClientType(name="a", count=3, data_size=1000, cost=0.01)],
        error_model=ErrorModel(d_gamma2=100.0, sigma2=1.0),
        utility=PowerUtility(scale=1.0, exponent=1.0),
        eps_req=1.05,
    )
    s = swan_summary(sc)
    assert s.regime == "high" and s.constraint_form == "unshifted"
    assert s.optimum.epsilon <= 1.05


@settings(max_examples=60, deadline=None)
@given(sc=scenarios(max_types=3, max_count=5), data=st.data())
def test_paper_dynamics_never_lower_the_potential_and_stop_at_a_local_maximum(
    sc: Scenario, data: st.DataObject
) -> None:
    """Ordinal potential game (docs/mechanisms.md §3.1): once someone trains, every move keeps or
    raises θ (L in the high regime), and the end state has no single move that raises it."""
    mech = SwanMechanism(sc)
    k0 = np.array([data.draw(st.integers(0, int(n))) for n in sc.counts])
    if k0.sum() == 0:
        k0[data.draw(st.integers(0, sc.n_types - 1))] = 1
    result = run_dynamics(sc, mech, k0, record=True)
    assert result.converged
    tol = 2e-9 * max(abs(mech.floor), abs(mech.peak), 1e-12)
    assert result.trajectory is not None
    path = [k0] + [s.participants for s in result.trajectory]
    values = mech.potential(np.array(path))
    assert np.all(np.diff(values) >= -tol)
    k = result.final_participants
    here = float(mech.potential(k))
    for i in range(sc.n_types):
        e = np.eye(sc.n_types, dtype=np.int64)[i]
        if k[i] < sc.counts[i]:
            assert float(mech.potential(k + e)) <= here + tol
        if k[i] > 0 and k.sum() > 1:
            assert float(mech.potential(k - e)) <= here + tol


def test_high_regime_too_large_to_enumerate_uses_candidates() -> None:
    """Π(N_i + 1) > 200 000: λ and L0 come from the documented candidate set; K* stays put."""
    sc = Scenario(
        types=[
            ClientType(
                name=f"t{i}", count=200, data_size=50.0 * (i + 1), cost=0.001 * 50.0 * (i + 1)
            )
            for i in range(3)
        ],
        error_model=ErrorModel(d_gamma2=2000.0, sigma2=20.0),
        utility=PowerUtility(scale=40.0, exponent=2.0),
    )
    mech = SwanMechanism(sc)
    s = mech.summary
    assert s.regime == "high" and s.domain == "candidates"
    assert s.L_optimum >= s.L0
    line = np.tile(s.optimum.participants, (201, 1))
    line[:, 2] = np.arange(201)
    assert np.all(mech.lagrangian(line) >= s.L0 - 1e-9)
    assert s.lambda_supports_optimum  # K*'s neighbours are candidates: K* is a local maximum of L
    result = run_dynamics(sc, mech, s.optimum.participants)
    assert result.converged and result.moves == 0
    np.testing.assert_array_equal(result.final_participants, s.optimum.participants)
