"""The curvature assumption of Section 2.A.3, checked on scenarios."""

from __future__ import annotations

import pytest

from mots.economics import ClientType, ErrorModel, PowerUtility, Scenario
from mots.economics.assumptions import curvature_warnings, relevant_error_range


def _scenario(sigma2: float, eps0: float = 0.0) -> Scenario:
    return Scenario(
        types=[ClientType(name="a", count=3, data_size=50, cost=0.1)],
        error_model=ErrorModel(d_gamma2=100.0, sigma2=sigma2, eps0=eps0),
        utility=PowerUtility(scale=40, exponent=16),
    )


def test_iid_power_law_has_no_warning() -> None:
    """σ² = 0: (ε)U'' + 2U' = ab(b−1)ε^(−b−1) > 0 everywhere."""
    assert curvature_warnings(_scenario(0.0), 0.5) == []


def test_power_law_fails_below_its_threshold() -> None:
    """With σ² = 1 the condition fails exactly for ε < 17/15 (b = 16)."""
    (w,) = curvature_warnings(_scenario(1.0), 0.9, samples=100_001)
    assert w.eps_from == pytest.approx(0.9)
    assert w.eps_to == pytest.approx(17 / 15, abs=1e-3)
    assert "fails" in str(w)


def test_offset_shifts_the_threshold() -> None:
    """The check uses ε − ε0: for a·ε^−b it fails for ε < (b+1)(ε0 + σ²)/(b−1)."""
    (w,) = curvature_warnings(_scenario(1.0, eps0=0.5), 1.4, samples=100_001)
    assert w.eps_to == pytest.approx(17 / 15 * 1.5, abs=1e-3)


def test_relevant_range_bounds_eq3() -> None:
    """ε − ε0 ≤ max(dγ²/D_1, σ²)."""
    assert relevant_error_range(_scenario(0.3, eps0=0.2), 0.4) == (0.4, pytest.approx(2.2))
