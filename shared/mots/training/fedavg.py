"""FedAvg arithmetic (Section 5): the learning-rate schedule and the two aggregations.

``weighted`` averages participants by data size, D_k / Σ D (Eq. 2's objective); ``uniform`` gives
each of the K participants 1/K, which is what the derivation of Eq. 3 assumes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float32]


def learning_rate(lr0: float, round_index: int) -> float:
    """η_r = η0 / (1 + r) for round r = 0, 1, …"""
    if round_index < 0:
        raise ValueError(f"round_index must be ≥ 0, got {round_index}")
    return lr0 / (1.0 + round_index)


def aggregation_weights(data_sizes: Sequence[float], mode: str) -> npt.NDArray[np.float64]:
    """Weights summing to 1: D_k/ΣD (``weighted``, Eq. 2) or 1/K (``uniform``, Eq. 3)."""
    d = np.asarray(data_sizes, dtype=np.float64)
    if d.ndim != 1 or d.size == 0:
        raise ValueError("data_sizes: need at least one participant")
    if np.any(d <= 0):
        raise ValueError("data_sizes: every D_k must be > 0")
    if mode == "weighted":
        return np.asarray(d / d.sum(), dtype=np.float64)
    if mode == "uniform":
        return np.full(d.size, 1.0 / d.size)
    raise ValueError(f"aggregation must be 'uniform' or 'weighted', got {mode!r}")


def aggregate(
    models: Sequence[Sequence[FloatArray]], weights: Sequence[float] | npt.NDArray[np.float64]
) -> list[FloatArray]:
    """Σ_k w_k · model_k, layer by layer (float64 accumulation, float32 result)."""
    if len(models) == 0 or len(models) != len(weights):
        raise ValueError(f"aggregate: {len(models)} models but {len(weights)} weights")
    n_layers = len(models[0])
    if any(len(m) != n_layers for m in models):
        raise ValueError("aggregate: models differ in their number of layers")
    out: list[FloatArray] = []
    for layer in range(n_layers):
        acc = np.zeros(np.shape(models[0][layer]), dtype=np.float64)
        for m, w in zip(models, weights, strict=True):
            acc += float(w) * np.asarray(m[layer], dtype=np.float64)
        out.append(acc.astype(np.float32))
    return out
