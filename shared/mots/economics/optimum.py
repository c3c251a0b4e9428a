"""Optimal social states (Problem 2, Lemma 1, Proposition 1) and the FL framework's best state (Eq. 15).

Interim implementation by enumeration; the exact fast solver replaces the bodies, not the API.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from mots.economics.exhaustive import exhaustive_min_error, exhaustive_optimum
from mots.economics.scenario import Scenario

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class SocialOptimum:
    """A social state {K, B} with its welfare and error."""

    participants: IntArray
    buyers: IntArray
    welfare: float
    epsilon: float


class RequirementInfeasibleError(ValueError):
    """ε_req is below ε_min: no non-empty coalition trains a model that good."""

    def __init__(self, eps_req: float, eps_min: float) -> None:
        super().__init__(
            f"eps_req: {eps_req:.6g} is below the smallest achievable error eps_min = {eps_min:.6g}; "
            "no coalition can meet it (raise eps_req to at least eps_min)"
        )
        self.eps_req = eps_req
        self.eps_min = eps_min


def regime(scenario: Scenario) -> Literal["low", "high"]:
    """Proposition 1's split: "high" iff I_H = {i : D_i > dγ²/σ²} is non-empty (σ² > dγ²/D_I)."""
    em = scenario.error_model
    return "high" if em.sigma2 * float(scenario.sizes.max()) > em.d_gamma2 else "low"


def min_error(scenario: Scenario) -> tuple[float, IntArray]:
    """ε_min over non-empty states and a state attaining it."""
    state, eps = exhaustive_min_error(scenario)
    return eps, state


def _solve(scenario: Scenario, framework: str) -> SocialOptimum:
    found = exhaustive_optimum(scenario, framework)
    if found is None:
        raise RequirementInfeasibleError(scenario.eps_req_value, min_error(scenario)[0])
    k, w, eps = found
    buyers = scenario.counts - k if framework == "mots" else np.zeros_like(k)
    return SocialOptimum(k, buyers, w, eps)


def solve_mots_optimum(scenario: Scenario) -> SocialOptimum:
    """Problem 2: max Σ_i [N_i U(ε) − K_i C_i] s.t. ε(K) ≤ ε_req over non-empty K, with B = N − K."""
    return _solve(scenario, "mots")


def solve_fl_optimum(scenario: Scenario) -> SocialOptimum:
    """The FL framework's best state: max W_FL(K) (Eq. 15) s.t. ε(K) ≤ ε_req, with B = 0."""
    return _solve(scenario, "fl")
