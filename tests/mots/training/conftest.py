"""Fixtures: the real Fashion-MNIST (Debian's dataset-fashion-mnist) and a small config on it."""

from __future__ import annotations

from pathlib import Path

import pytest

from mots.training.config import TrainConfig

FASHION = Path("/usr/share/datasets/fashion-mnist")


@pytest.fixture(scope="session")
def fashion_dir() -> Path:
    """The data directory; skips when the Debian package is absent (make test installs it)."""
    if not (FASHION / "t10k-labels-idx1-ubyte.gz").is_file():
        pytest.skip("Fashion-MNIST missing: apt-get install -y dataset-fashion-mnist")
    return FASHION


@pytest.fixture
def tiny(fashion_dir: Path) -> TrainConfig:
    """A few rounds on 500 test samples: seconds, not minutes."""
    return TrainConfig(data_dir=fashion_dir, rounds=3, local_steps=5, test_subset=500)
