"""Fixtures of the reproduction tests: a synthetic measurement whose ε follows a known Eq. 3 model."""

from __future__ import annotations

import numpy as np
import pytest

from mots.economics import ErrorModel
from mots.economics.error import generalization_error
from mots.reproduce.measure import Measurement, fig5_coalitions

SIZES = [50.0, 120.0, 300.0]
TRUE_MODEL = ErrorModel(d_gamma2=36.0, sigma2=0.0, eps0=0.564)


def synthetic_measurement(noise: float = 0.0, seeds: int = 1) -> Measurement:
    """Fig. 5's coalitions with ε from TRUE_MODEL (+ seeded noise), fitted exactly as TRUE_MODEL."""
    rng = np.random.default_rng(0)
    points = []
    for seed in range(seeds):
        for k in fig5_coalitions():
            eps = float(generalization_error(np.array(k), SIZES, TRUE_MODEL))
            points.append(
                {
                    "participants": k,
                    "seed": seed,
                    "epsilon": eps + noise * rng.standard_normal(),
                    "seconds": 0.0,
                }
            )
    fit = {"eps0": TRUE_MODEL.eps0, "d_gamma2": TRUE_MODEL.d_gamma2, "sigma2": 0.0, "r2": 1.0}
    config = {
        "dataset": "fashion-mnist",
        "model": "logistic",
        "partition": "iid",
        "sizes": SIZES,
        "rounds": 3,
        "local_steps": 2,
        "batch_size": 8,
        "lr": 0.5,
        "aggregation": "uniform",
        "zero_init": True,
        "test_subset": 100,
        "seeds": list(range(seeds)),
        "key": "synthetic",
    }
    return Measurement("iid_logistic", config, SIZES, points, fit, 0.0)


@pytest.fixture
def measurement() -> Measurement:
    """A noiseless synthetic measurement of the MNIST-like setting."""
    return synthetic_measurement()
