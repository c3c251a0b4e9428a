"""The server's own data for verifying updates: training samples that no client holds.

The test set measures ε, the quantity the market prices, so verification must not look at it.
The server instead keeps ``n`` samples of the training set outside every client's partition
(seeded, so every run of a configuration keeps the same ones) and splits them in two: an
*anchor* half, on which it computes its own update of each round's global model (the reference
direction and scale of :mod:`mots.training.verification`), and a *validation* half, on which it
measures whether an update harms the model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch

from mots.training.anchored import References
from mots.training.config import TrainConfig
from mots.training.datasets import Dataset, to_float
from mots.training.fedavg import learning_rate
from mots.training.local import ClientData, batch_indices, evaluate, torch_threads, train_local
from mots.training.models import build_model, get_weights, set_weights
from mots.training.partition import client_partitions

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float32]
ANCHOR_PID = 0x5E7
"""The partition id the anchor's mini-batches are drawn with (no client has it)."""


def holdout_indices(labels: IntArray, config: TrainConfig, n: int) -> IntArray:
    """``n`` training-set indices outside every client's partition. When the clients' shards
    leave fewer than ``n`` samples free (a population whose shards cover the training set, which
    then reuse it), a seeded sample of the whole set: it overlaps some clients' shards, and the
    checks still never see the test set."""
    rng = np.random.default_rng([config.seed, 0x40D])
    need = sum(int(d) * int(c) for d, c in zip(config.sizes, config.type_counts, strict=True))
    if need + n <= len(labels):
        used = np.zeros(len(labels), dtype=bool)
        for blocks in client_partitions(labels, config):
            for block in blocks:
                used[block] = True
        free = np.flatnonzero(~used)
        if len(free) >= n:
            return rng.permutation(free)[: max(0, n)].astype(np.int64)
    return rng.permutation(len(labels))[: max(0, n)].astype(np.int64)


BASIS_RANK = 256
"""Singular vectors kept of the real inputs (at most a third of the input size)."""


