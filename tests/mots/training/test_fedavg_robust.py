"""The robust rules a deployment may choose instead of the FedAvg mean: trimmed mean and median."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mots.training.fedavg import combine, coordinate_median, trimmed_mean


def _models(values: list[float]) -> list[list[np.ndarray]]:
    return [[np.array([v, -v], np.float32)] for v in values]


def test_rules_on_a_known_example() -> None:
    """Mean, 20 %-trimmed mean and median of 1, 2, 3, 4, 100 (one outlier)."""
    models = _models([1, 2, 3, 4, 100])
    np.testing.assert_allclose(combine(models, [0.2] * 5, "mean")[0], [22.0, -22.0])
    np.testing.assert_allclose(combine(models, [0.2] * 5, "trimmed_mean", 0.2)[0], [3.0, -3.0])
    np.testing.assert_allclose(combine(models, [0.2] * 5, "median")[0], [3.0, -3.0])
    with pytest.raises(ValueError, match="aggregator must be"):
        combine(models, [0.2] * 5, "krum")
    with pytest.raises(ValueError, match="trim_fraction"):
        trimmed_mean(models, 0.5)
    with pytest.raises(ValueError, match="no model"):
        combine([], [], "median")


@settings(max_examples=50, deadline=None)
@given(
    honest=st.lists(st.floats(-1, 1), min_size=4, max_size=12),
    outlier=st.floats(-1e6, 1e6),
)
def test_one_outlier_moves_median_and_trimmed_mean_within_the_honest_range(
    honest: list[float], outlier: float
) -> None:
    """However far one update lies, the median and the trimmed mean (β ≥ 1/K) stay inside the
    honest values' range; the mean does not."""
    models = _models([*honest, outlier])
    k = len(models)
    lo, hi = min(honest) - 1e-6, max(honest) + 1e-6
    med = coordinate_median(models)[0][0]
    trim = trimmed_mean(models, min(0.49, 1.0 / k + 1e-9))[0][0]
    assert lo <= med <= hi
    assert lo <= trim <= hi
