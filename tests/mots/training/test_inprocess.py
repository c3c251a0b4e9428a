"""The in-process engine on real Fashion-MNIST: batched logistic path = per-client loop, memory
bounded by chunks, results as the unchunked engine gave, cross-device sampling."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mots.training import inprocess
from mots.training.config import TrainConfig
from mots.training.datasets import load_dataset, to_float
from mots.training.fedavg import (
    RoundAggregate,
    aggregate,
    aggregation_weights,
    combine,
    learning_rate,
)
from mots.training.inprocess import run_inprocess
from mots.training.local import batch_indices, torch_threads
from mots.training.partition import client_partitions, coalition_ids, partition_id


def test_vectorised_equals_loop(tiny: TrainConfig) -> None:
    """Batched bmm SGD over K clients gives the loop's global model and ε (float32 rounding)."""
    a = run_inprocess([2, 1, 1], tiny)
    b = run_inprocess([2, 1, 1], tiny, vectorised=False)
    np.testing.assert_allclose([o.epsilon for o in a], [o.epsilon for o in b], rtol=1e-4)
    np.testing.assert_allclose(a[-1].weights[0], b[-1].weights[0], atol=1e-4)


def test_deterministic_and_aggregations_differ(tiny: TrainConfig) -> None:
    """Same seed, same ε; uniform and data-size weighting give different models for mixed sizes."""
    u1 = run_inprocess([3, 0, 2], tiny)[-1].epsilon
    u2 = run_inprocess([3, 0, 2], tiny)[-1].epsilon
    w = run_inprocess([3, 0, 2], tiny.model_copy(update={"aggregation": "weighted"}))[-1].epsilon
    assert u1 == u2 and abs(u1 - w) > 1e-4


def test_cnn_round_runs(tiny: TrainConfig) -> None:
    """The CNN trains through the loop engine: ε falls well below log 10, accuracy above chance."""
    cfg = tiny.model_copy(
        update={
            "model": "cnn",
            "zero_init": False,
            "lr": 0.2,
            "rounds": 3,
            "local_steps": 30,
            "batch_size": 64,
        }
    )
    out = run_inprocess([0, 1, 1], cfg)
    assert len(out) == 3 and out[-1].epsilon < 0.9 * np.log(10) and out[-1].accuracy > 0.2


