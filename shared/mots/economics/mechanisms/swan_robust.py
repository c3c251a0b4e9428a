"""Robust SWAN, the platform's default: Mechanism 1's schedule with a distance potential that has K* as its only local maximum.

Φ(K) = L(K*) − κ‖K − K*‖₁ with κ = (L(K*) − L0)/max_K ‖K − K*‖₁, so Φ spans [L0, L(K*)] like θ and
τ is Eq. (13)'s. Every state K ≠ K* has a single-client move one step closer to K* that is allowed
(also under the last-participant rule, since K* ≠ 0), and it strictly raises Φ, so best responses
reach K* from every start in at most Σ_i max(K*_i, N_i − K*_i) participation moves (proof in
docs/mechanisms.md). At K* the price and rewards equal the paper's: budget balance when W* > 0.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import numpy.typing as npt

from mots.economics.mechanisms.base import PotentialMechanism
from mots.economics.mechanisms.swan import SwanMechanism, SwanSummary, incentive_ratio
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
        paper = SwanMechanism(scenario)
        self.paper: SwanSummary = paper.summary
        self.optimum = paper.optimum
        target = self.optimum.participants
        self.target = target
        self.max_distance = int(np.maximum(target, scenario.counts - target).sum())
        peak, floor = paper.L_optimum, paper.floor
        if not peak > floor:
            peak, floor = 0.0, -1.0
        self.peak = peak
        self.floor = floor
        self.kappa = (peak - floor) / self.max_distance
        self.tau, self.tau_is_limit = incentive_ratio(
            self.optimum.welfare, scenario.n_clients, peak, floor
        )

    def potential(self, states: npt.ArrayLike) -> FloatArray:
        """Φ(K) = L(K*) − κ‖K − K*‖₁ (one state or a batch)."""
        k = np.asarray(states, dtype=np.float64)
        distance = np.abs(k - self.target).sum(axis=-1)
        return np.asarray(self.peak - self.kappa * distance, dtype=np.float64)
