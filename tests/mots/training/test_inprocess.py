"""The in-process engine on real Fashion-MNIST: batched logistic path = per-client loop."""

from __future__ import annotations

import numpy as np

from mots.training.config import TrainConfig
from mots.training.inprocess import run_inprocess


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
