"""Generalization error of the trained model, Eq. (3), vectorised over social states.

A state is a vector K of participants per type (shape (..., I)). The empty state K = 0 trains no
model: its error is +∞, so that every utility family gives it U = 0.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from mots.economics.scenario import ErrorModel

FloatArray = npt.NDArray[np.float64]


def inverse_size_sum(participants: npt.ArrayLike, sizes: npt.ArrayLike) -> FloatArray:
    """S = Σ_i K_i / D_i, the only way the coalition's data sizes enter Eq. (3)."""
    k = np.asarray(participants, dtype=np.float64)
    return np.asarray(k @ (1.0 / np.asarray(sizes, dtype=np.float64)), dtype=np.float64)


def error_from_totals(
    total: npt.ArrayLike, inv_size_sum: npt.ArrayLike, model: ErrorModel
) -> FloatArray:
    """ε from K = Σ K_i and S = Σ K_i/D_i (Eq. 3 plus the offset ε0); K = 0 gives +∞."""
    k = np.asarray(total, dtype=np.float64)
    s = np.asarray(inv_size_sum, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        eps = model.eps0 + model.d_gamma2 * s / (k * k) + (k - 1.0) / k * model.sigma2
    return np.asarray(np.where(k > 0, eps, np.inf), dtype=np.float64)


def generalization_error(
    participants: npt.ArrayLike, sizes: npt.ArrayLike, model: ErrorModel
) -> FloatArray:
    """ε(K) of Eq. (3) (plus ε0) for one state (shape (I,)) or a batch (shape (..., I))."""
    k = np.asarray(participants, dtype=np.float64)
    return error_from_totals(k.sum(axis=-1), inverse_size_sum(k, sizes), model)


def excess_error(
    participants: npt.ArrayLike, sizes: npt.ArrayLike, model: ErrorModel
) -> FloatArray:
    """ε(K) − ε0 − σ²: the quantity whose sign splits the Lagrangian's term (ε − σ²)^−1 (Eq. 12)."""
    return np.asarray(
        generalization_error(participants, sizes, model) - model.eps0 - model.sigma2,
        dtype=np.float64,
    )
