"""The best response of Eq. (6) and its tie rule: always a best response, and the targets are met."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from mots.economics.best_response import (
    TIE_PREFERENCE,
    TIE_TOLERANCE,
    Strategy,
    Targets,
    best_response,
    buy_payoff,
    join_payoff,
    payoffs,
)
from mots.economics.mechanisms.swan_robust import RobustSwanMechanism
from mots.economics.optimum import solve_mots_optimum
from mots.economics.scenario import Scenario
from tests.mots.economics.strategies import scenarios

money = st.floats(-1e3, 1e3, allow_nan=False)
counts = st.integers(0, 30)


def test_payoffs_are_eq_6() -> None:
    """π(A) = 0, π(J) = U − C + r, π(B) = U − p; no J without a published reward."""
    assert payoffs(10.0, 2.5, 0.3, -1.25) == {
        Strategy.ABSTAIN: 0.0,
        Strategy.JOIN: pytest.approx(8.45),
        Strategy.BUY: pytest.approx(7.5),
    }
    assert Strategy.JOIN not in payoffs(10.0, 2.5, 0.3, None)
    np.testing.assert_allclose(
        join_payoff([[1.0], [2.0]], [0.5, 1.0], [[0, 1], [2, 3]]), [[0.5, 1], [3.5, 4]]
    )
    np.testing.assert_allclose(buy_payoff([1.0, 2.0], [0.5, 3.0]), [0.5, -1.0])


def test_places_map_to_the_targets() -> None:
    """Places [0, K*) join, [K*, K*+B*) buy, the rest abstain; a draw lands among K*+B* places."""
    t = Targets(participants=2, buyers=3)
    assert [t.strategy_at(p) for p in (0, 1.99, 2, 4.5, 5, 9)] == [
        Strategy.JOIN,
        Strategy.JOIN,
        Strategy.BUY,
        Strategy.BUY,
        Strategy.ABSTAIN,
        Strategy.ABSTAIN,
    ]
    assert t.place_of_draw(0.5) == 2.5
    with pytest.raises(ValueError, match="draw"):
        t.place_of_draw(1.0)
    with pytest.raises(ValueError, match="participants"):
        Targets(-1, 0)


def test_bad_inputs_name_the_argument() -> None:
    """Empty or NaN payoffs and a negative place are refused by name."""
    with pytest.raises(ValueError, match="payoffs"):
        best_response({}, Targets(1, 1), 0.0)
    with pytest.raises(ValueError, match="payoffs"):
        best_response({Strategy.ABSTAIN: math.nan}, Targets(1, 1), 0.0)
    with pytest.raises(ValueError, match="place"):
        best_response({Strategy.ABSTAIN: 0.0}, Targets(1, 1), -1.0)


def test_ties_outside_the_place_follow_the_preference() -> None:
    """A tie whose place strategy is not tied goes to buy, then join (the dynamics' order)."""
    assert TIE_PREFERENCE == (Strategy.BUY, Strategy.JOIN, Strategy.ABSTAIN)
    tied_ab = {Strategy.ABSTAIN: 0.0, Strategy.BUY: 0.0, Strategy.JOIN: -1.0}
    assert best_response(tied_ab, Targets(2, 2), 0.0).strategy is Strategy.BUY  # a J place
    assert best_response(tied_ab, Targets(0, 0), 0.0).strategy is Strategy.ABSTAIN  # an A place
    tied_jb = {Strategy.ABSTAIN: 0.0, Strategy.BUY: 1.0, Strategy.JOIN: 1.0}
    assert best_response(tied_jb, Targets(0, 0), 0.0).strategy is Strategy.BUY  # an A place
    only_buy_left = {Strategy.ABSTAIN: 0.0, Strategy.BUY: -math.inf, Strategy.JOIN: -math.inf}
    assert best_response(only_buy_left, Targets(1, 0), 0.0).strategy is Strategy.ABSTAIN


@settings(max_examples=300, deadline=None)
@given(
    utility=money,
    price=money,
    cost=st.floats(0, 1e3),
    reward=st.none() | money,
    k=counts,
    b=counts,
    place=st.floats(0, 100),
)
def test_the_choice_is_always_a_best_response(
    utility: float,
    price: float,
    cost: float,
    reward: float | None,
    k: int,
    b: int,
    place: float,
) -> None:
    """Whatever the numbers, the chosen strategy is available and pays within the tolerance of
    the best; a strict maximum is chosen wherever the client stands."""
    pay = payoffs(utility, price, cost, reward)
    choice = best_response(pay, Targets(k, b), place)
    assert choice.strategy in pay
    best = max(pay.values())
    assert pay[choice.strategy] >= best - TIE_TOLERANCE
    runner_up = sorted(pay.values())[-2]
    if best - runner_up > TIE_TOLERANCE:
        assert pay[choice.strategy] == best
    assert best_response(pay, Targets(k, b), place) == choice  # pure


@settings(max_examples=200, deadline=None)
@given(k=counts, b=counts, extra=counts, value=st.floats(0, 1e3), all_zero=st.booleans())
def test_ranked_clients_meet_the_targets_exactly(
    k: int, b: int, extra: int, value: float, all_zero: bool
) -> None:
    """SWAN's tie (π(J) = π(B) ≥ 0) among n clients ranked 0…n−1: exactly K* join and B* buy.

    With π(J) = π(B) = π(A) = 0 (τ → 0+) the clients beyond K* + B* abstain; with π > 0 every
    client acquires the model (n = K* + B* then, as at any equilibrium announcing these targets).
    """
    v = 0.0 if all_zero else value
    assume(all_zero or v > TIE_TOLERANCE)
    n = k + b + (extra if all_zero else 0)
    pay = {Strategy.ABSTAIN: 0.0, Strategy.JOIN: v, Strategy.BUY: v}
    picks = [best_response(pay, Targets(k, b), float(r)).strategy for r in range(n)]
    assert picks.count(Strategy.JOIN) == k
    assert picks.count(Strategy.BUY) == b
    assert picks.count(Strategy.ABSTAIN) == n - k - b


@settings(max_examples=100, deadline=None)
@given(k=counts, b=counts)
def test_drawn_places_join_with_the_targets_share(k: int, b: int) -> None:
    """Over evenly spread draws, the share joining a J/B tie is K*/(K*+B*) (up to one grid step)."""
    assume(k + b > 0)
    pay = {Strategy.ABSTAIN: 0.0, Strategy.JOIN: 1.0, Strategy.BUY: 1.0}
    t = Targets(k, b)
    grid = 1000
    joins = sum(
        best_response(pay, t, t.place_of_draw(i / grid)).strategy is Strategy.JOIN
        for i in range(grid)
    )
    assert abs(joins / grid - k / (k + b)) <= 1 / grid + 1e-12


@settings(max_examples=25, deadline=None)
@given(sc=scenarios(max_types=3, max_count=6))
def test_swan_quote_at_k_star_is_met_by_ranked_best_responses(sc: Scenario) -> None:
    """At robust SWAN's announced K* (W* > 0), clients ranked within each type best-respond
    into exactly (K*, B* = N − K*): J and B tie there, and both beat abstaining."""
    opt = solve_mots_optimum(sc)
    assume(opt.welfare > 0)
    mech = RobustSwanMechanism(sc)
    q = mech.quote(opt.participants)
    u = float(sc.utility.value(opt.epsilon))
    tolerance = 1e-9 * max(1.0, abs(u))  # U − C + r and U − p cancel U: float noise of its size
    for i in range(sc.n_types):
        pay = payoffs(u, q.price, float(sc.costs[i]), float(q.rewards[i]))
        assert pay[Strategy.JOIN] == pytest.approx(pay[Strategy.BUY], abs=tolerance)
        t = Targets(int(opt.participants[i]), int(opt.buyers[i]))
        picks = [
            best_response(pay, t, float(r), tolerance).strategy for r in range(int(sc.counts[i]))
        ]
        assert picks.count(Strategy.JOIN) == opt.participants[i]
        assert picks.count(Strategy.BUY) == opt.buyers[i]
