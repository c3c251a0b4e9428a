"""The in-process engine: FedAvg over the coalition's clients in this process (no Flower).

Logistic regression runs a chunk of clients at once with batched matrix products (one ``bmm`` per
SGD step for the chunk); the CNN, or ``vectorised=False``, loops over clients with
:func:`mots.training.local.train_local`, the same update the Flower ClientApp runs. Both paths
combine each round with the Flower strategy's own :class:`~mots.training.fedavg.RoundAggregate`
(its weights, its streamed float64 mean), adding the clients one at a time in the round's order.

Memory does not grow with the coalition size K beyond index arrays: a client's data stays in the
shared uint8 training set as a shard of indices, the vectorised engine gathers the mini-batches of
at most :data:`CHUNK_BYTES` worth of clients at a time (K ≤ 14 at E = 20, b = 32 on 28×28 images)
and adds each chunk's models to the round's aggregate, and the loop engine holds one client's data
(all of them when they fit in CHUNK_BYTES); both hold the aggregate's one running average. As the
clients are added in the same order whatever the chunks, the chunks do not change the result.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt
import torch
from torch.nn import functional as F

from mots.training.artifacts import ArtifactWriter, TrainingResult, round_metadata
from mots.training.config import TrainConfig
from mots.training.datasets import Dataset, load_dataset, to_float
from mots.training.fedavg import RoundAggregate, learning_rate
from mots.training.local import ClientData, batch_indices, evaluate, torch_threads, train_local
from mots.training.models import build_model, get_weights, set_weights, weight_names
from mots.training.partition import (
    coalition_ids,
    evaluation_indices,
    partition_id,
    round_sample,
    shard_indices,
)
from mots.training.progress import RoundProgress

FloatArray = npt.NDArray[np.float32]
IntArray = npt.NDArray[np.int64]
UInt8Array = npt.NDArray[np.uint8]

CHUNK_BYTES = 64 * 2**20
"""The vectorised engine gathers at most this many bytes of float32 mini-batches at once."""


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
RemovedCheck = Callable[[int], Collection[int]]
Removed = Callable[[], Collection[tuple[int, int]]]
"""The participants (type i, index j) removed from the round so far (revoked or departed)."""
"""Asked before round r: the participants (coalition order) removed from the round by then."""


def _present(members: IntArray, removed: RemovedCheck | None, r: int) -> IntArray:
    """Round r's sample less the participants removed (revoked or departed) by now: their
    updates are not trained or averaged from this round on (issue 24)."""
    if removed is None:
        return members
    gone = list(removed(r))
    return members[~np.isin(members, gone)] if gone else members


@dataclass(frozen=True)
class Federation:
    """The coalition's shards (indices into the shared training set) and the evaluation set."""

    x_train: UInt8Array
    y_train: IntArray
    shards: list[IntArray]
    pids: list[int]
    x_test: torch.Tensor
    y_test: torch.Tensor
    input_shape: tuple[int, int, int]
    num_classes: int

    @property
    def sizes(self) -> list[int]:
        """D_k of each participant, in coalition order."""
        return [int(s.size) for s in self.shards]

    def client(self, k: int) -> ClientData:
        """Participant k's local data set as tensors (built on demand, one client at a time)."""
        idx = self.shards[k]
        return ClientData(
            torch.from_numpy(to_float(self.x_train[idx])),
            torch.from_numpy(self.y_train[idx]),
            self.pids[k],
        )


def prepare(
    participants: Sequence[int], config: TrainConfig, dataset: Dataset | None = None
) -> Federation:
    """The coalition's shards of the training set (only theirs) and the test subset."""
    k = config.check_participants(list(participants))
    ds = dataset if dataset is not None else load_dataset(config.dataset, config.data_dir)
    ids = coalition_ids(k, config.type_counts)
    t = evaluation_indices(len(ds.y_test), config.test_subset)
    return Federation(
        ds.x_train,
        ds.y_train,
        shard_indices(ds.y_train, config, ids),
        [partition_id(i, j, config.type_counts) for i, j in ids],
        torch.from_numpy(to_float(ds.x_test[t])),
        torch.from_numpy(ds.y_test[t]),
        ds.input_shape,
        ds.num_classes,
    )


def client_bytes(config: TrainConfig, features: int, classes: int) -> int:
    """Host memory one client of a chunk holds while it trains: its E·b gathered inputs (uint8,
    their float32 copy and the scaled float32 result: 9 bytes a pixel) and three float32 copies
    of the model (its weights, a step's gradient, and the update's product)."""
    return config.local_steps * config.batch_size * features * 9 + 3 * classes * features * 4


