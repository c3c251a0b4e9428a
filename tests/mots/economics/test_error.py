"""Eq. (3): the generalization error, batched, with the empty state and the offset ε0."""

from __future__ import annotations

import numpy as np
import pytest

from mots.economics import ErrorModel, error_from_totals, generalization_error, inverse_size_sum
from mots.economics.error import excess_error


def test_eq3_by_hand() -> None:
    """ε = dγ²/K² Σ K_i/D_i + (K−1)/K σ² (+ ε0) for K = (2, 1), D = (50, 300)."""
    model = ErrorModel(d_gamma2=2000.0, sigma2=0.3, eps0=0.5)
    expected = 0.5 + 2000.0 / 9 * (2 / 50 + 1 / 300) + 2 / 3 * 0.3
    assert float(generalization_error([2, 1], [50, 300], model)) == pytest.approx(
        expected, rel=1e-14
    )


def test_empty_state_has_no_model() -> None:
    """K = 0 trains nothing: ε = +∞, so U(ε) = 0."""
    assert np.isinf(generalization_error([0, 0], [50, 300], ErrorModel(d_gamma2=1.0)))


def test_batch_matches_single() -> None:
    """A batch of states gives the same values as one at a time."""
    model = ErrorModel(d_gamma2=123.0, sigma2=0.7)
    states = np.array([[1, 0, 3], [0, 0, 1], [4, 4, 4], [0, 0, 0]])
    batch = generalization_error(states, [10, 20, 40], model)
    single = [float(generalization_error(s, [10, 20, 40], model)) for s in states]
    np.testing.assert_allclose(batch, single)
    np.testing.assert_allclose(
        batch, error_from_totals(states.sum(1), inverse_size_sum(states, [10, 20, 40]), model)
    )


def test_single_client_and_many_identical() -> None:
    """One client: ε = dγ²/D; many identical i.i.d. clients: ε → σ²."""
    model = ErrorModel(d_gamma2=100.0, sigma2=0.4)
    assert float(generalization_error([1], [25.0], model)) == pytest.approx(4.0)
    assert float(generalization_error([10**7], [25.0], model)) == pytest.approx(0.4, rel=1e-5)


def test_excess_error_sign_marks_regime() -> None:
    """ε − ε0 − σ² < 0 when only clients with D > dγ²/σ² train (Proposition 1's I_H)."""
    model = ErrorModel(d_gamma2=100.0, sigma2=1.0, eps0=0.2)
    assert float(excess_error([0, 5], [50.0, 400.0], model)) < 0
    assert float(excess_error([5, 0], [50.0, 400.0], model)) > 0
