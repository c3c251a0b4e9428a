"""Robust SWAN: the distance potential has K* as its only local maximum, so best responses reach K*."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mots.economics import Scenario
from mots.economics.dynamics import run_dynamics
from mots.economics.exhaustive import all_states
from mots.economics.mechanisms.swan import SwanMechanism
from mots.economics.mechanisms.swan_robust import RobustSwanMechanism
from mots.scenario_file import load_scenario
from tests.mots.economics.strategies import scenarios


@pytest.fixture
def stall() -> Scenario:
    return load_scenario("examples/scenarios/stall.yaml")


def test_reaches_optimum_from_every_start_of_the_stall_instance(stall: Scenario) -> None:
    """Every (K, B) of issue 2's instance, including the stall corner (1, 0), ends at K* = (4, 4)."""
    mech = RobustSwanMechanism(stall)
    for k0, k1 in itertools.product(range(5), range(5)):
        for b0, b1 in itertools.product(range(5 - k0), range(5 - k1)):
            result = run_dynamics(stall, mech, [k0, k1], [b0, b1])
            assert result.final_participants.tolist() == [4, 4], (k0, k1, b0, b1)
            assert result.final_buyers.tolist() == [0, 0]
            assert result.welfare == pytest.approx(5.4072, abs=1e-4)


def test_schedule_at_optimum_equals_the_papers(stall: Scenario) -> None:
    """At K* both variants quote p = U(ε*) − W*/N and r_i = C_i − U(ε*) + W*/N."""
    robust, paper = RobustSwanMechanism(stall), SwanMechanism(stall)
    k = np.array([4, 4])
    a, b = robust.quote(k), paper.quote(k)
    assert a.price == pytest.approx(b.price)
    np.testing.assert_allclose(a.rewards, b.rewards)
    assert robust.incentive_cost(k, [0, 0]) == pytest.approx(0.0, abs=1e-12)


def test_optimum_is_the_only_state_without_an_improving_move(stall: Scenario) -> None:
    """Φ(K) = 1 − ‖K − K*‖₁/M: every other state has a neighbour with higher Φ that a client can reach."""
    mech = RobustSwanMechanism(stall)
    for k in all_states(stall.counts)[1:]:
        here = float(mech.potential(k))
        better = []
        for i in range(2):
            e = np.eye(2, dtype=np.int64)[i]
            if k[i] < 4:
                better.append(float(mech.potential(k + e)) > here)
            if k[i] > 0 and k.sum() > 1:
                better.append(float(mech.potential(k - e)) > here)
        assert any(better) == (k.tolist() != [4, 4])


@settings(max_examples=60, deadline=None)
@given(sc=scenarios(max_types=3, max_count=6), data=st.data())
def test_reaches_optimum_from_random_starts(sc: Scenario, data: st.DataObject) -> None:
    """Hypothesis: any market (with or without ε_req), any start: the dynamics end at (K*, N − K*)."""
    if data.draw(st.booleans()):
        from mots.economics.optimum import min_error

        sc = sc.with_eps_req(min_error(sc)[0] * data.draw(st.floats(1.0, 2.0)))
    mech = RobustSwanMechanism(sc)
    k0 = np.array([data.draw(st.integers(0, int(n))) for n in sc.counts])
    b0 = np.array(
        [data.draw(st.integers(0, int(n - k))) for n, k in zip(sc.counts, k0, strict=True)]
    )
    order = data.draw(st.sampled_from(["deterministic", "random"]))
    result = run_dynamics(sc, mech, k0, b0, order=order, seed=data.draw(st.integers(0, 99)))
    k_star = mech.optimum.participants
    assert result.converged
    np.testing.assert_array_equal(result.final_participants, k_star)
    np.testing.assert_array_equal(result.final_buyers, sc.counts - k_star)


def test_moves_are_counted_per_client(stall: Scenario) -> None:
    """From the empty market every client moves once (A→J or A→B); from (K, N − K) only ‖K − K*‖₁ move."""
    mech = RobustSwanMechanism(stall)
    empty = run_dynamics(stall, mech, [0, 0], [0, 0])
    assert empty.moves == 8
    partial = run_dynamics(stall, mech, [1, 3])
    assert partial.moves == 3 + 1
