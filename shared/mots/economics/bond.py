"""The participation bond: what makes shirking unprofitable where its detection is probabilistic.

A participant of type i joins for the payoff U(ε) − C_i + r_i (Eq. 6b). One that does only the
fraction φ of the work the round asks (a shirker: E·φ of the E local steps) saves (1 − φ)·C_i;
verification catches it with probability q, and a caught participant forfeits r_i and the model
(Eq. 6a/6b: it gets neither) and, with a bond B_i held at join, the bond. Its expected payoff is
(1 − q)·(U(ε) + r_i) − φ·C_i − q·B_i, so shirking does not pay when

    q·(U(ε) + r_i + B_i) ≥ (1 − φ)·C_i,   i.e.   B_i ≥ (1 − φ)·C_i / q − (U(ε) + r_i).

A participant joins only when U(ε) − C_i + r_i ≥ 0 (Eq. 6b against abstaining, Eq. 7's
participation constraint), so U(ε) + r_i ≥ C_i for every joiner and

    B_i = max(0, (1 − φ − q) / q) · C_i

suffices for all of them, whatever U and r_i (docs/training.md, "Copies and shirking"). It is 0
when q ≥ 1 − φ (forfeiting r_i and the model already outweighs the cost saved) and unbounded as
q → 0 (a shirk nobody can catch cannot be priced away). Pure: numbers in, numbers out.
"""

from __future__ import annotations

import math


def bond_factor(detection: float, work_fraction: float) -> float:
    """B_i / C_i = max(0, (1 − φ − q) / q) for a shirk of work fraction φ = ``work_fraction``
    caught with probability q = ``detection`` (module docstring; Eq. 6b's participation
    constraint bounds U(ε) + r_i below by C_i). ∞ when q = 0 and φ < 1."""
    if not 0.0 <= detection <= 1.0 or math.isnan(detection):
        raise ValueError(f"detection: a probability in [0, 1], got {detection!r}")
    if not 0.0 <= work_fraction <= 1.0 or math.isnan(work_fraction):
        raise ValueError(f"work_fraction: a share of the work in [0, 1], got {work_fraction!r}")
    saved = 1.0 - work_fraction - detection
    if saved <= 0.0:
        return 0.0
    return math.inf if detection == 0.0 else saved / detection


def participation_bond(cost: float, detection: float, work_fraction: float) -> float:
    """B_i = :func:`bond_factor` · C_i for a type of participation cost C_i = ``cost`` ≥ 0."""
    if not cost >= 0.0 or math.isinf(cost):
        raise ValueError(f"cost: a finite C_i ≥ 0, got {cost!r}")
    factor = bond_factor(detection, work_fraction)
    return 0.0 if cost == 0.0 else factor * cost


def shirk_gain(
    utility: float, reward: float, cost: float, bond: float, detection: float, work_fraction: float
) -> float:
    """Expected payoff of shirking less that of honest work (negative: shirking does not pay):
    [(1 − q)(U + r_i) − φ·C_i − q·B_i] − [U − C_i + r_i] (module docstring)."""
    shirk = (1.0 - detection) * (utility + reward) - work_fraction * cost - detection * bond
    return shirk - (utility - cost + reward)
