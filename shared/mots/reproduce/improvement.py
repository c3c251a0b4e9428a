"""Percentage improvements of MoTS over the FL framework across a sweep (Section 5.B.2's headline numbers).

The paper reports "x% higher social welfare" and "y% lower incentive costs" per figure without a formula.
Definition used here, per sweep point p where both frameworks have a feasible state:

* welfare improvement  = mean_p (W_MoTS(p) − W_FL(p)) / |W_FL(p)|      over points with W_FL(p) ≠ 0;
* incentive-cost change = mean_p (IC_MoTS(p) − IC_FL(p)) / IC_FL(p)    over points with IC_FL(p) > 0
  (negative = MoTS pays less; −100 % = MoTS pays nothing where FL pays), where IC is the platform's
  additional cost [Σ_i (K_i r_i − B_i p)]^+ of Problem 1 (Eq. 7): a surplus counts as zero cost.

Means of pointwise ratios are dominated by points where the denominator is small, so the ratio of
totals, Σ(W_MoTS − W_FL) / Σ|W_FL| and Σ(IC_MoTS − IC_FL) / Σ IC_FL, and the median of the
pointwise ratios are reported beside them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

ZERO_TOL = 1e-9
"""Relative size below which a denominator counts as zero (against the sweep's largest magnitude)."""


@dataclass(frozen=True)
class Improvement:
    """One percentage with the evidence behind it."""

    mean_pct: float
    """Mean of the pointwise relative changes, in % (NaN where no point qualifies)."""
    totals_pct: float
    """Relative change of the totals, in % (NaN where the denominator total is 0)."""
    points_used: int
    """Sweep points that entered the mean."""
    points_total: int
    """Sweep points offered (including infeasible ones)."""
    median_pct: float = math.nan
    """Median of the same pointwise relative changes, in % (robust to a near-zero denominator)."""

    def to_dict(self) -> dict[str, float | int | None]:
        """JSON-ready form (NaN becomes None)."""
        return {
            "mean_pct": _finite_or_none(self.mean_pct),
            "totals_pct": _finite_or_none(self.totals_pct),
            "median_pct": _finite_or_none(self.median_pct),
            "points_used": self.points_used,
            "points_total": self.points_total,
        }


def _finite_or_none(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _arrays(a: Sequence[float], b: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(
            f"sweep: both series must be 1-D and of equal length, got shapes {x.shape} and {y.shape}"
        )
    return x, y


def welfare_improvement(w_mots: Sequence[float], w_fl: Sequence[float]) -> Improvement:
    """Mean of (W_MoTS − W_FL)/|W_FL| over feasible points with W_FL ≠ 0, in %; NaN marks an infeasible point."""
    m, f = _arrays(w_mots, w_fl)
    feasible = np.isfinite(m) & np.isfinite(f)
    scale = float(np.max(np.abs(np.concatenate([m[feasible], f[feasible]])), initial=0.0))
    use = feasible & (np.abs(f) > ZERO_TOL * max(scale, 1e-300))
    ratios = (m[use] - f[use]) / np.abs(f[use]) * 100.0
    mean = float(np.mean(ratios)) if use.any() else math.nan
    denom = float(np.sum(np.abs(f[feasible])))
    totals = (
        float(np.sum(m[feasible] - f[feasible])) / denom * 100.0
        if denom > ZERO_TOL * max(scale, 1e-300)
        else math.nan
    )
    median = float(np.median(ratios)) if use.any() else math.nan
    return Improvement(mean, totals, int(use.sum()), len(m), median)


def incentive_change(ic_mots: Sequence[float], ic_fl: Sequence[float]) -> Improvement:
    """Mean of (IC_MoTS − IC_FL)/IC_FL over feasible points with IC_FL > 0, in % (negative = reduction).

    Both costs enter as their positive part [·]^+ (Problem 1's objective on the platform's side).
    """
    m, f = _arrays(ic_mots, ic_fl)
    m, f = np.maximum(m, 0.0), np.maximum(f, 0.0)  # NaN (infeasible) stays NaN
    feasible = np.isfinite(m) & np.isfinite(f)
    scale = float(np.max(np.abs(np.concatenate([m[feasible], f[feasible]])), initial=0.0))
    tol = ZERO_TOL * max(scale, 1e-300)
    use = feasible & (f > tol)
    ratios = (m[use] - f[use]) / f[use] * 100.0
    mean = float(np.mean(ratios)) if use.any() else math.nan
    denom = float(np.sum(f[feasible]))
    totals = float(np.sum(m[feasible] - f[feasible])) / denom * 100.0 if denom > tol else math.nan
    median = float(np.median(ratios)) if use.any() else math.nan
    return Improvement(mean, totals, int(use.sum()), len(m), median)
