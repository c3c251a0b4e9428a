"""A real model file for tests: a logistic network over (1, 28, 28) inputs with seeded random
weights, written by the platform's own :func:`~mots.training.artifacts.save_artifact`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from mots.training.artifacts import save_artifact
from mots.training.models import describe_network


def write_model(path: Path, metadata: dict[str, Any], seed: int = 0) -> str:
    """Write a logistic model file with ``metadata`` (its network and input shape added) at
    ``path``; returns its SHA-256."""
    rng = np.random.default_rng(seed)
    weights = [rng.normal(size=(10, 784)).astype(np.float32), np.zeros(10, np.float32)]
    meta = {
        "network": describe_network("logistic", (1, 28, 28), 10),
        "input_shape": [1, 28, 28],
        **metadata,
    }
    return save_artifact(path, ["linear.weight", "linear.bias"], weights, meta)
