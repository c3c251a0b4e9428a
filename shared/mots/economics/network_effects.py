"""Network effects of client participation (Section 3.A): Definition 2, Corollary 1, Theorems 1-2, Example 1.

A network effect is the drop in ε when one client joins a non-empty coalition; it does not see the
offset ε0. All functions take the coalition as participants per type K (shape (I,)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import numpy.typing as npt

from mots.economics.error import generalization_error, inverse_size_sum
from mots.economics.scenario import ErrorModel


def _nonempty(participants: npt.ArrayLike) -> npt.NDArray[np.float64]:
    k = np.asarray(participants, dtype=np.float64)
    if k.ndim != 1 or np.any(k < 0):
        raise ValueError("coalition: participants must be a vector of counts ≥ 0")
    if k.sum() <= 0:
        raise ValueError("coalition: network effects are defined for a non-empty coalition (K ≥ 1)")
    return k


def network_effect(
    participants: npt.ArrayLike, joining_type: int, sizes: npt.ArrayLike, model: ErrorModel
) -> float:
    """ε_K − ε_{K∪{n}} when one client of type ``joining_type`` joins coalition K (Definition 2)."""
    k = _nonempty(participants)
    after = k.copy()
    after[joining_type] += 1.0
    eps = generalization_error(np.stack([k, after]), sizes, model)
    return float(eps[0] - eps[1])


def eta(participants: npt.ArrayLike, sizes: npt.ArrayLike, model: ErrorModel) -> float:
    """η = (2K+1) Σ K_i/D_i / K² − (K+1)σ² / (dγ² K) (Theorem 1, Eq. 9)."""
    k = _nonempty(participants)
    total = float(k.sum())
    s = float(inverse_size_sum(k, sizes))
    return (2 * total + 1) * s / total**2 - (total + 1) * model.sigma2 / (model.d_gamma2 * total)


def is_nonnegative_effect(
    participants: npt.ArrayLike, data_size: float, sizes: npt.ArrayLike, model: ErrorModel
) -> bool:
    """Theorem 1: a client with D samples brings ε_K − ε_{K∪{n}} ≥ 0 iff 1/D ≤ η."""
    return 1.0 / data_size <= eta(participants, sizes, model)


def collaboration_reduces_error(
    count_a: int, harmonic_a: float, count_b: int, harmonic_b: float, model: ErrorModel
) -> bool:
    """Corollary 1: ε_{a+b} < max{ε_a, ε_b} iff σ²/γ² < (H_b K_b + K_a(2H_b − H_a)) / (H_a H_b (K_a+K_b)/d).

    Coalitions are given by size K and harmonic mean H of data sizes, with H_a ≤ H_b (swapped if not).
    Written with dγ² (the only combination Eq. 3 uses): σ²/(dγ²) < (H_b K_b + K_a(2H_b − H_a))/(H_a H_b (K_a+K_b)).
    """
    if count_a < 1 or count_b < 1:
        raise ValueError("coalitions: both must be non-empty (K_a, K_b ≥ 1)")
    if harmonic_a <= 0 or harmonic_b <= 0:
        raise ValueError("coalitions: harmonic means must be > 0")
    if harmonic_a > harmonic_b:
        count_a, harmonic_a, count_b, harmonic_b = count_b, harmonic_b, count_a, harmonic_a
    bound = (harmonic_b * count_b + count_a * (2 * harmonic_b - harmonic_a)) / (
        harmonic_a * harmonic_b * (count_a + count_b)
    )
    return model.heterogeneity_ratio < bound


class Region(StrEnum):
    """The four regions of Theorem 2 (Fig. 3) for a joining type j."""

    I = "I"  # noqa: E741 - the paper's name
    II = "II"
    III = "III"
    IV = "IV"

    @property
    def description(self) -> str:
        """What adding more type-j clients does, in the theorem's words."""
        return {
            Region.I: "non-negative at first, eventually negative",
            Region.II: "always non-negative",
            Region.III: "always negative",
            Region.IV: "negative at first, eventually positive",
        }[self]


@dataclass(frozen=True)
class TypeEffect:
    """Theorem 2's verdict for one type j joining coalition K."""

    region: Region
    first_effect: float
    """ε_K − ε_{K+e_j}: the effect of the next type-j client."""
    reversal_at: int | None
    """Smallest number of type-j participants K_j from which one more type-j client has the
    opposite sign to the first effect (None where the sign never changes)."""


def _effect_quadratic(
    participants: npt.NDArray[np.float64],
    joining_type: int,
    sizes: npt.ArrayLike,
    model: ErrorModel,
) -> tuple[float, float, float]:
    """Coefficients (A, B, C) with sign(effect of a type-j joiner at total K') = sign(A K'² + B K' + C).

    Adding type-j clients moves along S' = c + K'/D_j with c = S − K/D_j; Theorem 1's test 1/D_j ≤ η,
    multiplied by K'², is this quadratic in K' (derivation in docs/economics.md).
    """
    x = 1.0 / float(np.asarray(sizes, dtype=np.float64)[joining_type])
    total = float(participants.sum())
    c = float(inverse_size_sum(participants, sizes)) - total * x
    dg, s2 = model.d_gamma2, model.sigma2
    return dg * x - s2, 2 * c * dg + dg * x - s2, c * dg


def type_effect(
    participants: npt.ArrayLike, joining_type: int, sizes: npt.ArrayLike, model: ErrorModel
) -> TypeEffect:
    """Theorem 2: the region of type j given coalition K, with the reversal threshold where one exists."""
    k = _nonempty(participants)
    d = np.asarray(sizes, dtype=np.float64)
    x = 1.0 / float(d[joining_type])
    r = model.heterogeneity_ratio
    h = eta(k, d, model)
    if x < r and x <= h:
        region = Region.I
    elif r <= x <= h:
        region = Region.II
    elif h < x <= r:
        region = Region.III
    else:
        region = Region.IV
    a, b, c = _effect_quadratic(k, joining_type, d, model)
    total = float(k.sum())

    def nonneg(kk: float) -> bool:
        return a * kk * kk + b * kk + c >= 0.0

    start = nonneg(total)
    reversal: int | None = None
    candidates: set[int] = set()
    disc = b * b - 4 * a * c
    if a != 0.0 and disc >= 0.0:
        for root in ((-b - math.sqrt(disc)) / (2 * a), (-b + math.sqrt(disc)) / (2 * a)):
            candidates.update({math.floor(root), math.ceil(root), math.ceil(root) + 1})
    elif a == 0.0 and b != 0.0:
        root = -c / b
        candidates.update({math.floor(root), math.ceil(root), math.ceil(root) + 1})
    for kk in sorted(v for v in candidates if v > total):
        if nonneg(kk) != start:
            reversal = int(kk - total + k[joining_type])
            break
    return TypeEffect(region, network_effect(k, joining_type, d, model), reversal)


def example1_threshold(count_large: int, size_small: float, size_large: float) -> int:
    """Example 1 (I = 2, σ² = 0): ε falls with K_1 once K_1 ≥ ⌈(−2K_2D_1 − D_2 + √(4K_2²(D_2−D_1)² + D_2²)) / (2D_2)⌉."""
    k2, d1, d2 = float(count_large), float(size_small), float(size_large)
    value = (-2 * k2 * d1 - d2 + math.sqrt(4 * k2**2 * (d2 - d1) ** 2 + d2**2)) / (2 * d2)
    return math.ceil(value)
