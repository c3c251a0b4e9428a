"""The test suite's environment: the tests' public secrets, admitted only with
``MOTS_ENVIRONMENT=test`` (no service accepts a built-in secret; the processes the tests start
inherit these), and the real Fashion-MNIST the training and example tests read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mots.platform.settings import DEV_OPERATOR_TOKEN, DEV_TOKEN_SECRET

os.environ.setdefault("MOTS_ENVIRONMENT", "test")
os.environ.setdefault("MOTS_OPERATOR_TOKEN", DEV_OPERATOR_TOKEN)
os.environ.setdefault("MOTS_TOKEN_SECRET", DEV_TOKEN_SECRET)

FASHION = Path("/usr/share/datasets/fashion-mnist")


@pytest.fixture(scope="session")
def fashion_dir() -> Path:
    """The data directory; skips when the Debian package is absent (make test installs it)."""
    if not (FASHION / "t10k-labels-idx1-ubyte.gz").is_file():
        pytest.skip("Fashion-MNIST missing: apt-get install -y dataset-fashion-mnist")
    return FASHION
