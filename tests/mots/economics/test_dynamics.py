"""Asynchronous best-response dynamics (Eq. 6): validation, the last-participant rule, cycles, limits, scale."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import numpy.typing as npt
import pytest

from mots.economics import ClientType, ErrorModel, PowerUtility, Scenario
from mots.economics.dynamics import Strategy, run_dynamics
from mots.economics.mechanisms.base import Mechanism, Quote
from mots.economics.mechanisms.modified_fl import ModifiedFLMechanism
from mots.economics.mechanisms.swan import SwanMechanism
from mots.economics.mechanisms.swan_robust import RobustSwanMechanism
from mots.scenario_file import load_scenario


@pytest.fixture
def stall() -> Scenario:
    return load_scenario("examples/scenarios/stall.yaml")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"start_participants": [1, 2, 3]}, "start_participants: need 2 integer counts"),
        ({"start_participants": [5, 0]}, "start_participants: need 0 ≤ K_i ≤ N_i"),
        ({"start_participants": [-1, 0]}, "start_participants: need 0 ≤ K_i ≤ N_i"),
        ({"start_participants": [1.5, 0]}, "start_participants: need 2 integer counts"),
        (
            {"start_participants": [1, 0], "start_buyers": [4, 0]},
            "start_buyers: need 0 ≤ B_i ≤ N_i − K_i",
        ),
        ({"start_participants": [1, 0], "max_moves": -1}, "max_moves: must be ≥ 0"),
        ({"start_participants": [1, 0], "order": "sideways"}, "order: must be"),
    ],
)
def test_bad_input_is_named(stall: Scenario, kwargs: dict[str, object], match: str) -> None:
    """Each bad argument is rejected with its name and the rule."""
    with pytest.raises(ValueError, match=match):
        run_dynamics(stall, RobustSwanMechanism(stall), **kwargs)  # type: ignore[arg-type]


def test_mechanism_for_another_scenario_is_refused(stall: Scenario) -> None:
    """The schedule must be the one published for this market."""
    other = load_scenario("examples/scenarios/paper_mnist.yaml")
    with pytest.raises(ValueError, match="mechanism: was built for another scenario"):
        run_dynamics(stall, RobustSwanMechanism(other), [1, 0])


def test_last_participant_cannot_leave(stall: Scenario) -> None:
    """Everyone prefers buying to training (negative reward), yet one participant always remains."""
    mech = ModifiedFLMechanism(stall, reward=-100.0)
    result = run_dynamics(stall, mech, [3, 2])
    assert result.final_participants.sum() == 1 and result.reason == "equilibrium"
    assert result.moves == 4


def test_nobody_can_buy_when_nobody_trains(stall: Scenario) -> None:
    """At K = 0 a 'buyer' holds nothing: buying is unavailable and such clients move."""
    mech = RobustSwanMechanism(stall)
    _, buy = mech.payoffs(np.array([[0, 0]]))
    assert buy[0] == -np.inf
    result = run_dynamics(stall, mech, [0, 0], [4, 4])
    assert result.final_participants.tolist() == [4, 4]


class _MatchingPennies(Mechanism):
    """Type 0 wants to match type 1's participation, type 1 to mismatch it; type 2 always trains."""

    name: ClassVar[str] = "pennies"

    def quote(self, participants: npt.ArrayLike) -> Quote:
        return Quote(0.0, np.zeros(3))

    def payoffs(self, states: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        k = np.atleast_2d(np.asarray(states))
        join = np.zeros((k.shape[0], 3))
        join[:, 0] = np.where(k[:, 1] == 1, 1.0, -1.0)  # type 0 trains iff type 1 does
        join[:, 1] = np.where(k[:, 0] == 0, 1.0, -1.0)  # type 1 trains iff type 0 does not
        join[:, 2] = 5.0
        return join, np.zeros(k.shape[0])


def test_best_response_cycle_is_detected() -> None:
    """Matching pennies has no pure equilibrium: the dynamics revisit a state and say so."""
    sc = Scenario(
        types=[
            ClientType(name=f"t{i}", count=1, data_size=100.0 * (i + 1), cost=0.0) for i in range(3)
        ],
        error_model=ErrorModel(d_gamma2=1000.0),
    )
    mech = _MatchingPennies(sc)
    result = run_dynamics(sc, mech, [1, 1, 1], [0, 0, 0], record=True)
    assert result.reason == "cycle" and not result.converged
    assert result.trajectory is not None and sum(s.count for s in result.trajectory) == result.moves
    random = run_dynamics(sc, mech, [1, 1, 1], [0, 0, 0], order="random", seed=1)
    assert random.reason == "cycle"


def test_move_limit(stall: Scenario) -> None:
    """max_moves stops the dynamics exactly there, flagged as not converged."""
    result = run_dynamics(stall, RobustSwanMechanism(stall), [0, 0], [0, 0], max_moves=3)
    assert result.moves == 3 and result.reason == "move limit" and not result.converged


def test_random_order_is_reproducible_by_seed(stall: Scenario) -> None:
    """The same seed gives the same trajectory; both orders end at K* under robust SWAN."""
    mech = RobustSwanMechanism(stall)
    a = run_dynamics(stall, mech, [1, 0], order="random", seed=7, record=True)
    b = run_dynamics(stall, mech, [1, 0], order="random", seed=7, record=True)
    assert a.trajectory is not None and b.trajectory is not None
    assert [s.participants.tolist() for s in a.trajectory] == [
        s.participants.tolist() for s in b.trajectory
    ]
    assert a.final_participants.tolist() == [4, 4]
    assert all(s.count == 1 for s in a.trajectory)


def test_block_moves_match_single_client_moves(stall: Scenario) -> None:
    """A block is the same class's clients moving one after another: the random single-client order
    and the block order both end at a 1-move local maximum of θ under the paper's SWAN."""
    mech = SwanMechanism(stall)
    block = run_dynamics(stall, mech, [0, 2], record=True)
    assert block.trajectory is not None
    assert [(s.type_index, s.source, s.target, s.count) for s in block.trajectory] == [
        (0, Strategy.B, Strategy.J, 4),
        (1, Strategy.B, Strategy.J, 2),
    ]
    single = run_dynamics(stall, mech, [0, 2], order="random", seed=3)
    assert single.final_participants.tolist() == block.final_participants.tolist() == [4, 4]
    assert single.moves == block.moves == 6


def test_large_population_in_whole_type_blocks() -> None:
    """3 × 10^5 clients in 5 types: robust SWAN reaches K* from the empty market (moved in whole-type
    blocks; its speed is measured by the benchmarks, not here)."""
    sc = Scenario(
        types=[
            ClientType(
                name=f"t{i}", count=20_000 * (i + 1), data_size=50.0 * (i + 1), cost=0.5 * (i + 1)
            )
            for i in range(5)
        ],
        error_model=ErrorModel(d_gamma2=2000.0),
        utility=PowerUtility(scale=40.0, exponent=2.0),
    )
    mech = RobustSwanMechanism(sc)
    result = run_dynamics(sc, mech, np.zeros(5, dtype=np.int64), np.zeros(5, dtype=np.int64))
    np.testing.assert_array_equal(result.final_participants, mech.optimum.participants)
    # every abstainer moves once (to J or B); one type-0 client must first train alone, then leaves
    assert result.moves == sc.n_clients + 1
