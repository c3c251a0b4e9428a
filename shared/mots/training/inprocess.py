"""The in-process engine: FedAvg over the coalition's clients in this process (no Flower).

Logistic regression runs all K clients at once with batched matrix products (one ``bmm`` per SGD
step for the whole coalition); the CNN, or ``vectorised=False``, loops over clients with
:func:`mots.training.local.train_local`, the same update the Flower ClientApp runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import torch
from torch.nn import functional as F

from mots.training.config import TrainConfig
from mots.training.datasets import Dataset, load_dataset, to_float
from mots.training.fedavg import aggregate, aggregation_weights, learning_rate
from mots.training.local import ClientData, batch_indices, evaluate, torch_threads, train_local
from mots.training.models import build_model, get_weights, set_weights, weight_names
from mots.training.partition import (
    client_partitions,
    coalition_ids,
    evaluation_indices,
    partition_id,
)

FloatArray = npt.NDArray[np.float32]


@dataclass(frozen=True)
class RoundOutcome:
    """The global model after one round and its test loss ε (and accuracy)."""

    round: int
    epsilon: float
    accuracy: float
    seconds: float
    clients_done: int
    weights: list[FloatArray] = field(repr=False)
    names: list[str] = field(repr=False)


RoundCallback = Callable[[RoundOutcome], None]


@dataclass(frozen=True)
class Federation:
    """The coalition's local data sets and the evaluation set, ready as tensors."""

    clients: list[ClientData]
    x_test: torch.Tensor
    y_test: torch.Tensor
    input_shape: tuple[int, int, int]
    num_classes: int


def prepare(
    participants: Sequence[int], config: TrainConfig, dataset: Dataset | None = None
) -> Federation:
    """Partition the training set and cut out the coalition's clients and the test subset."""
    k = config.check_participants(list(participants))
    ds = dataset if dataset is not None else load_dataset(config.dataset, config.data_dir)
    parts = client_partitions(ds.y_train, config)
    clients = []
    for i, j in coalition_ids(k, config.type_counts):
        idx = parts[i][j]
        clients.append(
            ClientData(
                torch.from_numpy(to_float(ds.x_train[idx])),
                torch.from_numpy(ds.y_train[idx]),
                partition_id(i, j, config.type_counts),
            )
        )
    t = evaluation_indices(len(ds.y_test), config.test_subset)
    return Federation(
        clients,
        torch.from_numpy(to_float(ds.x_test[t])),
        torch.from_numpy(ds.y_test[t]),
        ds.input_shape,
        ds.num_classes,
    )


def _client_batches(fed: Federation, config: TrainConfig, r: int) -> list[npt.NDArray[np.int64]]:
    return [
        batch_indices(config.seed, r, c.pid, c.size, config.local_steps, config.batch_size)
        for c in fed.clients
    ]


def _vectorised_rounds(
    fed: Federation, config: TrainConfig, on_round: RoundCallback | None
) -> list[RoundOutcome]:
    """Logistic regression for all clients at once: W_k ← W_k − η ∇ CE, batched over k."""
    model = build_model(
        "logistic", fed.input_shape, fed.num_classes, zero_init=config.zero_init, seed=config.seed
    )
    names = weight_names(model)
    w_init, b_init = (torch.from_numpy(a) for a in get_weights(model))
    weights = torch.as_tensor(
        aggregation_weights([c.size for c in fed.clients], config.aggregation), dtype=torch.float32
    )
    n_k = len(fed.clients)
    xs = [c.x.flatten(1) for c in fed.clients]
    x_test = fed.x_test.flatten(1)
    gw, gb = w_init.clone(), b_init.clone()
    eye = torch.eye(fed.num_classes)
    out: list[RoundOutcome] = []
    for r in range(config.rounds):
        start = time.perf_counter()
        lr = learning_rate(config.lr, r)
        batches = _client_batches(fed, config, r)
        xb = torch.stack([x[torch.from_numpy(b)] for x, b in zip(xs, batches, strict=True)])
        yb = torch.stack(
            [c.y[torch.from_numpy(b)] for c, b in zip(fed.clients, batches, strict=True)]
        )
        wk = gw.expand(n_k, *gw.shape).clone()
        bk = gb.expand(n_k, *gb.shape).clone()
        bsz = xb.shape[2]
        for s in range(config.local_steps):
            x_s = xb[:, s]
            logits = torch.baddbmm(bk.unsqueeze(1), x_s, wk.transpose(1, 2))
            g = (torch.softmax(logits, dim=-1) - eye[yb[:, s]]) / bsz
            wk -= lr * torch.bmm(g.transpose(1, 2), x_s)
            bk -= lr * g.sum(1)
        gw = torch.einsum("k,kij->ij", weights, wk)
        gb = weights @ bk
        with torch.no_grad():
            logits = torch.addmm(gb, x_test, gw.T)
            eps = float(F.cross_entropy(logits, fed.y_test))
            acc = float((logits.argmax(1) == fed.y_test).float().mean())
        outcome = RoundOutcome(
            r,
            eps,
            acc,
            time.perf_counter() - start,
            n_k,
            [gw.numpy().copy(), gb.numpy().copy()],
            names,
        )
        out.append(outcome)
        if on_round is not None:
            on_round(outcome)
    return out


def _loop_rounds(
    fed: Federation, config: TrainConfig, on_round: RoundCallback | None
) -> list[RoundOutcome]:
    """Any model: each client trains a copy with train_local, then FedAvg aggregates."""
    global_model = build_model(
        config.model, fed.input_shape, fed.num_classes, zero_init=config.zero_init, seed=config.seed
    )
    local_model = build_model(config.model, fed.input_shape, fed.num_classes, seed=config.seed)
    names = weight_names(global_model)
    weights = aggregation_weights([c.size for c in fed.clients], config.aggregation)
    current = get_weights(global_model)
    out: list[RoundOutcome] = []
    for r in range(config.rounds):
        start = time.perf_counter()
        lr = learning_rate(config.lr, r)
        updates = []
        for c, b in zip(fed.clients, _client_batches(fed, config, r), strict=True):
            set_weights(local_model, current)
            train_local(local_model, c, b, lr)
            updates.append(get_weights(local_model))
        current = aggregate(updates, weights)
        set_weights(global_model, current)
        eps, acc = evaluate(global_model, fed.x_test, fed.y_test)
        outcome = RoundOutcome(
            r, eps, acc, time.perf_counter() - start, len(fed.clients), current, names
        )
        out.append(outcome)
        if on_round is not None:
            on_round(outcome)
    return out


def run_inprocess(
    participants: Sequence[int],
    config: TrainConfig,
    *,
    on_round: RoundCallback | None = None,
    vectorised: bool | None = None,
    dataset: Dataset | None = None,
) -> list[RoundOutcome]:
    """Train coalition K for ``config.rounds`` rounds; one :class:`RoundOutcome` per round."""
    fed = prepare(participants, config, dataset)
    use_vec = config.model == "logistic" if vectorised is None else vectorised
    if use_vec and config.model != "logistic":
        raise ValueError("vectorised: only the logistic model has a batched in-process engine")
    with torch_threads(1):
        if use_vec:
            return _vectorised_rounds(fed, config, on_round)
        return _loop_rounds(fed, config, on_round)
