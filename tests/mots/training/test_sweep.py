"""The sweep's file and the measured non-monotonic network effect (the fit: economics/error_fit)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mots.training.config import TrainConfig
from mots.training.runner import train_coalition
from mots.training.sweep import run_sweep

SIZES = [50, 120, 300]


def test_run_sweep_writes_json_and_plot(tiny: TrainConfig, tmp_path: Path) -> None:
    """sweep.json holds sizes, points {participants, epsilon, seed} and fit {eps0, d_gamma2, sigma2, r2}."""
    grid = [[0, 0, 1], [1, 0, 1], [0, 1, 0], [1, 1, 0]]
    res = run_sweep(tiny.model_copy(update={"rounds": 2}), grid, seeds=[0, 1])
    js, png = res.save(tmp_path)
    data = json.loads(js.read_text())
    assert data["sizes"] == SIZES and len(data["points"]) == 8
    assert set(data["points"][0]) >= {"participants", "epsilon", "seed"}
    assert set(data["fit"]) == {"eps0", "d_gamma2", "sigma2", "r2"}
    assert png.stat().st_size > 10_000


@pytest.mark.slow
def test_uniform_averaging_is_non_monotonic(fashion_dir: Path) -> None:
    """Measured on Fashion-MNIST (defaults: uniform FedAvg, R = 100): with (K2, K3) = (0, 5), adding
    two small type-1 clients raises ε (negative network effect) and adding all ten lowers it again."""
    cfg = TrainConfig(data_dir=fashion_dir)
    eps = {k1: train_coalition([k1, 0, 5], cfg).epsilon for k1 in (0, 2, 10)}
    assert eps[2] > eps[0] + 0.005 and eps[10] < eps[2] - 0.005
