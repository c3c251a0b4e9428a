"""Splitting the training set among clients by type (Section 5, Table 1), deterministic by seed.

Client (i, j) is the j-th client of type i; its partition id is Σ_{t<i} N_t + j. Each holds D_i
samples: i.i.d. (a seeded permutation cut into consecutive blocks) or label-skewed as in the
paper's CIFAR-10 setup (type 1 one class, type 2 five, type 3 all ten; classes rotate across
clients). While Σ N_i·D_i fits the training set the blocks are disjoint. Beyond it (a simulated
market of thousands of clients on Fashion-MNIST's 60,000 samples), ``shards="reuse"`` (the
default) continues the blocks on a fresh seeded permutation of the set, pass after pass: shards
then overlap across clients, so the clients' data sets are no longer independent draws (see
docs/training.md for what that does to Eq. 3); ``shards="disjoint"`` refuses instead.
Only the requested clients' shards are materialised (:func:`shard_indices`): memory grows with the
coalition, not with the population. :func:`round_sample` draws the clients of one FedAvg round when
cross-device sampling is on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from mots.training.config import TrainConfig

IntArray = npt.NDArray[np.int64]
PermutationOfPass = Callable[[int], IntArray]


class PartitionError(ValueError):
    """The data set cannot supply the requested partition (too few samples or classes)."""


def partition_id(type_index: int, client_index: int, counts: Sequence[int]) -> int:
    """Global index of client ``client_index`` of type ``type_index`` (types in order)."""
    if not 0 <= type_index < len(counts):
        raise ValueError(f"type_index must lie in 0..{len(counts) - 1}, got {type_index}")
    if not 0 <= client_index < counts[type_index]:
        raise ValueError(
            f"client_index must lie in 0..{counts[type_index] - 1} for type {type_index + 1}, "
            f"got {client_index}"
        )
    return int(sum(counts[:type_index])) + client_index


def coalition_ids(participants: Sequence[int], counts: Sequence[int]) -> list[tuple[int, int]]:
    """(type, client) of the participants of K: the first K_i clients of each type."""
    return [(i, j) for i, k in enumerate(participants) for j in range(int(k)) if j < counts[i]]


def _take(
    starts: IntArray, lengths: IntArray, pool_size: int, permutation: PermutationOfPass
) -> list[IntArray]:
    """Blocks [start, start + length) of the stream "pass 0, pass 1, …", pass m being
    ``permutation(m)`` (a permutation of a pool of ``pool_size``); only the passes touched are drawn."""
    if lengths.size == 0:
        return []
    first_out = np.cumsum(lengths) - lengths
    pos = np.arange(int(lengths.sum()), dtype=np.int64) + np.repeat(starts - first_out, lengths)
    out = np.empty_like(pos)
    passes = pos // pool_size
    for m in np.unique(passes):
        hit = passes == m
        out[hit] = permutation(int(m))[pos[hit] - m * pool_size]
    return np.split(out, np.cumsum(lengths)[:-1])


def _clients(counts: Sequence[int], wanted: Sequence[tuple[int, int]]) -> IntArray:
    """Partition ids of the (type, client) pairs, each checked against N_i."""
    return np.array([partition_id(i, j, counts) for i, j in wanted], dtype=np.int64)


def _iid(
    n_samples: int,
    sizes: Sequence[int],
    counts: Sequence[int],
    seed: int,
    wanted: Sequence[tuple[int, int]],
    reuse: bool,
) -> list[IntArray]:
    size_of = np.repeat(np.asarray(sizes, dtype=np.int64), np.asarray(counts, dtype=np.int64))
    need = int(size_of.sum())
    if need > n_samples and not reuse:
        raise PartitionError(
            f"partition: the clients need {need} samples (Σ N_i·D_i), the training set has "
            f"{n_samples}; lower sizes or counts, or let shards overlap (shards='reuse')"
        )
    if int(max(sizes)) > n_samples:
        raise PartitionError(
            f"partition: a client's D_i = {int(max(sizes))} exceeds the training set's "
            f"{n_samples} samples"
        )
    starts = np.concatenate([[0], np.cumsum(size_of)[:-1]]).astype(np.int64)
    ids = _clients(counts, wanted)

    def permutation(m: int) -> IntArray:
        key = [seed, 0x1D] if m == 0 else [seed, 0x1D, m]
        return np.random.default_rng(key).permutation(n_samples).astype(np.int64)

    return _take(starts[ids], size_of[ids], n_samples, permutation)


def iid_partitions(
    n_samples: int, sizes: Sequence[int], counts: Sequence[int], seed: int, reuse: bool = False
) -> list[list[IntArray]]:
    """I.i.d. index blocks: [type][client] → D_i indices, consecutive blocks of a seeded
    permutation (disjoint while Σ N_i·D_i ≤ n_samples; beyond it, with ``reuse``, further passes)."""
    wanted = [(i, j) for i, n in enumerate(counts) for j in range(int(n))]
    flat = _iid(n_samples, sizes, counts, seed, wanted, reuse)
    return _regroup(flat, counts)


def _regroup(flat: list[IntArray], counts: Sequence[int]) -> list[list[IntArray]]:
    out: list[list[IntArray]] = []
    pos = 0
    for n in counts:
        out.append(flat[pos : pos + int(n)])
        pos += int(n)
    return out


def _skew_plan(
    sizes: Sequence[int],
    counts: Sequence[int],
    classes_per_type: Sequence[int],
    offset: int,
    num_classes: int,
) -> tuple[IntArray, IntArray, IntArray]:
    """(N, W) arrays over every client and slot k < c_i (W = max c_i; class −1 pads): the slot's
    class (offset + j·c_i + k) mod C, its share of D_i (D_i/c_i, the remainder to the first slots),
    and where in that class's stream it starts (clients take their shares in partition order)."""
    width = max(int(c) for c in classes_per_type)
    cls_rows, share_rows = [], []
    for d, n, ci in zip(sizes, counts, classes_per_type, strict=True):
        j = np.arange(int(n), dtype=np.int64)[:, None]
        k = np.arange(width, dtype=np.int64)[None, :]
        used = k < int(ci)
        cls_rows.append(np.where(used, (offset + j * int(ci) + k) % num_classes, -1))
        share = int(d) // int(ci) + (k < int(d) % int(ci)).astype(np.int64)
        share_rows.append(np.broadcast_to(np.where(used, share, 0), (int(n), width)))
    cls = np.concatenate(cls_rows).astype(np.int64)
    share = np.concatenate(share_rows).astype(np.int64)
    start = np.zeros_like(share)
    for c in range(num_classes):
        mine = np.where(cls == c, share, 0).ravel()
        before = (np.cumsum(mine) - mine).reshape(share.shape)
        start = np.where(cls == c, before, start)
    return cls, share, start


