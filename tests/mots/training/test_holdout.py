"""The server's holdout: training samples outside every client's partition, anchor and validation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mots.training.config import TrainConfig
from mots.training.datasets import load_dataset
from mots.training.holdout import Holdout, holdout_indices
from mots.training.models import build_model, get_weights
from mots.training.partition import client_partitions, evaluation_indices


@pytest.mark.parametrize("partition", ["iid", "label_skew"])
def test_holdout_is_disjoint_from_every_client(fashion_dir: Path, partition: str) -> None:
    """No held-out sample belongs to a client; the same config holds out the same samples."""
    ds = load_dataset("fashion-mnist", fashion_dir)
    cfg = TrainConfig(data_dir=fashion_dir, partition=partition)  # type: ignore[arg-type]
    held = holdout_indices(ds.y_train, cfg, 2000)
    assert len(held) == 2000 == len(set(held.tolist()))
    used = np.concatenate([b for blocks in client_partitions(ds.y_train, cfg) for b in blocks])
    assert not set(held.tolist()) & set(used.tolist())
    np.testing.assert_array_equal(held, holdout_indices(ds.y_train, cfg, 2000))


def test_reference_update_and_loss(fashion_dir: Path) -> None:
    """The server's own update lowers its validation loss from w0 and is deterministic; the
    validation split is training data (the test set, which measures ε, is not used)."""
    ds = load_dataset("fashion-mnist", fashion_dir)
    cfg = TrainConfig(data_dir=fashion_dir, local_steps=5)
    ho = Holdout.build(cfg, ds, 400)
    assert ho is not None and ho.anchor.size == 200 and int(ho.y_val.shape[0]) == 200
    w0 = get_weights(build_model("logistic", ds.input_shape, zero_init=True))
    d = ho.reference_update(w0, 3)
    np.testing.assert_array_equal(d[0], ho.reference_update(w0, 3)[0])
    assert ho.loss([a + b for a, b in zip(w0, d, strict=True)]) < ho.loss(w0)
    assert len(evaluation_indices(len(ds.y_test), None)) == len(ds.y_test)
    assert Holdout.build(cfg, ds, 1) is None


def test_a_population_covering_the_training_set_still_gets_a_holdout(fashion_dir: Path) -> None:
    """Shards that reuse the whole set leave nothing free: a seeded sample of the set instead."""
    ds = load_dataset("fashion-mnist", fashion_dir)
    cfg = TrainConfig(data_dir=fashion_dir, sizes=(300,), counts=(250,))  # 75,000 > 60,000
    held = holdout_indices(ds.y_train, cfg, 1000)
    assert len(held) == 1000 == len(set(held.tolist()))
    np.testing.assert_array_equal(held, holdout_indices(ds.y_train, cfg, 1000))


@pytest.mark.parametrize(("partition", "fresh"), [("iid", True), ("label_skew", False)])
def test_round_zero_references_are_fresh_only_for_iid_data(
    fashion_dir: Path, partition: str, fresh: bool
) -> None:
    """too_little_work's round-0 bound assumes the server's draws are an honest update's law:
    true in round 0 of an i.i.d. partition (no participant's data in w0, data like the anchor's),
    not under label skew, nor from round 1."""
    ds = load_dataset("fashion-mnist", fashion_dir)
    cfg = TrainConfig(data_dir=fashion_dir, local_steps=2, partition=partition)  # type: ignore[arg-type]
    ho = Holdout.build(cfg, ds, 400)
    assert ho is not None
    w0 = get_weights(build_model("logistic", ds.input_shape, zero_init=True))
    assert ho.anchored_references(w0, 0, 50, 1).fresh is fresh
    assert ho.anchored_references(w0, 1, 50, 1).fresh is False
