"""Splitting the training set among clients by type (Section 5, Table 1), deterministic by seed.

Client (i, j) is the j-th client of type i; its partition id is Σ_{t<i} N_t + j. Each holds D_i
disjoint samples: i.i.d. (a seeded permutation cut into blocks) or label-skewed as in the paper's
CIFAR-10 setup (type 1 one class, type 2 five, type 3 all ten; classes rotate across clients).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from mots.training.config import TrainConfig

IntArray = npt.NDArray[np.int64]


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


def iid_partitions(
    n_samples: int, sizes: Sequence[int], counts: Sequence[int], seed: int
) -> list[list[IntArray]]:
    """Disjoint i.i.d. index blocks: [type][client] → D_i indices of a seeded permutation."""
    need = sum(int(d) * int(n) for d, n in zip(sizes, counts, strict=True))
    if need > n_samples:
        raise PartitionError(
            f"partition: the clients need {need} samples (Σ N_i·D_i), the training set has "
            f"{n_samples}; lower sizes or counts"
        )
    perm = np.random.default_rng([seed, 0x1D]).permutation(n_samples).astype(np.int64)
    out: list[list[IntArray]] = []
    pos = 0
    for d, n in zip(sizes, counts, strict=True):
        blocks = []
        for _ in range(int(n)):
            blocks.append(perm[pos : pos + int(d)])
            pos += int(d)
        out.append(blocks)
    return out


def label_skew_partitions(
    labels: IntArray,
    sizes: Sequence[int],
    counts: Sequence[int],
    classes_per_type: Sequence[int],
    seed: int,
    num_classes: int = 10,
) -> list[list[IntArray]]:
    """Non-i.i.d. blocks: client (i, j) holds D_i samples spread evenly over classes_per_type[i]
    classes, (offset + j·c_i + k) mod C for k < c_i, drawn without replacement per class."""
    rng = np.random.default_rng([seed, 0x5E])
    pools = [
        rng.permutation(np.flatnonzero(labels == c)).astype(np.int64) for c in range(num_classes)
    ]
    used = [0] * num_classes
    offset = int(rng.integers(num_classes))
    out: list[list[IntArray]] = []
    for i, (d, n, c) in enumerate(zip(sizes, counts, classes_per_type, strict=True)):
        blocks = []
        for j in range(int(n)):
            classes = [(offset + j * int(c) + k) % num_classes for k in range(int(c))]
            share = [int(d) // int(c) + (1 if k < int(d) % int(c) else 0) for k in range(int(c))]
            parts = []
            for cls, m in zip(classes, share, strict=True):
                if used[cls] + m > len(pools[cls]):
                    raise PartitionError(
                        f"partition: class {cls} has {len(pools[cls])} training samples, too few "
                        f"for the label-skewed clients (type {i + 1}, client {j}); lower sizes"
                    )
                parts.append(pools[cls][used[cls] : used[cls] + m])
                used[cls] += m
            blocks.append(np.concatenate(parts))
        out.append(blocks)
    return out


def client_partitions(labels: IntArray, config: TrainConfig) -> list[list[IntArray]]:
    """All clients' training indices, [type][client], as ``config`` prescribes."""
    if config.partition == "iid":
        return iid_partitions(len(labels), config.sizes, config.type_counts, config.seed)
    return label_skew_partitions(
        labels, config.sizes, config.type_counts, config.type_classes, config.seed
    )


def evaluation_indices(n_test: int, subset: int | None) -> IntArray:
    """The evaluation set: all test samples, or a fixed (seed-independent) subset of them."""
    if subset is None or subset >= n_test:
        return np.arange(n_test, dtype=np.int64)
    return np.sort(np.random.default_rng(0x7E57).permutation(n_test)[:subset]).astype(np.int64)
