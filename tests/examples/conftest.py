"""Fixtures for the examples: the real Fashion-MNIST test set."""

from __future__ import annotations

from pathlib import Path

import pytest

FASHION = Path("/usr/share/datasets/fashion-mnist")


@pytest.fixture(scope="session")
def fashion_dir() -> Path:
    """The data directory; skips when the Debian package is absent (make test installs it)."""
    if not (FASHION / "t10k-labels-idx1-ubyte.gz").is_file():
        pytest.skip("Fashion-MNIST missing: apt-get install -y dataset-fashion-mnist")
    return FASHION
