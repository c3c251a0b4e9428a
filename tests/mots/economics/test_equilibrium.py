"""The unilateral-deviation check (Eq. 6, Pb1client): the dynamics' verdict and a per-client oracle."""

from __future__ import annotations

import time

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mots.economics import ClientType, ErrorModel, PowerUtility, Scenario
from mots.economics.dynamics import REL_TOL, Strategy, run_dynamics
from mots.economics.equilibrium import check_equilibrium
from mots.economics.mechanisms.base import Mechanism
from mots.economics.mechanisms.modified_fl import ModifiedFLMechanism
from mots.economics.mechanisms.registry import MECHANISMS, get_mechanism
from mots.economics.mechanisms.swan_robust import RobustSwanMechanism
from mots.scenario_file import load_scenario
from tests.mots.economics.random_markets import random_market, random_start

IntArray = npt.NDArray[np.int64]


def _client_payoff(mech: Mechanism, k: IntArray, i: int, now: Strategy, then: Strategy) -> float:
    """π of Eq. (6) for one type-i client now playing ``now`` after it alone switches to ``then``."""
    after = k.copy()
    if now == Strategy.J:
        after[i] -= 1
    if then == Strategy.J:
        after[i] += 1
    if now == Strategy.J and then != Strategy.J and int(k.sum()) == 1:
        return -np.inf  # the last participant cannot leave
    if then == Strategy.A:
        return 0.0
    join, buy = mech.payoffs(mech.expected_state(k[None, :], after[None, :]))
    return float(join[0, i]) if then == Strategy.J else float(buy[0])


def per_client_deviations(
    mech: Mechanism, k: IntArray, b: IntArray
) -> set[tuple[int, Strategy, Strategy]]:
    """Every client, one by one, tries every other strategy: the (type, from, to) moves that pay.

    A move pays when its gain exceeds the mechanism's noise floor plus REL_TOL·|payoffs|, the
    dynamics' rule; among moves equally good within that margin B, then J, then A is taken.
    """
    found = set()
    floor = mech.noise_floor()
    for i, n_i in enumerate(mech.scenario.counts):
        strategies = (
            [Strategy.J] * int(k[i])
            + [Strategy.B] * int(b[i])
            + [Strategy.A] * int(n_i - k[i] - b[i])
        )
        for now in strategies:
            here = _client_payoff(mech, k, i, now, now)
            pays = {t: _client_payoff(mech, k, i, now, t) for t in Strategy if t != now}
            top = max(pays.values())
            band = floor + REL_TOL * (abs(top) if np.isfinite(top) else 0.0)
            best = next(
                t
                for t in (Strategy.B, Strategy.J, Strategy.A)
                if t in pays and pays[t] >= top - band
            )
            best_pay = pays[best]
            size = max(
                abs(here) if np.isfinite(here) else 0.0,
                abs(best_pay) if np.isfinite(best_pay) else 0.0,
            )
            with np.errstate(invalid="ignore"):
                gain = best_pay - here
            if gain > floor + REL_TOL * size:
                found.add((i, now, best))
    return found


def _check_all(seed: int) -> tuple[int, int]:
    """One random small market, every registered mechanism, a few states: (equilibria, checks)."""
    rng = np.random.default_rng(seed)
    sc = random_market(rng, max_types=3, max_count=4)
    equilibria = checks = 0
    for name in sorted(MECHANISMS):
        mech = get_mechanism(name, sc)
        starts = [random_start(rng, sc) for _ in range(3)]
        optimum = getattr(mech, "optimum", None)
        if optimum is not None:
            starts.append((optimum.participants, optimum.buyers))
        for k, b in starts:
            check = check_equilibrium(mech, k, b)
            old = run_dynamics(sc, mech, k, b, max_moves=1)
            assert check.equilibrium == (old.converged and old.moves == 0), (name, k, b)
            got = {(d.type_index, d.source, d.target) for d in check.deviations}
            assert got == per_client_deviations(mech, k, b), (name, k, b)
            equilibria += check.equilibrium
            checks += 1
    return equilibria, checks


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_agrees_with_dynamics_and_every_client_for_every_mechanism(seed: int) -> None:
    """For every registered mechanism, the check finds exactly the moves that single clients find
    one at a time, and says "equilibrium" exactly when the old check (one step of the dynamics)
    made no move."""
    _check_all(seed)


def test_seeded_markets_include_equilibria_and_non_equilibria() -> None:
    """The comparison above is not vacuous: over seeded markets both verdicts occur."""
    seen = [_check_all(seed) for seed in range(40)]
    equilibria, checks = sum(e for e, _ in seen), sum(c for _, c in seen)
    assert 0.1 * checks < equilibria < 0.9 * checks


def test_deviation_details_and_last_participant() -> None:
    """A negative reward makes every participant but the last one buy instead; sizes are counted."""
    stall = load_scenario("examples/scenarios/stall.yaml")
    mech = ModifiedFLMechanism(stall, reward=-100.0)
    check = check_equilibrium(mech, [3, 2], [0, 0])
    assert not check.equilibrium
    moves = {(d.type_index, d.source, d.target, d.clients) for d in check.deviations}
    assert (0, Strategy.J, Strategy.B, 3) in moves and (1, Strategy.J, Strategy.B, 2) in moves
    assert all(d.gain > 0 for d in check.deviations)
    assert [d.gain for d in check.deviations] == sorted(
        (d.gain for d in check.deviations), reverse=True
    )
    last = check_equilibrium(mech, [1, 0], [stall.counts[0] - 1, stall.counts[1]])
    assert all(d.source != Strategy.J for d in last.deviations)


@pytest.mark.parametrize(
    ("k", "b", "match"),
    [
        ([1, 2, 3], [0, 0], "participants: need 2 integer counts"),
        ([1, 0], [0.5, 0], "buyers: need 2 integer counts"),
        ([-1, 0], [0, 0], "K_i \\+ B_i ≤ N_i"),
        ([3, 0], [3, 0], "K_i \\+ B_i ≤ N_i"),
    ],
)
def test_bad_states_are_named(k: list[float], b: list[float], match: str) -> None:
    """Malformed or impossible states are refused with the field and the rule."""
    stall = load_scenario("examples/scenarios/stall.yaml")
    with pytest.raises(ValueError, match=match):
        check_equilibrium(RobustSwanMechanism(stall), k, b)


class _Counting(RobustSwanMechanism):
    """Robust SWAN that records how many states each payoff call evaluates."""

    rows: list[int]

    def payoffs(
        self, states: npt.ArrayLike
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        self.rows.append(int(np.atleast_2d(np.asarray(states)).shape[0]))
        return super().payoffs(states)


def test_cost_is_linear_in_types_not_population() -> None:
    """A billion clients in 8 types: one payoff call over 2I + 1 states, in milliseconds."""
    sc = Scenario(
        types=[
            ClientType(
                name=f"t{i}", count=125_000_000, data_size=50.0 * (i + 1), cost=0.5 * (i + 1)
            )
            for i in range(8)
        ],
        error_model=ErrorModel(d_gamma2=2000.0),
        utility=PowerUtility(scale=40.0, exponent=2.0),
    )
    mech = _Counting(sc)
    mech.rows = []
    start = time.process_time()
    check = check_equilibrium(mech, mech.optimum.participants, mech.optimum.buyers)
    assert time.process_time() - start < 0.5
    assert check.equilibrium and mech.rows == [2 * 8 + 1]