def _label_skew(
    labels: IntArray,
    sizes: Sequence[int],
    counts: Sequence[int],
    classes_per_type: Sequence[int],
    seed: int,
    wanted: Sequence[tuple[int, int]],
    reuse: bool,
    num_classes: int = 10,
) -> list[IntArray]:
    rng = np.random.default_rng([seed, 0x5E])
    first = [
        rng.permutation(np.flatnonzero(labels == c)).astype(np.int64) for c in range(num_classes)
    ]
    offset = int(rng.integers(num_classes))
    cls, share, start = _skew_plan(sizes, counts, classes_per_type, offset, num_classes)
    for c in range(num_classes):
        need = int(share[cls == c].sum())
        if need > len(first[c]) and (not reuse or len(first[c]) == 0):
            raise PartitionError(
                f"partition: class {c} has {len(first[c])} training samples, the label-skewed "
                f"clients need {need} of it; lower sizes, or let shards overlap (shards='reuse')"
            )
    ids = _clients(counts, wanted)
    cls, share, start = cls[ids], share[ids], start[ids]
    blocks: dict[tuple[int, int], IntArray] = {}
    for c in range(num_classes):
        rows, slots = np.nonzero(cls == c)
        if rows.size == 0:
            continue
        taken = _take(
            start[rows, slots], share[rows, slots], len(first[c]), _class_pass(seed, c, first[c])
        )
        blocks.update({(int(r), int(k)): b for r, k, b in zip(rows, slots, taken, strict=True)})
    return [
        np.concatenate([blocks[(r, k)] for k in range(int((cls[r] >= 0).sum()))])
        for r in range(len(ids))
    ]


