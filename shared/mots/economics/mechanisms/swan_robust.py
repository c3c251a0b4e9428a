"""Robust SWAN, the platform's default: Mechanism 1's schedule with a distance potential whose only local maximum is K*.

Φ(K) = 1 − ‖K − K*‖₁ / M with M = max_K ‖K − K*‖₁ = Σ_i max(K*_i, N_i − K*_i), Φ0 = 0 and
τ = W*/N (Eq. 13 with Φ(K*) − Φ0 = 1). Every state K ≠ K* has an allowed single-client move one
step closer to K* (also under the last-participant rule, since K* ≠ 0) and it strictly raises Φ, so
best responses reach K* from every start in at most M participation moves (proof in
docs/mechanisms.md). At K* the price and rewards equal the paper's (p = U(ε*) − W*/N), hence budget
balance when W* > 0.
"""

from __future__ import annotations

from functools import cached_property
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from mots.economics.mechanisms.base import PotentialMechanism
from mots.economics.mechanisms.swan import SwanMechanism, SwanSummary, incentive_ratio
from mots.economics.optimum import solve_mots_optimum
from mots.economics.scenario import Scenario

FloatArray = npt.NDArray[np.float64]


class RobustSwanMechanism(PotentialMechanism):
    """p = U(ε) − τ[Φ(K) − Φ0], r_i = C_i − U(ε) + τ[Φ(K) − Φ0] with the L1 potential Φ around K*."""

    name: ClassVar[str] = "swan_robust"
    description: ClassVar[str] = (
        "SWAN with a distance potential around K*: reaches K* from every start, budget-balanced at K*"
    )

    def __init__(self, scenario: Scenario) -> None:
        super().__init__(scenario)
        self.optimum = solve_mots_optimum(scenario)
        self.target = self.optimum.participants
        self.max_distance = int(np.maximum(self.target, scenario.counts - self.target).sum())
        self.floor = 0.0
        self.peak = 1.0
        self.tau, self.tau_is_limit = incentive_ratio(
            self.optimum.welfare, scenario.n_clients, 1.0, self.floor
        )

    @cached_property
    def paper(self) -> SwanSummary:
        """The paper's SWAN quantities for the same market (computed on first use)."""
        return SwanMechanism(self.scenario).summary

    def potential(self, states: npt.ArrayLike) -> FloatArray:
        """Φ(K) = 1 − ‖K − K*‖₁ / M (one state or a batch)."""
        k = np.asarray(states, dtype=np.float64)
        distance = np.abs(k - self.target).sum(axis=-1)
        return np.asarray(1.0 - distance / self.max_distance, dtype=np.float64)

    def noise_floor(self) -> float:
        """Φ takes values on a grid of step 1/M: any real gain is at least τ/M."""
        scale = 1.0 if self.tau_is_limit else self.tau
        return 1e-6 * scale / self.max_distance
