"""SWAN against the baselines side by side: where each mechanism's best-response dynamics settle (`mots compare`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from mots.economics.dynamics import DEFAULT_MAX_MOVES, run_dynamics
from mots.economics.mechanisms.registry import MECHANISMS
from mots.economics.scenario import Scenario

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class ComparisonRow:
    """Where one mechanism's dynamics end, and what that state is worth."""

    mechanism: str
    final_participants: IntArray
    final_buyers: IntArray
    welfare: float
    epsilon: float
    meets_requirement: bool
    """A model exists (K ≠ 0) and ε ≤ ε_req."""
    incentive_cost: float
    """Σ_i (K_i r_i − B_i p) at the final state (0 = budget balance)."""
    moves: int
    converged: bool
    reason: str

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-ready values (ε of the empty market, +∞, becomes None)."""
        return {
            "mechanism": self.mechanism,
            "final": self.final_participants.tolist(),
            "buyers": self.final_buyers.tolist(),
            "welfare": self.welfare,
            "epsilon": self.epsilon if math.isfinite(self.epsilon) else None,
            "meets_requirement": self.meets_requirement,
            "incentive_cost": self.incentive_cost,
            "moves": self.moves,
            "converged": self.converged,
            "reason": self.reason,
        }


def compare_mechanisms(
    scenario: Scenario, start: npt.ArrayLike | None = None, max_moves: int | None = None
) -> list[ComparisonRow]:
    """Run every registered mechanism's dynamics and report its final state.

    Mechanisms with their own protocol (Dynamic: the empty network; FL optimum: its own state) start
    there; the others start from ``start`` (participants per type, those not training buying), by
    default the empty network with nobody buying. ``max_moves`` defaults to the dynamics' limit.
    """

    if max_moves is None:
        max_moves = DEFAULT_MAX_MOVES
    rows: list[ComparisonRow] = []
    for name, cls in MECHANISMS.items():
        mech = cls(scenario)
        if mech.start_state() is not None:
            result = run_dynamics(scenario, mech, None, None, max_moves=max_moves)
        elif start is None:
            zero = np.zeros(scenario.n_types, dtype=np.int64)
            result = run_dynamics(scenario, mech, zero, zero, max_moves=max_moves)
        else:
            result = run_dynamics(scenario, mech, start, None, max_moves=max_moves)
        rows.append(
            ComparisonRow(
                mechanism=name,
                final_participants=result.final_participants,
                final_buyers=result.final_buyers,
                welfare=result.welfare,
                epsilon=result.epsilon,
                meets_requirement=bool(result.final_participants.sum() > 0)
                and result.epsilon <= scenario.eps_req_value,
                incentive_cost=mech.incentive_cost(result.final_participants, result.final_buyers),
                moves=result.moves,
                converged=result.converged,
                reason=result.reason,
            )
        )
    return rows
