"""Partitions by type (Table 1 sizes): i.i.d. and the paper's label skew, deterministic by seed."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mots.training.config import TrainConfig
from mots.training.partition import (
    PartitionError,
    client_partitions,
    coalition_ids,
    evaluation_indices,
    partition_id,
    round_sample,
    shard_indices,
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


def test_too_many_samples_refused_when_shards_must_be_disjoint() -> None:
    """With shards="disjoint" a partition the training set cannot supply says how many were needed;
    a single client larger than the whole set is refused either way."""
    with pytest.raises(PartitionError, match="need 60010"):
        client_partitions(LABELS, TrainConfig(sizes=[6001], counts=[10], shards="disjoint"))
    with pytest.raises(PartitionError, match=r"class \d has 6000 training samples"):
        client_partitions(
            LABELS,
            TrainConfig(partition="label_skew", sizes=[6001], counts=[1], shards="disjoint"),
        )
    with pytest.raises(PartitionError, match="D_i = 60001 exceeds"):
        client_partitions(LABELS, TrainConfig(sizes=[60001], counts=[1]))


def test_reuse_beyond_the_data_set_balances_every_sample() -> None:
    """N = 1,000 with the paper's sizes needs 130,000 samples of 60,000: every client gets D_i
    samples, the first 60,000 of the stream are the disjoint split, and each sample is used ⌊q⌋
    or ⌈q⌉ times (q = 130,000/60,000): further passes, not a bias towards some samples."""
    cfg = TrainConfig(counts=(500, 250, 250))
    parts = client_partitions(LABELS, cfg)
    assert [len(p) for p in parts] == [500, 250, 250]
    assert {len(b) for b in parts[0]} == {50} and {len(b) for b in parts[2]} == {300}
    uses = np.bincount(np.concatenate([b for p in parts for b in p]), minlength=len(LABELS))
    assert uses.sum() == 130_000 and set(np.unique(uses).tolist()) == {2, 3}
    small = client_partitions(LABELS, TrainConfig())  # the demo's 20 clients: unchanged, disjoint
    np.testing.assert_array_equal(small[0][3], parts[0][3])


def test_label_skew_reuse_keeps_each_clients_classes() -> None:
    """Label skew beyond a class's samples continues on a fresh pass of that class: each client
    still holds its classes evenly, and every class's samples are used evenly."""
    cfg = TrainConfig(partition="label_skew", sizes=(1000, 2250, 5750), counts=(20, 10, 10))
    parts = client_partitions(LABELS, cfg)
    for t, n_classes in enumerate((1, 5, 10)):
        for block in parts[t]:
            counts = np.bincount(LABELS[block], minlength=10)
            assert len(block) == cfg.sizes[t] and (counts > 0).sum() == n_classes
            assert counts.max() - counts[counts > 0].min() <= 1
    uses = np.bincount(np.concatenate([b for p in parts for b in p]), minlength=len(LABELS))
    for c in range(10):
        mine = uses[np.equal(LABELS, c)]
        assert mine.max() - mine.min() <= 1


@settings(max_examples=40, deadline=None)
@given(
    partition=st.sampled_from(["iid", "label_skew"]),
    counts=st.lists(st.integers(1, 40), min_size=1, max_size=4),
    size=st.integers(1, 4000),
    seed=st.integers(0, 5),
    data=st.data(),
)
def test_shards_of_some_clients_equal_the_full_partitions(
    partition: str, counts: list[int], size: int, seed: int, data: st.DataObject
) -> None:
    """shard_indices for any clients equals picking them from client_partitions (both regimes)."""
    sizes = [size * (i + 1) for i in range(len(counts))]
    cfg = TrainConfig(partition=partition, sizes=sizes, counts=counts, seed=seed)  # type: ignore[arg-type]
    everyone = [(i, j) for i, n in enumerate(counts) for j in range(n)]
    some = data.draw(st.lists(st.sampled_from(everyone), max_size=6))
    full = client_partitions(LABELS, cfg)
    for (i, j), got in zip(some, shard_indices(LABELS, cfg, some), strict=True):
        np.testing.assert_array_equal(got, full[i][j])


def test_round_sample_as_flower_samples() -> None:
    """max(⌊K·fraction⌋, min) participants per round, distinct, seeded by round; all by default."""
    np.testing.assert_array_equal(round_sample(7, TrainConfig(), 3), np.arange(7))
    cfg = TrainConfig(fraction_train=0.1, min_train_clients=2)
    picks = [round_sample(100, cfg, r) for r in range(5)]
    assert all(len(p) == 10 and len(set(p.tolist())) == 10 for p in picks)
    assert all(np.all(np.diff(p) > 0) and p.max() < 100 for p in picks)
    np.testing.assert_array_equal(picks[2], round_sample(100, cfg, 2))
    assert len({tuple(p.tolist()) for p in picks}) == 5
    assert len(round_sample(5, cfg, 0)) == 2 and len(round_sample(1, cfg, 0)) == 1
    with pytest.raises(ValueError, match="n_participants"):
        round_sample(0, cfg, 0)


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
