"""Partitions by type (Table 1 sizes): i.i.d. and the paper's label skew, deterministic by seed."""

from __future__ import annotations

import numpy as np
import pytest

from mots.training.config import TrainConfig
from mots.training.partition import (
    PartitionError,
    client_partitions,
    coalition_ids,
    evaluation_indices,
    partition_id,
)

LABELS = np.repeat(np.arange(10), 6000)


def test_iid_disjoint_sizes_and_deterministic() -> None:
    """N_i clients of type i hold D_i samples each, no sample twice; the same seed, the same split."""
    cfg = TrainConfig()
    parts = client_partitions(LABELS, cfg)
    assert [len(p) for p in parts] == [10, 5, 5]
    assert [len(p[0]) for p in parts] == [50, 120, 300]
    flat = np.concatenate([b for p in parts for b in p])
    assert len(flat) == len(set(flat.tolist())) == 10 * 50 + 5 * 120 + 5 * 300
    again = client_partitions(LABELS, cfg)
    np.testing.assert_array_equal(parts[2][4], again[2][4])
    other = client_partitions(LABELS, cfg.model_copy(update={"seed": 1}))
    assert not np.array_equal(parts[0][0], other[0][0])


def test_label_skew_classes_per_type() -> None:
    """Type 1 holds one class, type 2 five, type 3 all ten, evenly; classes rotate over clients."""
    cfg = TrainConfig(partition="label_skew", sizes=[1000, 2250, 5750])
    parts = client_partitions(LABELS, cfg)
    for t, n_classes in enumerate((1, 5, 10)):
        for block in parts[t]:
            counts = np.bincount(LABELS[block], minlength=10)
            assert (counts > 0).sum() == n_classes
            assert counts.max() - counts[counts > 0].min() <= 1
    assert len({int(LABELS[b[0]]) for b in parts[0]}) == 10  # ten type-1 clients, ten classes
    flat = np.concatenate([b for p in parts for b in p])
    assert len(flat) == len(set(flat.tolist())) == 50000


def test_too_many_samples_refused() -> None:
    """A partition the training set cannot supply says how many were needed."""
    with pytest.raises(PartitionError, match="need 60010"):
        client_partitions(LABELS, TrainConfig(sizes=[6001], counts=[10]))


def test_ids_and_coalition() -> None:
    """Partition id Σ_{t<i} N_t + j; the coalition K takes the first K_i clients of each type."""
    assert partition_id(2, 4, (10, 5, 5)) == 19
    with pytest.raises(ValueError, match="client_index"):
        partition_id(1, 5, (10, 5, 5))
    assert coalition_ids([2, 0, 1], (10, 5, 5)) == [(0, 0), (0, 1), (2, 0)]


def test_evaluation_subset_fixed() -> None:
    """The test subset does not depend on the training seed: every coalition sees the same one."""
    a = evaluation_indices(10000, 500)
    assert len(a) == 500 and len(set(a.tolist())) == 500
    np.testing.assert_array_equal(a, evaluation_indices(10000, 500))
    assert len(evaluation_indices(100, None)) == 100
