"""Models (logistic, CNN), FedAvg arithmetic (Eq. 2 vs uniform) and the local SGD update."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mots.training.fedavg import aggregate, aggregation_weights, learning_rate
from mots.training.local import ClientData, batch_indices, evaluate, train_local
from mots.training.models import build_model, get_weights, set_weights


@pytest.mark.parametrize("shape", [(1, 28, 28), (3, 32, 32)])
def test_models_shapes(shape: tuple[int, int, int]) -> None:
    """Both models map (N, C, H, W) to (N, 10) logits; the CNN has 2 conv and 3 linear layers."""
    x = torch.zeros(4, *shape)
    for name in ("logistic", "cnn"):
        assert build_model(name, shape)(x).shape == (4, 10)
    cnn = build_model("cnn", shape)
    assert sum(isinstance(m, torch.nn.Conv2d) for m in cnn.modules()) == 2
    assert sum(isinstance(m, torch.nn.Linear) for m in cnn.modules()) == 3
    assert sum(isinstance(m, torch.nn.MaxPool2d) for m in cnn.modules()) == 2


def test_zero_init_and_weights_roundtrip() -> None:
    """w0 = 0 when asked; get/set weights round-trips; the same seed gives the same random init."""
    m = build_model("logistic", (1, 28, 28), zero_init=True)
    assert all(float(np.abs(w).max()) == 0.0 for w in get_weights(m))
    a = build_model("cnn", (1, 28, 28), seed=3)
    b = build_model("cnn", (1, 28, 28), seed=3)
    for wa, wb in zip(get_weights(a), get_weights(b), strict=True):
        np.testing.assert_array_equal(wa, wb)
    new = [w + 1.0 for w in get_weights(a)]
    set_weights(b, new)
    np.testing.assert_array_equal(get_weights(b)[0], new[0])
    with pytest.raises(ValueError, match="tensors"):
        set_weights(b, new[:-1])
    with pytest.raises(ValueError, match="model must be"):
        build_model("resnet", (1, 28, 28))


def test_learning_rate_schedule() -> None:
    """η_r = η0/(1+r)."""
    assert [learning_rate(0.5, r) for r in (0, 1, 4)] == [0.5, 0.25, 0.1]


def test_aggregation_weights_and_average() -> None:
    """Weighted: D_k/ΣD (Eq. 2); uniform: 1/K; the average is Σ w_k θ_k layer by layer."""
    np.testing.assert_allclose(aggregation_weights([50, 150], "weighted"), [0.25, 0.75])
    np.testing.assert_allclose(aggregation_weights([50, 150], "uniform"), [0.5, 0.5])
    models = [[np.array([0.0, 4.0], np.float32)], [np.array([4.0, 0.0], np.float32)]]
    np.testing.assert_allclose(aggregate(models, [0.25, 0.75])[0], [3.0, 1.0])
    with pytest.raises(ValueError, match="aggregation must be"):
        aggregation_weights([1], "median")
    with pytest.raises(ValueError, match="2 models but 1 weights"):
        aggregate(models, [1.0])


def test_batch_indices_deterministic_without_replacement() -> None:
    """(E, b) draws: a function of (seed, round, client); no repeats within a batch when b ≤ D."""
    a = batch_indices(0, 3, 7, 50, 20, 32)
    assert a.shape == (20, 32) and a.min() >= 0 and a.max() < 50
    assert all(len(set(row.tolist())) == 32 for row in a)
    np.testing.assert_array_equal(a, batch_indices(0, 3, 7, 50, 20, 32))
    assert not np.array_equal(a, batch_indices(0, 4, 7, 50, 20, 32))
    assert batch_indices(0, 0, 0, 10, 2, 32).max() < 10  # b > D: with replacement


def test_train_local_descends() -> None:
    """E SGD steps lower the training loss on separable data."""
    g = torch.Generator().manual_seed(0)
    x = torch.rand(64, 1, 28, 28, generator=g)
    y = (x.flatten(1).mean(1) > x.flatten(1).mean()).long()
    data = ClientData(x, y, 0)
    model = build_model("logistic", (1, 28, 28), zero_init=True)
    before, _ = evaluate(model, x, y)
    res = train_local(model, data, batch_indices(0, 0, 0, 64, 30, 16), lr=0.5)
    after, _ = evaluate(model, x, y)
    assert after < before and res.samples == 30 * 16 and res.seconds > 0