def _unchunked_reference(
    k: list[int], config: TrainConfig, torch_sum: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """The engine as it was: every participant's data materialised, all K stacked into one
    tensor; each round combined by :class:`RoundAggregate` (the strategy's code, as the engine
    does now) or, with ``torch_sum``, by the float32 torch sum the engine did before it shared it."""
    ds = load_dataset(config.dataset, config.data_dir)
    parts = client_partitions(ds.y_train, config)
    ids = coalition_ids(k, config.type_counts)
    xs = [torch.from_numpy(to_float(ds.x_train[parts[i][j]])).flatten(1) for i, j in ids]
    ys = [torch.from_numpy(ds.y_train[parts[i][j]]) for i, j in ids]
    pids = [partition_id(i, j, config.type_counts) for i, j in ids]
    weights = torch.as_tensor(
        aggregation_weights([len(y) for y in ys], config.aggregation), dtype=torch.float32
    )
    gw, gb = torch.zeros(10, 784), torch.zeros(10)
    eye = torch.eye(10)
    with torch_threads(1):
        for r in range(config.rounds):
            lr = learning_rate(config.lr, r)
            batches = [
                torch.from_numpy(
                    batch_indices(config.seed, r, p, len(y), config.local_steps, config.batch_size)
                )
                for p, y in zip(pids, ys, strict=True)
            ]
            xb = torch.stack([x[b] for x, b in zip(xs, batches, strict=True)])
            yb = torch.stack([y[b] for y, b in zip(ys, batches, strict=True)])
            wk = gw.expand(len(ids), *gw.shape).clone()
            bk = gb.expand(len(ids), *gb.shape).clone()
            for s in range(config.local_steps):
                logits = torch.baddbmm(bk.unsqueeze(1), xb[:, s], wk.transpose(1, 2))
                g = (torch.softmax(logits, dim=-1) - eye[yb[:, s]]) / xb.shape[2]
                wk -= lr * torch.bmm(g.transpose(1, 2), xb[:, s])
                bk -= lr * g.sum(1)
            if torch_sum:
                gw, gb = torch.einsum("k,kij->ij", weights, wk), weights @ bk
                continue
            combined = RoundAggregate([len(y) for y in ys], config.aggregation)
            for w, b in zip(wk.numpy(), bk.numpy(), strict=True):
                combined.add([w, b])
            gw, gb = (torch.from_numpy(a) for a in combined.result())
    return gw.numpy(), gb.numpy()


def test_one_chunk_is_bit_for_bit_the_unchunked_engine(tiny: TrainConfig) -> None:
    """At today's sizes (one chunk) the streamed engine computes exactly what stacking all K and
    combining them with the strategy's RoundAggregate does."""
    cfg = tiny.model_copy(update={"aggregation": "weighted"})
    out = run_inprocess([4, 3, 3], cfg)[-1].weights
    ref_w, ref_b = _unchunked_reference([4, 3, 3], cfg)
    np.testing.assert_array_equal(out[0], ref_w)
    np.testing.assert_array_equal(out[1], ref_b)


@pytest.mark.parametrize("aggregation", ["uniform", "weighted"])
def test_round_aggregate_equals_the_former_torch_sum(tiny: TrainConfig, aggregation: str) -> None:
    """Combining with RoundAggregate (float64 sum) left the model where the engine's former
    float32 torch sum put it, within float32 rounding (measured: 2.3e-8 at most)."""
    cfg = tiny.model_copy(update={"aggregation": aggregation})
    out = run_inprocess([4, 3, 3], cfg)[-1].weights
    before_w, before_b = _unchunked_reference([4, 3, 3], cfg, torch_sum=True)
    np.testing.assert_allclose(out[0], before_w, rtol=0, atol=1e-6)
    np.testing.assert_allclose(out[1], before_b, rtol=0, atol=1e-6)


def test_chunks_change_nothing(tiny: TrainConfig, monkeypatch: pytest.MonkeyPatch) -> None:
    """Forced into chunks of 3 clients, the same coalition ends bit for bit where one chunk did:
    RoundAggregate adds the clients one at a time in the round's order, whatever the chunks
    (the engine's former per-chunk torch sums differed in float32 rounding)."""
    whole = run_inprocess([4, 3, 3], tiny)
    per_client = inprocess.client_bytes(tiny, 784, 10)
    monkeypatch.setattr(inprocess, "CHUNK_BYTES", 3 * per_client)
    chunked = run_inprocess([4, 3, 3], tiny)
    for a, b in zip(chunked, whole, strict=True):
        assert a.epsilon == b.epsilon
        for x, y in zip(a.weights, b.weights, strict=True):
            np.testing.assert_array_equal(x, y)


def test_gathered_memory_does_not_grow_with_k(fashion_dir: Path) -> None:
    """The largest host allocations of a round (the gathered mini-batches) are the same for a
    coalition of 40 and of 400: chunks, not the coalition, bound them (stacking all K grew 10×)."""
    cfg = TrainConfig(
        data_dir=fashion_dir, sizes=(30,), counts=(400,), rounds=1, local_steps=20, test_subset=100
    )
    ds = load_dataset(cfg.dataset, cfg.data_dir)
    peaks = []
    for k in (40, 400):
        tracemalloc.start()
        run_inprocess([k], cfg, dataset=ds)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    assert peaks[1] < 1.5 * peaks[0]
    assert peaks[0] < 2 * inprocess.CHUNK_BYTES


def test_cross_device_sampling_trains_a_seeded_subset(tiny: TrainConfig) -> None:
    """fraction_train = 0.5: half the coalition trains each round (the same clients in both
    engines), and the model differs from full participation."""
    half = tiny.model_copy(update={"fraction_train": 0.5})
    vec = run_inprocess([4, 2, 2], half)
    loop = run_inprocess([4, 2, 2], half, vectorised=False)
    full = run_inprocess([4, 2, 2], tiny)
    assert [o.clients_done for o in vec] == [4] * tiny.rounds == [o.clients_done for o in loop]
    np.testing.assert_allclose(vec[-1].weights[0], loop[-1].weights[0], atol=1e-4)
    assert not np.allclose(vec[-1].weights[0], full[-1].weights[0], atol=1e-4)


def test_a_population_larger_than_the_data_set_trains(fashion_dir: Path) -> None:
    """N = 1,000 with the paper's sizes (130,000 samples of 60,000) trains with overlapping shards."""
    cfg = TrainConfig(
        data_dir=fashion_dir, counts=(500, 250, 250), rounds=1, local_steps=2, test_subset=200
    )
    out = run_inprocess([300, 100, 200], cfg)
    assert out[0].clients_done == 600 and np.isfinite(out[0].epsilon)


@settings(max_examples=30, deadline=None)
@given(
    shapes=st.lists(st.integers(1, 5), min_size=1, max_size=3),
    sizes=st.lists(st.integers(1, 500), min_size=1, max_size=6),
    seed=st.integers(0, 1000),
)
def test_round_aggregate_is_fedavg_aggregate(
    shapes: list[int], sizes: list[int], seed: int
) -> None:
    """The round aggregate (the loop engine's and the strategy's) streams FedAvg's mean equal to
    the layer-by-layer float64 sum Σ w_k · model_k (w_k = D_k/ΣD) bit for bit, as
    fedavg.aggregate does; its robust rules are fedavg.combine's."""
    rng = np.random.default_rng(seed)
    models = [[rng.normal(size=(s, 3)).astype(np.float32) for s in shapes] for _ in sizes]
    weights = aggregation_weights(sizes, "weighted")
    avg = RoundAggregate(sizes, "weighted")
    med = RoundAggregate(sizes, "weighted", "median")
    for m in models:
        avg.add(m)
        med.add(m)
    for layer, (got, agg) in enumerate(zip(avg.result(), aggregate(models, weights), strict=True)):
        want = np.zeros(models[0][layer].shape, dtype=np.float64)
        for m, w in zip(models, weights, strict=True):
            want += float(w) * m[layer].astype(np.float64)
        np.testing.assert_array_equal(got, want.astype(np.float32))
        np.testing.assert_array_equal(agg, want.astype(np.float32))
    for got, want in zip(med.result(), combine(models, weights, "median"), strict=True):
        np.testing.assert_array_equal(got, want)
