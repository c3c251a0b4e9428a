"""The scikit-learn public sets read from the CSV files the package ships are the very sets its
loaders give (same samples, labels and test cut), and reading them imports no scikit-learn (the
ServerApp of a task's round reads its evaluation data in a fresh process each run)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from mots.tasks import public


@pytest.mark.parametrize("name", ["sklearn-digits", "sklearn-breast-cancer"])
def test_the_bundled_csv_gives_the_loaders_set(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast read equals scikit-learn's loader, array for array and dtype for dtype."""
    fast = public.load_public(name)
    monkeypatch.setattr(public, "_bundled", lambda loader: None)  # scikit-learn's own loader
    slow = public.load_public(name)
    for field in ("x_train", "y_train", "x_test", "y_test"):
        a, b = getattr(fast, field), getattr(slow, field)
        assert a.dtype == b.dtype and a.shape == b.shape, (field, a.dtype, b.dtype)
        assert np.array_equal(a, b), field
    assert len(fast.y_test) > 0 and fast.x_train.shape[0] == len(fast.y_train)


def test_reading_a_bundled_set_imports_no_sklearn() -> None:
    code = (
        "import sys; from mots.tasks.public import load_public; "
        "load_public('sklearn-digits'); load_public('sklearn-breast-cancer'); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('sklearn', 'scipy')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
