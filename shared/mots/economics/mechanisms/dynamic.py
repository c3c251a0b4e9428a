"""The Dynamic mechanism (benchmark), reconstructed after Hu et al. 2023, "Federated Learning as a Network Effects Game".

That paper's text is not available here; this is a reconstruction (assumptions in docs/mechanisms.md):
- myopic expectations: a client evaluates every strategy at the current state, ignoring the effect
  of its own move (:meth:`expected_state`), and the market starts from the empty network;
- the platform targets the best self-sustaining state K^T: with p = U(ε) (buyers keep nothing), a
  state sustains itself without payments when U(ε(K^T)) ≥ C_i for every participating type and
  ≤ C_j for every other one; such states are "cheapest m types fully in" (K^T meeting ε_req and
  maximising W_MoTS among them); no such state means no target and no payments;
- tipping payments: while a target type is short of N_i participants it gets
  r_i = max(0, C_i − U(ε)) + ξ (ξ a small margin), otherwise r_i = 0; the payments stop once the
  target is reached.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import numpy.typing as npt

from mots.economics.best_response import join_payoff
from mots.economics.error import generalization_error
from mots.economics.mechanisms.base import Mechanism, Quote
from mots.economics.scenario import Scenario
from mots.economics.welfare import welfare_all_served

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

TIPPING_MARGIN = 1e-3
"""ξ relative to the mean participation cost (absolute 1e-6 when costs are 0)."""


def self_sustaining_target(scenario: Scenario) -> IntArray | None:
    """Best state among "the m cheapest types all participate" that needs no payment at p = U(ε), or None."""
    order = np.argsort(scenario.costs, kind="stable")
    best: IntArray | None = None
    best_w = -np.inf
    for m in range(1, scenario.n_types + 1):
        k = np.zeros(scenario.n_types, dtype=np.int64)
        k[order[:m]] = scenario.counts[order[:m]]
        eps = float(generalization_error(k, scenario.sizes, scenario.error_model))
        u = float(scenario.utility.value(eps))
        inside = scenario.costs[order[:m]]
        outside = scenario.costs[order[m:]]
        if eps > scenario.eps_req_value or np.any(inside > u) or np.any(outside < u):
            continue
        w = float(welfare_all_served(scenario, k))
        if w > best_w:
            best, best_w = k, w
    return best


class DynamicMechanism(Mechanism):
    """p = U(ε); tipping rewards toward the best self-sustaining state; myopic clients from the empty network."""

    name: ClassVar[str] = "dynamic"
    description: ClassVar[str] = (
        "Dynamic mechanism (reconstructed after Hu et al. 2023): myopic clients, tipping payments"
    )

    def __init__(self, scenario: Scenario) -> None:
        super().__init__(scenario)
        self.target = self_sustaining_target(scenario)
        mean_cost = float(scenario.costs.mean())
        self.margin = TIPPING_MARGIN * mean_cost if mean_cost > 0 else 1e-6

    def quote(self, participants: npt.ArrayLike) -> Quote:
        sc = self.scenario
        k = np.asarray(participants, dtype=np.int64)
        u = float(sc.utility.value(generalization_error(k, sc.sizes, sc.error_model)))
        rewards = np.zeros(sc.n_types)
        if self.target is not None:
            short = k < self.target
            rewards[short] = np.maximum(0.0, sc.costs[short] - u) + self.margin
        return Quote(u, rewards)

    def payoffs(self, states: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
        """J: U(ε(K')) − C_i + r_i(K'); B: exactly 0 where a model exists (U − U), −∞ where none does."""
        k = np.atleast_2d(np.asarray(states, dtype=np.int64))
        sc = self.scenario
        u = sc.utility.value(generalization_error(k, sc.sizes, sc.error_model))
        rewards = np.zeros(k.shape)
        if self.target is not None:
            short = k < self.target
            need = np.maximum(0.0, sc.costs[None, :] - u[:, None]) + self.margin
            rewards = np.where(short, need, 0.0)
        join = join_payoff(u[:, None], sc.costs, rewards)
        buy = np.where(k.sum(axis=1) > 0, 0.0, -np.inf)
        return np.asarray(join, dtype=np.float64), np.asarray(buy, dtype=np.float64)

    def start_state(self) -> tuple[IntArray, IntArray]:
        """The empty network: nobody trains, nobody buys."""
        z = np.zeros(self.scenario.n_types, dtype=np.int64)
        return z, z.copy()

    def expected_state(self, current: IntArray, after: IntArray) -> IntArray:
        """Myopic expectation: the network as it is now (a client ignores its own effect)."""
        return current
