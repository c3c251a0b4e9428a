"""Utility families: values, derivatives against finite differences, the curvature assumption."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mots.economics import ExponentialUtility, PowerUtility


@settings(max_examples=100, deadline=None)
@given(
    st.one_of(
        st.builds(PowerUtility, scale=st.floats(0.5, 100), exponent=st.floats(0.5, 16)),
        st.builds(ExponentialUtility, scale=st.floats(0.5, 100), rate=st.floats(0.1, 5)),
    ),
    st.floats(0.3, 5.0),
)
def test_derivatives_match_finite_differences(
    u: PowerUtility | ExponentialUtility, eps: float
) -> None:
    """U' and U'' agree with central differences."""
    h = 1e-5 * eps
    d1 = (u.value(eps + h) - u.value(eps - h)) / (2 * h)
    h2 = 1e-3 * eps
    d2 = (u.value(eps + h2) - 2 * u.value(eps) + u.value(eps - h2)) / h2**2
    assert float(u.d1(eps)) == pytest.approx(float(d1), rel=1e-5, abs=1e-9)
    assert float(u.d2(eps)) == pytest.approx(float(d2), rel=1e-3, abs=1e-6)


def test_no_model_gives_zero_utility() -> None:
    """ε = +∞ (no model) gives U = 0 for both families."""
    assert float(PowerUtility().value(np.inf)) == 0.0
    assert float(ExponentialUtility(scale=3, rate=1).value(np.inf)) == 0.0


def test_power_law_curvature_threshold() -> None:
    """For a·ε^−b the assumption (ε−σ²)U'' + 2U' ≥ 0 holds iff ε ≥ (b+1)σ²/(b−1)."""
    u, sigma2 = PowerUtility(scale=40, exponent=16), 0.5
    threshold = 17 * sigma2 / 15
    assert float(u.curvature_condition(threshold * 1.001, sigma2)) > 0
    assert float(u.curvature_condition(threshold * 0.999, sigma2)) < 0


def test_exponential_curvature_threshold() -> None:
    """For a·e^(−cε) the assumption holds iff ε − σ² ≥ 2/c."""
    u, sigma2 = ExponentialUtility(scale=10, rate=4), 0.2
    assert float(u.curvature_condition(sigma2 + 0.5 + 1e-6, sigma2)) > 0
    assert float(u.curvature_condition(sigma2 + 0.5 - 1e-3, sigma2)) < 0
