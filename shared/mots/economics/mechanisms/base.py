"""The mechanism interface: a published schedule p(K), r_i(K) that clients best-respond to.

Clients know only the schedule and the current aggregate state (incomplete information, Section 3.C);
their payoffs follow Eq. (6). Hooks let a mechanism bring its own dynamics protocol: a start state
and the state clients expect after a move (exact by default, myopic for the Dynamic baseline).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from mots.economics.best_response import buy_payoff, join_payoff
from mots.economics.error import generalization_error
from mots.economics.scenario import Scenario

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Quote:
    """The schedule evaluated at one social state: model price p and reward r_i per type."""

    price: float
    rewards: FloatArray


class Mechanism(ABC):
    """A pricing-and-reward rule for the MoTS market (Problem 1's decision variables p, r_i)."""

    name: ClassVar[str]
    """Registry name, as `mots mechanisms` lists it."""

    description: ClassVar[str] = ""
    """One line for `mots mechanisms`."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario

    @abstractmethod
    def quote(self, participants: npt.ArrayLike) -> Quote:
        """p(K) and r_i(K) at social state K (participants per type)."""

    def quote_many(self, states: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
        """p and r for a batch of states (shape (M, I)): prices (M,) and rewards (M, I)."""
        k = np.atleast_2d(np.asarray(states, dtype=np.int64))
        quotes = [self.quote(row) for row in k]
        prices = np.array([q.price for q in quotes], dtype=np.float64)
        rewards = np.array([q.rewards for q in quotes], dtype=np.float64).reshape(k.shape)
        return prices, rewards

    def payoffs(self, states: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
        """Eq. (6) at the states a mover expects: J per type (M, I) and B (M,); A pays 0.

        The payoffs are :mod:`mots.economics.best_response`'s (one definition of Eq. 6).

        Values may be scaled by one positive factor shared by every strategy (only their order with
        each other and with 0 matters). Buying where nobody trains (K = 0) is impossible: −∞.
        """
        k = np.atleast_2d(np.asarray(states, dtype=np.int64))
        sc = self.scenario
        u = sc.utility.value(generalization_error(k, sc.sizes, sc.error_model))
        prices, rewards = self.quote_many(k)
        with np.errstate(invalid="ignore"):
            join = join_payoff(u[:, None], sc.costs, rewards)
            buy = np.where(k.sum(axis=1) > 0, buy_payoff(u, prices), -np.inf)
        return join, np.asarray(buy, dtype=np.float64)

    def start_state(self) -> tuple[IntArray, IntArray] | None:
        """The mechanism's own start (K, B), or None to start where the caller says."""
        return None

    def expected_state(self, current: IntArray, after: IntArray) -> IntArray:
        """The state a mover evaluates its payoff at: by default the exact state after its move."""
        return after

    def noise_floor(self) -> float:
        """Payoff gains at or below this are float noise, not incentives (dynamics ignore them)."""
        return 1e-9 * max(float(self.scenario.costs.max()), 1e-12)

    def incentive_cost(self, participants: npt.ArrayLike, buyers: npt.ArrayLike) -> float:
        """Σ_i (K_i r_i − B_i p): what the platform pays on top of buyers' payments (0 = budget balance)."""
        k = np.asarray(participants, dtype=np.int64)
        b = np.asarray(buyers, dtype=np.int64)
        q = self.quote(k)
        paid = float(np.sum(np.where(k > 0, k * q.rewards, 0.0)))
        received = float(b.sum()) * q.price if b.sum() > 0 else 0.0
        return paid - received


class PotentialMechanism(Mechanism):
    """p = U(ε) − τ[Φ(K) − Φ0], r_i = C_i − U(ε) + τ[Φ(K) − Φ0] (Mechanism 1's shape).

    A participant's and a buyer's payoff are then both τ[Φ(K') − Φ0] (Eq. 6), so every strictly
    improving move raises Φ: the market is an ordinal potential game with potential Φ.
    """

    tau: float
    tau_is_limit: bool
    floor: float
    """Φ0, the potential's infimum over its domain."""
    peak: float
    """Φ(K*), the potential's maximum."""

    @abstractmethod
    def potential(self, states: npt.ArrayLike) -> FloatArray:
        """Φ at one state (I,) or a batch (M, I)."""

    def _surplus(self, k: IntArray) -> FloatArray:
        """τ[Φ(K) − Φ0]; 0 in the limit τ → 0+."""
        if self.tau_is_limit:
            return np.zeros(k.shape[0], dtype=np.float64)
        return np.asarray(self.tau * (self.potential(k) - self.floor), dtype=np.float64)

    def quote(self, participants: npt.ArrayLike) -> Quote:
        prices, rewards = self.quote_many(np.asarray(participants, dtype=np.int64)[None, :])
        return Quote(float(prices[0]), rewards[0])

    def quote_many(self, states: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
        k = np.atleast_2d(np.asarray(states, dtype=np.int64))
        sc = self.scenario
        u = sc.utility.value(generalization_error(k, sc.sizes, sc.error_model))
        surplus = self._surplus(k)
        prices = u - surplus
        rewards = sc.costs[None, :] - u[:, None] + surplus[:, None]
        return np.asarray(prices, dtype=np.float64), np.asarray(rewards, dtype=np.float64)

    def noise_floor(self) -> float:
        """1e-9 of τ·max(|Φ0|, |Φ(K*)|): cancellation in Φ − Φ0 is noise at that scale."""
        scale = 1.0 if self.tau_is_limit else self.tau
        return 1e-9 * scale * max(abs(self.floor), abs(self.peak), 1e-12)

    def payoffs(self, states: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
        """Eq. (6) with this schedule substituted: π(J) = U − C_i + r_i = π(B) = U − p = τ[Φ(K') − Φ0].

        Computed in that closed form, not through :func:`~mots.economics.best_response.join_payoff`
        (no U − U cancellation); in units of τ when τ → 0+.
        """
        k = np.atleast_2d(np.asarray(states, dtype=np.int64))
        scale = 1.0 if self.tau_is_limit else self.tau
        value = scale * (self.potential(k) - self.floor)
        join = np.repeat(value[:, None], self.scenario.n_types, axis=1)
        buy = np.where(k.sum(axis=1) > 0, value, -np.inf)
        return np.asarray(join, dtype=np.float64), np.asarray(buy, dtype=np.float64)