def _class_pass(seed: int, c: int, pool: IntArray) -> PermutationOfPass:
    """Class c's pass m: the first pass is the pool drawn with the others, later ones fresh."""

    def permutation(m: int) -> IntArray:
        if m == 0:
            return pool
        return np.random.default_rng([seed, 0x5E, c, m]).permutation(pool).astype(np.int64)

    return permutation


def label_skew_partitions(
    labels: IntArray,
    sizes: Sequence[int],
    counts: Sequence[int],
    classes_per_type: Sequence[int],
    seed: int,
    num_classes: int = 10,
    reuse: bool = False,
) -> list[list[IntArray]]:
    """Non-i.i.d. blocks: client (i, j) holds D_i samples spread evenly over classes_per_type[i]
    classes, (offset + j·c_i + k) mod C for k < c_i, taken in turn from each class's seeded
    permutation (disjoint while every class lasts; beyond it, with ``reuse``, further passes)."""
    wanted = [(i, j) for i, n in enumerate(counts) for j in range(int(n))]
    flat = _label_skew(labels, sizes, counts, classes_per_type, seed, wanted, reuse, num_classes)
    return _regroup(flat, counts)


def shard_indices(
    labels: IntArray, config: TrainConfig, clients: Sequence[tuple[int, int]]
) -> list[IntArray]:
    """The training indices of the given (type, client) pairs only, as ``config`` prescribes.

    Equal to picking them out of :func:`client_partitions`, without building the others' shards.
    """
    reuse = config.shards == "reuse"
    if config.partition == "iid":
        return _iid(len(labels), config.sizes, config.type_counts, config.seed, clients, reuse)
    return _label_skew(
        labels,
        config.sizes,
        config.type_counts,
        config.type_classes,
        config.seed,
        clients,
        reuse,
    )


def client_partitions(labels: IntArray, config: TrainConfig) -> list[list[IntArray]]:
    """All clients' training indices, [type][client], as ``config`` prescribes."""
    wanted = [(i, j) for i, n in enumerate(config.type_counts) for j in range(int(n))]
    return _regroup(shard_indices(labels, config, wanted), config.type_counts)


def round_sample(n_participants: int, config: TrainConfig, round_index: int) -> IntArray:
    """Positions (sorted) of the coalition's participants that train in FedAvg round ``round_index``.

    Cross-device sampling as Flower's FedAvg does it: max(⌊K·fraction_train⌋, min_train_clients)
    participants (at most K), drawn uniformly without replacement by a generator seeded with
    (seed, round); every participant when fraction_train = 1 (the default).
    """
    if n_participants < 1:
        raise ValueError(f"n_participants must be ≥ 1, got {n_participants}")
    if round_index < 0:
        raise ValueError(f"round_index must be ≥ 0, got {round_index}")
    m = min(
        n_participants,
        max(int(n_participants * config.fraction_train), config.min_train_clients),
    )
    if m == n_participants:
        return np.arange(n_participants, dtype=np.int64)
    rng = np.random.default_rng([config.seed, round_index, 0xC11E])
    return np.sort(rng.choice(n_participants, size=m, replace=False)).astype(np.int64)


def evaluation_indices(n_test: int, subset: int | None) -> IntArray:
    """The evaluation set: all test samples, or a fixed (seed-independent) subset of them."""
    if subset is None or subset >= n_test:
        return np.arange(n_test, dtype=np.int64)
    return np.sort(np.random.default_rng(0x7E57).permutation(n_test)[:subset]).astype(np.int64)
