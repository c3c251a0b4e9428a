"""End-to-end smoke run of the quick pipeline with real FedAvg training on a tiny Fashion-MNIST configuration."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from mots.reproduce.measure import DEFAULT_DATA_DIR
from mots.reproduce.pipeline import ReproduceOptions, run_reproduction

pytestmark = pytest.mark.skipif(
    not (DEFAULT_DATA_DIR / "t10k-labels-idx1-ubyte.gz").exists(),
    reason="Fashion-MNIST not installed (make system / apt-get install dataset-fashion-mnist)",
)


def test_quick_pipeline_trains_fits_plots_reports_and_reuses_its_cache(tmp_path: Path) -> None:
    """Train Fig. 5's 22 coalitions (2 rounds, 200 test images), fit, sweep, plot and report; a second
    run with the same configuration reads the cache instead of training."""
    options = ReproduceOptions.for_profile(
        "quick",
        rounds=2,
        test_subset=200,
        out_dir=tmp_path,
        settings=("iid_logistic",),
        points=3,
        random_starts=0,
    )
    doc = run_reproduction(options)

    setting = doc["settings"][0]
    points = setting["measurement"]["points"]
    assert len(points) == 22
    assert all(math.isfinite(p["epsilon"]) and p["epsilon"] > 0 for p in points)
    assert setting["measurement"]["config"]["rounds"] == 2
    assert set(setting["measurement"]["fit"]) >= {"eps0", "d_gamma2", "sigma2", "r2"}
    for name in (
        "report.md",
        "results.json",
        "fig5_network_effects.png",
        "fig6_mechanisms_iid.png",
        "fig8_frameworks_iid.png",
    ):
        assert (tmp_path / name).stat().st_size > 0, name
    report = (tmp_path / "report.md").read_text()
    assert "Quick variant" in report and "R = 2" in report

    cache = list((tmp_path / "measured").glob("iid_logistic-quick-*.json"))
    assert len(cache) == 1
    cache[0].write_text(cache[0].read_text().replace('"seed": 0', '"seed": 0, "marker": 1'))
    again = run_reproduction(options)
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["settings"][0]["measurement"]["points"] == [{**p, "marker": 1} for p in points]
    assert again["settings"][0]["measurement"]["seconds"] == setting["measurement"]["seconds"]
    assert "(cached)" in (tmp_path / "report.md").read_text()