def input_basis(x: npt.NDArray[np.float32], rank: int = BASIS_RANK) -> npt.NDArray[np.float64]:
    """The top right singular vectors of the inputs ``x`` (N, n): the span where an honest first
    layer's update lies (uncentred: a linear layer's gradient rows are sums of δ·x)."""
    k = max(1, min(rank, x.shape[1] // 3, x.shape[0]))
    _, _, vt = np.linalg.svd(np.asarray(x, dtype=np.float64), full_matrices=False)
    return np.ascontiguousarray(vt[:k])


@dataclass
class Holdout:
    """The anchor and validation halves of the server's held-out samples, with a model to use."""

    config: TrainConfig
    anchor: ClientData
    x_val: torch.Tensor
    y_val: torch.Tensor
    model: torch.nn.Module
    basis: npt.NDArray[np.float64] | None = None
    """Orthonormal rows spanning the validation inputs (first layer on flat inputs), or None."""

    @classmethod
    def build(cls, config: TrainConfig, dataset: Dataset, n: int) -> Holdout | None:
        """The holdout of ``n`` samples (None when n < 2 or no training sample is free)."""
        idx = holdout_indices(dataset.y_train, config, n)
        if len(idx) < 2:
            return None
        half = len(idx) // 2
        a, v = idx[:half], idx[half:]
        anchor = ClientData(
            torch.from_numpy(to_float(dataset.x_train[a])),
            torch.from_numpy(dataset.y_train[a]),
            ANCHOR_PID,
        )
        model = build_model(config.model, dataset.input_shape, dataset.num_classes)
        x_val = to_float(dataset.x_train[v])
        return cls(
            config,
            anchor,
            torch.from_numpy(x_val),
            torch.from_numpy(dataset.y_train[v]),
            model,
            input_basis(x_val.reshape(len(v), -1)) if config.model == "logistic" else None,
        )

    @classmethod
    def from_samples(
        cls, config: TrainConfig, x: FloatArray, y: IntArray, model: torch.nn.Module
    ) -> Holdout | None:
        """The holdout of a task's own samples (preprocessed inputs ``x``, labels ``y``: the
        platform's evaluation data, :func:`mots.training.task_run.build_task_model`) for its
        ``model``: the first half the anchor, the rest the validation half (None when fewer
        than 2 samples). No input basis: the off_data check's span of real inputs is measured
        for Fashion-MNIST's logistic model (docs/training.md); on a task's few evaluation
        samples (breast-cancer: 29 validation rows of 30 features) honest updates of a
        bench-tasks round fell outside it (0.29 against the draws' 0.18 + 0.1), so it is off."""
        if len(y) < 2:
            return None
        half = len(y) // 2
        x_val = np.ascontiguousarray(x[half:], dtype=np.float32)
        anchor = ClientData(
            torch.from_numpy(np.ascontiguousarray(x[:half], dtype=np.float32)),
            torch.from_numpy(np.asarray(y[:half], dtype=np.int64)),
            ANCHOR_PID,
        )
        return cls(
            config,
            anchor,
            torch.from_numpy(x_val),
            torch.from_numpy(np.asarray(y[half:], dtype=np.int64)),
            model,
        )

    def loss(self, weights: list[FloatArray]) -> float:
        """Mean cross-entropy of ``weights`` on the validation half."""
        with torch_threads(1):
            set_weights(self.model, weights)
            return evaluate(self.model, self.x_val, self.y_val)[0]

    def accuracy(self, weights: list[FloatArray]) -> float:
        """Accuracy of ``weights`` on the validation half (the anchored accuracy check)."""
        with torch_threads(1):
            set_weights(self.model, weights)
            return evaluate(self.model, self.x_val, self.y_val)[1]

    def reference_update(
        self, weights: list[FloatArray], round_index: int, draw: int = 0
    ) -> list[FloatArray]:
        """Δ_ref: E local SGD steps of batch b from ``weights`` on the anchor half, as a client
        of round ``round_index`` would take them, minus ``weights``; ``draw`` > 0 draws other
        mini-batches (another seeded stream) for :meth:`reference_losses`."""
        cfg = self.config
        idx = batch_indices(
            cfg.seed,
            round_index,
            ANCHOR_PID + draw,
            self.anchor.size,
            cfg.local_steps,
            cfg.batch_size,
        )
        with torch_threads(1):
            set_weights(self.model, weights)
            train_local(self.model, self.anchor, idx, learning_rate(cfg.lr, round_index))
            new = get_weights(self.model)
        return [
            (n - np.asarray(w, dtype=np.float32)).astype(np.float32)
            for n, w in zip(new, weights, strict=True)
        ]

    def reference_losses(
        self, weights: list[FloatArray], round_index: int, draws: int
    ) -> list[float]:
        """Validation losses of w + Δ for the server's further honest updates of w (draws 1 to
        ``draws`` − 1; draw 0 is :meth:`reference_update`'s): how far an honest update of this
        round may overshoot, for the harm check (:mod:`mots.training.verification`)."""
        out = []
        for draw in range(1, draws):
            delta = self.reference_update(weights, round_index, draw)
            out.append(
                self.loss(
                    [
                        (np.asarray(w, dtype=np.float32) + d).astype(np.float32)
                        for w, d in zip(weights, delta, strict=True)
                    ]
                )
            )
        return out

    def anchored_references(
        self, weights: list[FloatArray], round_index: int, size: int, draws: int
    ) -> References:
        """The server's own updates of ``weights`` for a participant declaring ``size`` samples:
        ``draws`` runs of the round's E steps of b draws, each on ``size`` anchor samples
        (disjoint draws while the anchor holds them), flattened; with the input basis and the
        validation accuracy of each w + Δ_t."""
        cfg = self.config
        n = self.anchor.size
        d = max(1, min(size, n))
        perm = np.random.default_rng([cfg.seed, round_index, d, 0xA2C]).permutation(n)
        flat_w = np.concatenate([np.asarray(w, dtype=np.float64).ravel() for w in weights])
        out, accuracies = [], []
        with torch_threads(1):
            for t in range(draws):
                start = (t * d) % (n - d + 1)
                sub = perm[start : start + d]
                data = ClientData(self.anchor.x[sub], self.anchor.y[sub], ANCHOR_PID + 1 + t)
                idx = batch_indices(
                    cfg.seed, round_index, data.pid, d, cfg.local_steps, cfg.batch_size
                )
                set_weights(self.model, weights)
                train_local(self.model, data, idx, learning_rate(cfg.lr, round_index))
                new = np.concatenate(
                    [np.asarray(a, dtype=np.float64).ravel() for a in get_weights(self.model)]
                )
                out.append(new - flat_w)
                accuracies.append(evaluate(self.model, self.x_val, self.y_val)[1])
        first = None
        if self.basis is not None and len(weights) and np.ndim(weights[0]) == 2:
            rows, cols = np.shape(weights[0])
            first = (0, int(rows), int(cols)) if cols == self.basis.shape[1] else None
        return References(
            np.stack(out),
            self.basis if first else None,
            first,
            np.asarray(accuracies, dtype=np.float64),
            size=int(size),
            # round 0 of an i.i.d. partition: the anchor's draws are an honest update's law
            fresh=round_index == 0 and cfg.partition == "iid",
            iid=cfg.partition == "iid",
        )
