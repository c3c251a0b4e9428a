"""Fixtures: a small config on the real Fashion-MNIST (``fashion_dir``, tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mots.training.config import TrainConfig


@pytest.fixture
def tiny(fashion_dir: Path) -> TrainConfig:
    """A few rounds on 500 test samples: seconds, not minutes."""
    return TrainConfig(data_dir=fashion_dir, rounds=3, local_steps=5, test_subset=500)
