"""The mechanism interface: a published schedule p(K), r_i(K) that clients best-respond to.

Clients know only the schedule and the current aggregate state (incomplete information, Section 3.C);
their payoffs follow Eq. (6).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import numpy.typing as npt

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

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario

    @abstractmethod
    def quote(self, participants: npt.ArrayLike) -> Quote:
        """p(K) and r_i(K) at social state K (participants per type)."""
