"""FedAvg arithmetic (Section 5): the learning-rate schedule, the two averages, and the robust rules.

``weighted`` averages participants by data size, D_k / Σ D (Eq. 2's objective); ``uniform`` gives
each of the K participants 1/K, which is what the derivation of Eq. 3 assumes. A deployment may
instead combine the (verified) models coordinate-wise with a trimmed mean or the median (as
Flower's FedTrimmedAvg and FedMedian; Yin et al., ICML 2018), which bound what any minority of
updates can move a coordinate, at some cost in variance when every update is honest.
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


class RunningAverage:
    """Σ_k w_k · model_k layer by layer, one model at a time: float64 accumulation in the order
    models arrive, float32 result. :func:`aggregate` and :class:`RoundAggregate`'s mean sum with
    it."""

    def __init__(self) -> None:
        self._acc: list[npt.NDArray[np.float64]] | None = None

    def add(self, model: Sequence[FloatArray], weight: float) -> None:
        """Add w · model."""
        if self._acc is None:
            self._acc = [np.zeros(np.shape(layer), dtype=np.float64) for layer in model]
        if len(model) != len(self._acc):
            raise ValueError("aggregate: models differ in their number of layers")
        for acc, layer in zip(self._acc, model, strict=True):
            acc += float(weight) * np.asarray(layer, dtype=np.float64)

    def result(self) -> list[FloatArray]:
        """The weighted sum as float32 layers."""
        if self._acc is None:
            raise ValueError("aggregate: no model was added")
        return [acc.astype(np.float32) for acc in self._acc]


def aggregate(
    models: Sequence[Sequence[FloatArray]], weights: Sequence[float] | npt.NDArray[np.float64]
) -> list[FloatArray]:
    """Σ_k w_k · model_k, layer by layer (float64 accumulation, float32 result)."""
    if len(models) == 0 or len(models) != len(weights):
        raise ValueError(f"aggregate: {len(models)} models but {len(weights)} weights")
    average = RunningAverage()
    for m, w in zip(models, weights, strict=True):
        average.add(m, float(w))
    return average.result()


def trimmed_mean(models: Sequence[Sequence[FloatArray]], trim_fraction: float) -> list[FloatArray]:
    """Coordinate-wise mean after dropping the ⌊β·K⌋ largest and smallest values (β = trim_fraction)."""
    if not 0.0 <= trim_fraction < 0.5:
        raise ValueError(f"trim_fraction must lie in [0, 0.5), got {trim_fraction}")
    k = len(models)
    cut = int(trim_fraction * k)
    out: list[FloatArray] = []
    for layer in range(len(models[0])):
        stack = np.sort(np.stack([np.asarray(m[layer], dtype=np.float64) for m in models]), axis=0)
        out.append(stack[cut : k - cut].mean(axis=0).astype(np.float32))
    return out


def coordinate_median(models: Sequence[Sequence[FloatArray]]) -> list[FloatArray]:
    """Coordinate-wise median of the models."""
    return [
        np.median(
            np.stack([np.asarray(m[layer], dtype=np.float64) for m in models]), axis=0
        ).astype(np.float32)
        for layer in range(len(models[0]))
    ]


def combine(
    models: Sequence[Sequence[FloatArray]],
    weights: Sequence[float] | npt.NDArray[np.float64],
    rule: str = "mean",
    trim_fraction: float = 0.2,
) -> list[FloatArray]:
    """The next global model from the round's models: ``mean`` (FedAvg with ``weights``),
    ``trimmed_mean`` or ``median`` (coordinate-wise, unweighted)."""
    if len(models) == 0:
        raise ValueError("combine: no model to aggregate")
    if rule == "mean":
        return aggregate(models, weights)
    if rule == "trimmed_mean":
        return trimmed_mean(models, trim_fraction)
    if rule == "median":
        return coordinate_median(models)
    raise ValueError(f"aggregator must be 'mean', 'trimmed_mean' or 'median', got {rule!r}")


RULES = ("mean", "trimmed_mean", "median")


class RoundAggregate:
    """The next global model from one FedAvg round's accepted models, added one at a time in
    the round's order: FedAvg's mean with weights D_k/ΣD or 1/K (:func:`aggregation_weights`,
    streamed: one model held at a time, so memory does not grow with K), or a robust ``rule``
    (``trimmed_mean``, ``median``: :func:`combine`, which holds the round's models).

    Both engines combine a round through it: the Flower strategy
    (:meth:`mots.training.strategy.VerifyingFedAvg.aggregate_train`, over the verified updates)
    and the in-process engine's two paths, the per-client loop and the batched logistic one
    (:mod:`mots.training.inprocess`), so the same updates give the same model on any."""

    def __init__(
        self,
        data_sizes: Sequence[float],
        aggregation: str,
        rule: str = "mean",
        trim_fraction: float = 0.2,
    ) -> None:
        if rule not in RULES:
            raise ValueError(f"aggregator must be one of {RULES}, got {rule!r}")
        self.weights = aggregation_weights(data_sizes, aggregation)
        self.rule, self.trim_fraction = rule, trim_fraction
        self._mean = RunningAverage() if rule == "mean" else None
        self._held: list[Sequence[FloatArray]] = []
        self._added = 0

    def add(self, model: Sequence[FloatArray]) -> None:
        """The round's next model (the k-th added takes the k-th data size's weight)."""
        if self._added >= len(self.weights):
            raise ValueError(f"aggregate: more models than the {len(self.weights)} data sizes")
        if self._mean is not None:
            self._mean.add(model, float(self.weights[self._added]))
        else:
            self._held.append(model)
        self._added += 1

    def result(self) -> list[FloatArray]:
        """The next global model, once every model of the round was added."""
        if self._added != len(self.weights):
            raise ValueError(f"aggregate: {self._added} models for {len(self.weights)} data sizes")
        if self._mean is not None:
            return self._mean.result()
        return combine(self._held, self.weights, self.rule, self.trim_fraction)
