"""The baselines: Modified FL (after Yan & Ligeti), Dynamic (after Hu et al. 2023), and the FL optimum."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mots.economics import ClientType, ErrorModel, Scenario
from mots.economics.dynamics import run_dynamics
from mots.economics.error import generalization_error
from mots.economics.mechanisms.dynamic import DynamicMechanism, self_sustaining_target
from mots.economics.mechanisms.fl_optimum import FLOptimumMechanism
from mots.economics.mechanisms.modified_fl import ModifiedFLMechanism
from mots.economics.optimum import solve_fl_optimum, solve_mots_optimum
from mots.economics.welfare import welfare_fl
from mots.scenario_file import load_scenario


def _cheap(cost: float = 0.001, eps_req: float | None = None) -> Scenario:
    return Scenario(
        types=[
            ClientType(name="a", count=4, data_size=150, cost=cost),
            ClientType(name="b", count=4, data_size=300, cost=2 * cost),
        ],
        error_model=ErrorModel(d_gamma2=2000.0),
        eps_req=eps_req,
    )


def _u(sc: Scenario, k: list[int]) -> float:
    return float(sc.utility.value(generalization_error(k, sc.sizes, sc.error_model)))


def test_modified_fl_prices_at_utility_with_a_fixed_reward() -> None:
    """p(K) = U(ε(K)); r_i = Σ B*_i U(ε*) / Σ K*_i for every type and state by default."""
    sc = load_scenario("examples/scenarios/paper_mnist.yaml")
    mech = ModifiedFLMechanism(sc)
    opt = solve_mots_optimum(sc)
    expected = (
        float(opt.buyers.sum()) * _u(sc, opt.participants.tolist()) / float(opt.participants.sum())
    )
    for k in ([1, 0, 0], [10, 5, 5]):
        q = mech.quote(k)
        assert q.price == pytest.approx(_u(sc, k))
        np.testing.assert_allclose(q.rewards, expected)
    assert ModifiedFLMechanism(sc, reward=0.25).quote([1, 1, 1]).rewards.tolist() == [0.25] * 3
    with pytest.raises(ValueError, match="reward"):
        ModifiedFLMechanism(sc, reward=math.nan)


def test_modified_fl_indifferent_clients_keep_their_strategy() -> None:
    """A buyer gets U − p = 0, the same as abstaining: buyers keep buying, abstainers keep abstaining."""
    sc = _cheap(cost=50.0)  # nobody gains by joining
    mech = ModifiedFLMechanism(sc, reward=0.0)
    join, buy = mech.payoffs(np.array([[1, 1]]))
    assert buy[0] == 0.0 and np.all(join[0] < 0)
    result = run_dynamics(sc, mech, [1, 1], [2, 0])
    # the type-a participant leaves (B pays 0 > U − C; B before A on ties), the last one stays;
    # the abstainers (one of type a, three of type b) never move to B: 0 is not more than 0
    assert result.final_participants.tolist() == [0, 1]
    assert result.final_buyers.tolist() == [3, 0]
    assert result.moves == 1


def test_modified_fl_ignores_network_effects() -> None:
    """The reward does not see network effects: near the empty network U(ε) ≈ 0 and nobody joins,
    near full participation everybody does (U − C + r > 0)."""
    sc = _cheap()
    mech = ModifiedFLMechanism(sc, reward=0.0)
    assert run_dynamics(sc, mech, [1, 0]).final_participants.tolist() == [1, 0]
    assert run_dynamics(sc, mech, [3, 3]).final_participants.tolist() == [4, 4]


def test_dynamic_targets_the_best_self_sustaining_state() -> None:
    """With p = U, K sustains itself iff U(ε(K)) ≥ C_i inside and ≤ C_j outside: the cheapest types."""
    sc = _cheap()
    target = self_sustaining_target(sc)
    assert target is not None and target.tolist() == [4, 4]
    assert self_sustaining_target(_cheap(cost=2.0)) is None  # U(ε) ≤ 1.13 < C everywhere


def test_dynamic_runs_from_the_empty_network_with_myopic_expectations() -> None:
    """Start K = 0, B = 0; clients evaluate at the current state; tipping pays until the target, then nothing."""
    sc = _cheap()
    mech = DynamicMechanism(sc)
    k0, b0 = mech.start_state()
    assert k0.tolist() == [0, 0] and b0.tolist() == [0, 0]
    now, after = np.array([[1, 0]]), np.array([[2, 0]])
    assert mech.expected_state(now, after).tolist() == [[1, 0]]
    q = mech.quote([0, 0])
    assert np.all(q.rewards > sc.costs)  # U = 0 on the empty network: the payment covers the cost
    result = run_dynamics(sc, mech, None)
    assert result.final_participants.tolist() == [4, 4] and result.converged
    assert mech.incentive_cost(result.final_participants, result.final_buyers) == 0.0


def test_dynamic_without_target_does_nothing() -> None:
    """No self-sustaining state (costs above U everywhere): no payments, the market stays empty."""
    sc = _cheap(cost=2.0)
    result = run_dynamics(sc, DynamicMechanism(sc), None)
    assert result.final_participants.tolist() == [0, 0] and result.welfare == 0.0


def test_fl_optimum_starts_and_stays_at_the_fl_optimum() -> None:
    """K = argmax W_FL, B = 0, r_i = max(0, C_i − U); no sales (p = +∞); cost Σ K_i max(0, C_i − U)."""
    sc = load_scenario("examples/scenarios/paper_mnist.yaml")
    mech = FLOptimumMechanism(sc)
    fl = solve_fl_optimum(sc)
    result = run_dynamics(sc, mech, None)
    assert result.moves == 0 and result.final_participants.tolist() == fl.participants.tolist()
    assert result.final_buyers.tolist() == [0, 0, 0]
    assert result.welfare == pytest.approx(float(welfare_fl(sc, fl.participants)))
    u = _u(sc, fl.participants.tolist())
    q = mech.quote(fl.participants)
    assert math.isinf(q.price)
    np.testing.assert_allclose(q.rewards, np.maximum(0.0, sc.costs - u))
    expected = float(np.sum(fl.participants * np.maximum(0.0, sc.costs - u)))
    assert mech.incentive_cost(fl.participants, [0, 0, 0]) == pytest.approx(expected)
    over = fl.participants + np.array([1, 0, 0])
    assert mech.quote(over).rewards[0] == -np.inf
