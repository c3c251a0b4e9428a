"""Social welfare of a social state: W_MoTS (Eq. 5) and the plain FL framework's W_FL (Eq. 15)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from mots.economics.error import generalization_error
from mots.economics.scenario import Scenario

FloatArray = npt.NDArray[np.float64]


def welfare_mots(
    scenario: Scenario, participants: npt.ArrayLike, buyers: npt.ArrayLike
) -> FloatArray:
    """W_MoTS(K, B) = Σ_i [K_i (U(ε) − C_i) + B_i U(ε)] (Eq. 5); batched over leading axes."""
    k = np.asarray(participants, dtype=np.float64)
    b = np.asarray(buyers, dtype=np.float64)
    u = scenario.utility.value(generalization_error(k, scenario.sizes, scenario.error_model))
    return np.asarray((k.sum(axis=-1) + b.sum(axis=-1)) * u - k @ scenario.costs, dtype=np.float64)


def welfare_all_served(scenario: Scenario, participants: npt.ArrayLike) -> FloatArray:
    """Problem 2's objective Σ_i [N_i U(ε) − K_i C_i]: W_MoTS with B_i = N_i − K_i (Lemma 1)."""
    k = np.asarray(participants, dtype=np.float64)
    return welfare_mots(scenario, k, scenario.counts.astype(np.float64) - k)


def welfare_fl(scenario: Scenario, participants: npt.ArrayLike) -> FloatArray:
    """W_FL(K) = Σ_i K_i (U(ε) − C_i) (Eq. 15): only participants get the model."""
    k = np.asarray(participants, dtype=np.float64)
    return welfare_mots(scenario, k, np.zeros_like(k))
