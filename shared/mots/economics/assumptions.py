"""Checks of the paper's modelling assumptions on a concrete scenario, reported as warnings.

Section 2.A.3 assumes (ε − σ²)U''(ε) + 2U'(ε) ≥ 0 for ε ≠ σ². With the offset ε0 the structure of
Eq. (3) is carried by ε − ε0, so the check uses (ε − ε0 − σ²)U''(ε) + 2U'(ε) with ε the full error.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mots.economics.scenario import Scenario


@dataclass(frozen=True)
class AssumptionWarning:
    """A stretch of the relevant error range where an assumption fails."""

    assumption: str
    eps_from: float
    eps_to: float

    def __str__(self) -> str:
        return f"{self.assumption} fails for ε in [{self.eps_from:.6g}, {self.eps_to:.6g}]"


def relevant_error_range(scenario: Scenario, eps_min: float) -> tuple[float, float]:
    """[ε_min, ε_max]: ε − ε0 is a convex combination of dγ²/D_i-type terms and σ², so it never
    exceeds max(dγ²/D_1, σ²) (Eq. 3 with S ≤ K/D_1)."""
    em = scenario.error_model
    upper = em.eps0 + max(em.d_gamma2 / float(scenario.sizes.min()), em.sigma2)
    return eps_min, max(upper, eps_min)


def curvature_warnings(
    scenario: Scenario, eps_min: float, samples: int = 2001
) -> list[AssumptionWarning]:
    """Where (ε − ε0 − σ²)U'' + 2U' < 0 on the relevant range (Section 2.A.3), as closed stretches."""
    lo, hi = relevant_error_range(scenario, eps_min)
    grid = np.linspace(lo, hi, samples) if hi > lo else np.array([lo])
    em = scenario.error_model
    excess = grid - em.eps0 - em.sigma2
    value = excess * scenario.utility.d2(grid) + 2.0 * scenario.utility.d1(grid)
    scale = np.abs(2.0 * scenario.utility.d1(grid)) + 1e-300
    bad = (value < -1e-12 * scale) & (np.abs(excess) > 1e-12)
    warnings: list[AssumptionWarning] = []
    start: int | None = None
    for idx, flag in enumerate([*bad.tolist(), False]):
        if flag and start is None:
            start = idx
        elif not flag and start is not None:
            warnings.append(
                AssumptionWarning(
                    "(ε − σ²)U''(ε) + 2U'(ε) ≥ 0 (Section 2.A.3)",
                    float(grid[start]),
                    float(grid[idx - 1]),
                )
            )
            start = None
    return warnings
