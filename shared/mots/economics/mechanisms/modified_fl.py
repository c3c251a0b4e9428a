"""The Modified FL mechanism (benchmark after Yan and Ligeti, 2022, adapted to MoTS): p = U(ε), a fixed reward.

The price takes a buyer's whole model utility, so a buyer's payoff is U − p = 0, the same as
abstaining. Tie-break: an indifferent client keeps its strategy (only strict gains move anyone), so
a client that starts buying keeps buying and one that abstains keeps abstaining. The reward is one
number for every participant, fixed in advance and blind to network effects: by default the buyers'
payments at the social optimum shared equally among its participants, Σ B*_i U(ε*) / Σ K*_i.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import numpy.typing as npt

from mots.economics.best_response import join_payoff
from mots.economics.error import generalization_error
from mots.economics.mechanisms.base import Mechanism, Quote
from mots.economics.optimum import solve_mots_optimum
from mots.economics.scenario import Scenario

FloatArray = npt.NDArray[np.float64]


class ModifiedFLMechanism(Mechanism):
    """p(K) = U(ε(K)) and r_i(K) = r for every type and state."""

    name: ClassVar[str] = "modified_fl"
    description: ClassVar[str] = (
        "Modified FL (after Yan & Ligeti): price = model utility, fixed participation reward"
    )

    def __init__(self, scenario: Scenario, reward: float | None = None) -> None:
        super().__init__(scenario)
        if reward is None:
            opt = solve_mots_optimum(scenario)
            u_star = float(scenario.utility.value(opt.epsilon))
            reward = float(opt.buyers.sum()) * u_star / float(opt.participants.sum())
        if not np.isfinite(reward):
            raise ValueError(f"reward: must be a finite number, got {reward!r}")
        self.reward = float(reward)

    def quote(self, participants: npt.ArrayLike) -> Quote:
        sc = self.scenario
        k = np.asarray(participants, dtype=np.int64)
        u = float(sc.utility.value(generalization_error(k, sc.sizes, sc.error_model)))
        return Quote(u, np.full(sc.n_types, self.reward))

    def payoffs(self, states: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
        """J: U(ε(K')) − C_i + r; B: exactly 0 where a model exists (U − U), −∞ where none does."""
        k = np.atleast_2d(np.asarray(states, dtype=np.int64))
        sc = self.scenario
        u = sc.utility.value(generalization_error(k, sc.sizes, sc.error_model))
        join = join_payoff(u[:, None], sc.costs, self.reward)
        buy = np.where(k.sum(axis=1) > 0, 0.0, -np.inf)
        return np.asarray(join, dtype=np.float64), np.asarray(buy, dtype=np.float64)
