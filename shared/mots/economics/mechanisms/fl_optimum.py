"""The FL framework's theoretical optimum as a mechanism: K = argmax W_FL (Eq. 15), B = 0, break-even rewards.

Only participants get the model (no sales: p = +∞). Each participant is paid what it needs to break
even, r_i = max(0, C_i − U(ε)), and admission is closed beyond the optimum's participants
(r_i = −∞ for a type over its quota), so the optimum is where the market starts and stays. The
incentive cost at the optimum is Σ_i K_i max(0, C_i − U(ε)).
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from mots.economics.error import generalization_error
from mots.economics.mechanisms.base import Mechanism, Quote
from mots.economics.optimum import solve_fl_optimum
from mots.economics.scenario import Scenario

IntArray = npt.NDArray[np.int64]


class FLOptimumMechanism(Mechanism):
    """The plain FL framework at its best state (Proposition 3's comparison point)."""

    name: ClassVar[str] = "fl_optimum"
    description: ClassVar[str] = (
        "Theoretical optimum of the plain FL framework: no sales, participants paid to break even"
    )

    def __init__(self, scenario: Scenario) -> None:
        super().__init__(scenario)
        self.optimum = solve_fl_optimum(scenario)

    def quote(self, participants: npt.ArrayLike) -> Quote:
        sc = self.scenario
        k = np.asarray(participants, dtype=np.int64)
        u = float(sc.utility.value(generalization_error(k, sc.sizes, sc.error_model)))
        rewards = np.maximum(0.0, sc.costs - u)
        rewards = np.where(k > self.optimum.participants, -np.inf, rewards)
        return Quote(math.inf, np.asarray(rewards, dtype=np.float64))

    def start_state(self) -> tuple[IntArray, IntArray]:
        """The FL optimum itself, nobody buying."""
        k = self.optimum.participants.copy()
        return k, np.zeros_like(k)
