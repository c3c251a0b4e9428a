"""One participant's local update (Section 5): E SGD steps of batch size b at rate η0/(1+r).

Every engine (in process, the Flower ClientApp, the edge trainer) calls :func:`train_local` with
the mini-batches of :func:`batch_indices`, a function of (seed, round, partition id) only, so the
same coalition trains to the same model whichever engine runs it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch
from torch import nn
from torch.nn import functional as F

from mots.training.config import TrainConfig
from mots.training.datasets import Dataset, load_dataset, to_float
from mots.training.partition import partition_id, shard_indices

IntArray = npt.NDArray[np.int64]


@contextmanager
def torch_threads(n: int = 1) -> Iterator[None]:
    """Run with ``n`` intra-op threads: small models on a shared 2-core host are 20-40x faster
    single-threaded than with OpenMP threads spinning against other processes."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def batch_indices(
    seed: int, round_index: int, pid: int, data_size: int, steps: int, batch: int
) -> IntArray:
    """(E, b) indices into a client's D samples: each step a uniform draw without replacement
    (with replacement only when b > D)."""
    rng = np.random.default_rng([seed, round_index, pid, 0xBA7C])
    if batch > data_size:
        return rng.integers(0, data_size, size=(steps, batch), dtype=np.int64)
    keys = rng.random((steps, data_size))
    return np.argpartition(keys, batch - 1, axis=1)[:, :batch].astype(np.int64)


@dataclass(frozen=True)
class ClientData:
    """A client's local training set as tensors (pixels in [0, 1])."""

    x: torch.Tensor
    y: torch.Tensor
    pid: int

    @property
    def size(self) -> int:
        """D_k."""
        return int(self.y.shape[0])


def client_data(
    config: TrainConfig, type_index: int, client_index: int, dataset: Dataset | None = None
) -> ClientData:
    """Client (i, j)'s partition of the training set, as ``config`` prescribes."""
    ds = dataset if dataset is not None else load_dataset(config.dataset, config.data_dir)
    pid = partition_id(type_index, client_index, config.type_counts)
    idx = shard_indices(ds.y_train, config, [(type_index, client_index)])[0]
    return ClientData(
        torch.from_numpy(to_float(ds.x_train[idx])), torch.from_numpy(ds.y_train[idx]), pid
    )


@dataclass(frozen=True)
class LocalResult:
    """What a local update reports besides the weights."""

    train_loss: float
    seconds: float
    samples: int


def train_local(model: nn.Module, data: ClientData, indices: IntArray, lr: float) -> LocalResult:
    """Plain SGD on ``model`` in place over the mini-batches ``indices`` (E, b); mean batch loss."""
    idx = torch.from_numpy(indices)
    params = [p for p in model.parameters()]
    model.train()
    total = torch.zeros(())
    start = time.perf_counter()
    for step in range(idx.shape[0]):
        b = idx[step]
        loss = F.cross_entropy(model(data.x[b]), data.y[b])
        grads = torch.autograd.grad(loss, params)
        with torch.no_grad():
            for p, g in zip(params, grads, strict=True):
                p.add_(g, alpha=-lr)
        total += loss.detach()
    seconds = time.perf_counter() - start
    return LocalResult(float(total) / max(1, idx.shape[0]), seconds, int(idx.numel()))


def evaluate(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, chunk: int = 4096
) -> tuple[float, float]:
    """(mean cross-entropy, accuracy) of ``model`` on (x, y): the generalization error ε."""
    model.eval()
    loss, correct = 0.0, 0
    with torch.no_grad():
        for s in range(0, int(y.shape[0]), chunk):
            logits = model(x[s : s + chunk])
            loss += float(F.cross_entropy(logits, y[s : s + chunk], reduction="sum"))
            correct += int((logits.argmax(1) == y[s : s + chunk]).sum())
    n = max(1, int(y.shape[0]))
    return loss / n, correct / n