def _chunks(members: IntArray, config: TrainConfig, features: int, classes: int) -> list[IntArray]:
    """``members`` cut so that a chunk's clients hold at most CHUNK_BYTES (:func:`client_bytes`):
    with small local data the model copies, not the inputs, dominate (E = 1, b = 8: 94 KB of
    model against 56 KB of inputs per client)."""
    size = max(1, CHUNK_BYTES // client_bytes(config, features, classes))
    return [members[s : s + size] for s in range(0, members.size, size)]


def _local_sgd(
    fed: Federation,
    config: TrainConfig,
    r: int,
    chunk: IntArray,
    start: tuple[torch.Tensor, torch.Tensor],
    lr: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """E SGD steps of logistic regression for every client of ``chunk`` at once (batched over k)."""
    gidx = np.stack(
        [
            fed.shards[k][
                batch_indices(
                    config.seed,
                    r,
                    fed.pids[k],
                    int(fed.shards[k].size),
                    config.local_steps,
                    config.batch_size,
                )
            ]
            for k in chunk
        ]
    )
    xb = torch.from_numpy(to_float(fed.x_train[gidx])).flatten(3)
    yb = torch.from_numpy(fed.y_train[gidx])
    gw, gb = start
    wk = gw.expand(len(chunk), *gw.shape).clone()
    bk = gb.expand(len(chunk), *gb.shape).clone()
    eye = torch.eye(fed.num_classes)
    bsz = xb.shape[2]
    for s in range(config.local_steps):
        x_s = xb[:, s]
        logits = torch.baddbmm(bk.unsqueeze(1), x_s, wk.transpose(1, 2))
        g = (torch.softmax(logits, dim=-1) - eye[yb[:, s]]) / bsz
        wk -= lr * torch.bmm(g.transpose(1, 2), x_s)
        bk -= lr * g.sum(1)
    return wk, bk


def _vectorised_rounds(
    fed: Federation,
    config: TrainConfig,
    on_round: RoundCallback | None,
    removed: RemovedCheck | None = None,
) -> list[RoundOutcome]:
    """Logistic regression, a chunk of clients at a time: W_k ← W_k − η ∇ CE, batched over k."""
    model = build_model(
        "logistic", fed.input_shape, fed.num_classes, zero_init=config.zero_init, seed=config.seed
    )
    names = weight_names(model)
    w_init, b_init = (torch.from_numpy(a) for a in get_weights(model))
    features = int(np.prod(fed.input_shape))
    sizes = np.asarray(fed.sizes)
    x_test = fed.x_test.flatten(1)
    gw, gb = w_init.clone(), b_init.clone()
    out: list[RoundOutcome] = []
    for r in range(config.rounds):
        start = time.perf_counter()
        lr = learning_rate(config.lr, r)
        members = _present(round_sample(len(fed.shards), config, r), removed, r)
        if len(members):  # else everyone was removed: the model is kept
            combined = RoundAggregate(sizes[members].tolist(), config.aggregation)
            for chunk in _chunks(members, config, features, fed.num_classes):
                wk, bk = _local_sgd(fed, config, r, chunk, (gw, gb), lr)
                for w, b in zip(wk.numpy(), bk.numpy(), strict=True):  # views, no copy
                    combined.add([w, b])
            gw, gb = (torch.from_numpy(a) for a in combined.result())
        with torch.no_grad():
            logits = torch.addmm(gb, x_test, gw.T)
            eps = float(F.cross_entropy(logits, fed.y_test))
            acc = float((logits.argmax(1) == fed.y_test).float().mean())
        outcome = RoundOutcome(
            r,
            eps,
            acc,
            time.perf_counter() - start,
            len(members),
            [gw.numpy().copy(), gb.numpy().copy()],
            names,
        )
        out.append(outcome)
        if on_round is not None:
            on_round(outcome)
    return out


def _loop_rounds(
    fed: Federation,
    config: TrainConfig,
    on_round: RoundCallback | None,
    removed: RemovedCheck | None = None,
) -> list[RoundOutcome]:
    """Any model: each client in turn trains a copy with train_local, and the round's models are
    combined by :class:`~mots.training.fedavg.RoundAggregate`, the Flower strategy's code (one
    model held at a time)."""
    global_model = build_model(
        config.model, fed.input_shape, fed.num_classes, zero_init=config.zero_init, seed=config.seed
    )
    local_model = build_model(config.model, fed.input_shape, fed.num_classes, seed=config.seed)
    names = weight_names(global_model)
    sizes = np.asarray(fed.sizes)
    features = int(np.prod(fed.input_shape))
    kept: list[ClientData] | None = None
    if int(sizes.sum()) * features * 4 <= CHUNK_BYTES:  # small coalitions: build the data once
        kept = [fed.client(k) for k in range(len(fed.shards))]
    current = get_weights(global_model)
    out: list[RoundOutcome] = []
    for r in range(config.rounds):
        start = time.perf_counter()
        members = _present(round_sample(len(fed.shards), config, r), removed, r)
        if len(members):  # else everyone was removed: the model is kept
            combined = RoundAggregate(sizes[members].tolist(), config.aggregation)
            lr = learning_rate(config.lr, r)
            for k in members:
                c = kept[int(k)] if kept is not None else fed.client(int(k))
                b = batch_indices(
                    config.seed, r, c.pid, c.size, config.local_steps, config.batch_size
                )
                set_weights(local_model, current)
                train_local(local_model, c, b, lr)
                combined.add(get_weights(local_model))
            current = combined.result()
        set_weights(global_model, current)
        eps, acc = evaluate(global_model, fed.x_test, fed.y_test)
        outcome = RoundOutcome(
            r, eps, acc, time.perf_counter() - start, len(members), current, names
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
    removed: RemovedCheck | None = None,
) -> list[RoundOutcome]:
    """Train coalition K for ``config.rounds`` rounds; one :class:`RoundOutcome` per round.
    ``removed`` (asked before each round) names participants, by coalition index, left out of
    that round and the later ones."""
    fed = prepare(participants, config, dataset)
    use_vec = config.model == "logistic" if vectorised is None else vectorised
    if use_vec and config.model != "logistic":
        raise ValueError("vectorised: only the logistic model has a batched in-process engine")
    with torch_threads(1):
        if use_vec:
            return _vectorised_rounds(fed, config, on_round, removed)
        return _loop_rounds(fed, config, on_round, removed)


class _Removals:
    """Asks ``removed`` before each in-process round, maps (i, j) to the coalition's order and
    remembers the round each one left in (issue 24: their updates are not averaged)."""

    def __init__(self, participants: tuple[int, ...], config: TrainConfig, removed: Removed):
        self.ids = coalition_ids(participants, config.type_counts)
        self.removed = removed
        self.left: dict[tuple[int, int], int] = {}

    def __call__(self, r: int) -> list[int]:
        for ij in self.removed():
            self.left.setdefault(ij, r)
        return [k for k, ij in enumerate(self.ids) if ij in self.left]

    def status(self) -> list[dict[str, object]]:
        """Each participant's record: verified, or dropped in the round it was removed in."""
        return [
            {"type_index": i, "client_index": j, "status": "verified", "reason": ""}
            if (i, j) not in self.left
            else {
                "type_index": i,
                "client_index": j,
                "status": "dropped",
                "left_in_round": self.left[(i, j)],
                "reason": "removed (revoked or departed) while training",
            }
            for i, j in self.ids
        ]


def train_inprocess(
    participants: tuple[int, ...],
    config: TrainConfig,
    report: Callable[[RoundProgress], None] | None,
    artifact_dir: Path | None,
    removed: Removed | None = None,
) -> TrainingResult:
    """Train coalition K in this process (:func:`run_inprocess`), save every round's model as an
    artifact under ``artifact_dir`` (if given), report each round to ``report``, and leave out
    from their round on the participants ``removed`` names: the in-process engine's result, as
    :func:`mots.training.deployment.train_on_federation` is the deployment engine's."""
    ds = load_dataset(config.dataset, config.data_dir)
    writer = ArtifactWriter(artifact_dir) if artifact_dir is not None else None
    last: list[tuple[Path, str]] = []

    def on_round(o: RoundOutcome) -> None:
        if writer is not None:
            meta = round_metadata(
                config, participants, o.round, o.epsilon, o.accuracy, ds.input_shape, "inprocess"
            )
            last[:] = [writer.write(o.names, o.weights, meta)]
        if report is not None:
            report(
                RoundProgress(
                    o.round, config.rounds, o.clients_done, sum(participants), o.epsilon, o.seconds
                )
            )

    start = time.perf_counter()
    gone = _Removals(participants, config, removed) if removed is not None else None
    outcomes = run_inprocess(participants, config, on_round=on_round, dataset=ds, removed=gone)
    path, digest = last[0] if last else (None, None)
    completed = list(participants)
    for i, _ in gone.left if gone is not None else ():
        completed[i] -= 1
    return TrainingResult(
        epsilon=outcomes[-1].epsilon,
        losses=[o.epsilon for o in outcomes],
        round_seconds=[o.seconds for o in outcomes],
        artifact_path=path,
        artifact_sha256=digest,
        metadata={
            "engine": "inprocess",
            "participants": list(participants),
            "completed_participants": completed,
            **({"participant_status": gone.status()} if gone is not None and gone.left else {}),
            "accuracy": outcomes[-1].accuracy,
            "seconds": time.perf_counter() - start,
            "config": config.model_dump(mode="json"),
        },
        accuracy=outcomes[-1].accuracy,
    )
