"""Measured network effects: train Fig. 5's coalitions, fit Eq. 3 (+ ε0) to the test losses, cache as JSON.

The cache (``<out>/measured/<setting>-<profile>-<digest>.json``) holds the training configuration, every measured point
and the fit, so the sweeps, figures and report can be rebuilt without retraining; the digest covers the whole
configuration (seeds and coalitions included), so a quick run never overwrites a full run's cache.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mots.economics import ErrorModel
from mots.economics.error_fit import fit_error_model
from mots.reproduce.settings import FIG5_FIXED, PAPER_COUNTS, Profile, Setting

DEFAULT_DATA_DIR = Path("/usr/share/datasets/fashion-mnist")
MIN_D_GAMMA2 = 1e-9
"""Floor for a fitted dγ² ≤ 0 (the Scenario model requires dγ² > 0); the report flags it."""


def fig5_coalitions(counts: tuple[int, ...] = PAPER_COUNTS) -> list[list[int]]:
    """K1 = 0..N1 with (K2, K3) = (5, 0) and (0, 5): the coalitions of Fig. 5 (22 for the paper's N)."""
    return [[k1, k2, k3] for k2, k3 in FIG5_FIXED for k1 in range(counts[0] + 1)]


@dataclass
class Measurement:
    """Measured ε per coalition and seed for one setting, with the fitted error model."""

    setting: str
    config: dict[str, Any]
    sizes: list[float]
    points: list[dict[str, Any]]
    """Each {participants: [K_i], seed, epsilon, seconds}."""
    fit: dict[str, float | None]
    """{eps0, d_gamma2, sigma2, r2 (None if undefined)} from fitting the seed-mean ε of each coalition."""
    seconds: float
    cached: bool = False

    def error_model(self) -> ErrorModel:
        """The fitted ε0 + dγ²S/K² + σ²(K−1)/K as an :class:`ErrorModel` (dγ² floored at a tiny positive)."""
        return ErrorModel(
            d_gamma2=max(float(self.fit["d_gamma2"] or 0.0), MIN_D_GAMMA2),
            sigma2=max(float(self.fit["sigma2"] or 0.0), 0.0),
            eps0=max(float(self.fit["eps0"] or 0.0), 0.0),
        )

    def mean_curve(self) -> dict[tuple[int, ...], tuple[float, float, int]]:
        """Mean, standard deviation and count of ε over seeds, per coalition."""
        groups: dict[tuple[int, ...], list[float]] = {}
        for p in self.points:
            groups.setdefault(tuple(p["participants"]), []).append(float(p["epsilon"]))
        return {k: (float(np.mean(v)), float(np.std(v)), len(v)) for k, v in sorted(groups.items())}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (the cache file's content)."""
        return {
            "setting": self.setting,
            "config": self.config,
            "sizes": self.sizes,
            "points": self.points,
            "fit": self.fit,
            "seconds": self.seconds,
        }


def training_config(setting: Setting, profile: Profile, data_dir: Path) -> dict[str, Any]:
    """The TrainConfig fields (minus seed) for ``setting`` under ``profile``."""
    plan = setting.plan(profile.name)
    return {
        "dataset": "fashion-mnist",
        "data_dir": str(data_dir),
        "model": plan.model,
        "partition": plan.partition,
        "sizes": list(setting.sizes),
        "rounds": profile.rounds(setting),
        "local_steps": plan.local_steps,
        "batch_size": plan.batch_size,
        "lr": plan.lr,
        "aggregation": plan.aggregation,
        "zero_init": plan.zero_init,
        "test_subset": profile.test_subset,
    }


def config_key(config: dict[str, Any], seeds: list[int], coalitions: list[list[int]]) -> str:
    """A short digest of everything that determines the measurement."""
    blob = json.dumps({"c": config, "s": seeds, "k": coalitions}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def fit_points(points: list[dict[str, Any]], sizes: list[float]) -> dict[str, float | None]:
    """Fit ε0 + dγ²S/K² + σ²(K−1)/K to the seed-mean ε of each coalition (the economics core's fit_error_model)."""

    groups: dict[tuple[int, ...], list[float]] = {}
    for p in points:
        groups.setdefault(tuple(p["participants"]), []).append(float(p["epsilon"]))
    means = [{"participants": list(k), "epsilon": float(np.mean(v))} for k, v in groups.items()]
    fit = fit_error_model(means, sizes)
    return {
        "eps0": float(fit.eps0),
        "d_gamma2": float(fit.d_gamma2),
        "sigma2": float(fit.sigma2),
        # R² is undefined (None) when every coalition measured the same ε.
        "r2": float(fit.r2) if fit.r2 is not None else None,
    }


def _train_point(config: dict[str, Any], seed: int, k: list[int], dataset: Any) -> dict[str, Any]:
    """One federated training run of coalition ``k`` with ``seed``: its final test loss ε."""
    from mots.training.config import TrainConfig
    from mots.training.inprocess import run_inprocess

    t0 = time.perf_counter()
    rounds = run_inprocess(k, TrainConfig(**config, seed=seed), dataset=dataset)
    eps = float(rounds[-1].epsilon)
    if not math.isfinite(eps):
        raise RuntimeError(f"training: coalition {k} seed {seed} gave a non-finite loss")
    return {
        "participants": list(k),
        "seed": seed,
        "epsilon": eps,
        "accuracy": float(rounds[-1].accuracy),
        "seconds": time.perf_counter() - t0,
    }


_WORKER: dict[str, Any] = {}
"""Per-process state of a parallel measurement: the data set, loaded once per worker."""


def _worker_init(dataset_name: str, data_dir: str, threads: int) -> None:
    import torch

    from mots.training.datasets import load_dataset

    torch.set_num_threads(threads)
    _WORKER["dataset"] = load_dataset(dataset_name, data_dir)


def _worker_run(item: tuple[dict[str, Any], int, list[int]]) -> dict[str, Any]:
    config, seed, k = item
    return _train_point(config, seed, k, _WORKER["dataset"])


def _cached(cache: Path, key: str) -> Measurement | None:
    """The measurement stored in ``cache`` when it was made with this configuration ``key``."""
    if not cache.exists():
        return None
    data = json.loads(cache.read_text())
    if data.get("config", {}).get("key") != key:
        return None
    return Measurement(
        data["setting"],
        data["config"],
        data["sizes"],
        data["points"],
        data["fit"],
        data["seconds"],
        cached=True,
    )


def _resumed(partial: Path) -> dict[tuple[int, tuple[int, ...]], dict[str, Any]]:
    """The runs an interrupted measurement finished, by (seed, coalition), from its journal."""
    done: dict[tuple[int, tuple[int, ...]], dict[str, Any]] = {}
    if partial.exists():
        for line in partial.read_text().splitlines():
            p = json.loads(line)
            done[(int(p["seed"]), tuple(p["participants"]))] = p
    return done


def _train_points(
    config: dict[str, Any],
    todo: list[tuple[int, list[int]]],
    data_dir: Path,
    workers: int,
    record: Callable[[dict[str, Any]], None],
) -> None:
    """Train each (seed, coalition) of ``todo``, in this process or ``workers`` spawned ones,
    handing every finished run to ``record``."""
    if todo and workers == 1:
        from mots.training.datasets import load_dataset

        dataset = load_dataset(config["dataset"], data_dir)
        for s, k in todo:
            record(_train_point(config, s, k, dataset))
    elif todo:
        import multiprocessing as mp
        import os

        threads = max(1, (os.cpu_count() or 1) // workers)
        ctx = mp.get_context("spawn")  # no fork after torch has started its threads
        with ctx.Pool(workers, _worker_init, (config["dataset"], str(data_dir), threads)) as pool:
            for p in pool.imap(_worker_run, [(config, s, k) for s, k in todo]):
                record(p)


def measure_setting(
    setting: Setting,
    profile: Profile,
    out_dir: Path,
    *,
    data_dir: Path = DEFAULT_DATA_DIR,
    seeds: list[int] | None = None,
    coalitions: list[list[int]] | None = None,
    reuse: bool = True,
    workers: int = 1,
    progress: Callable[[str], None] | None = None,
) -> Measurement:
    """Train every coalition for every seed and fit Eq. 3 + ε0.

    Training is real FedAvg on Fashion-MNIST by the training engine's in-process path
    (:func:`mots.training.inprocess.run_inprocess`, the arithmetic the Flower ClientApp runs), with
    the data set loaded once per process. ``workers`` > 1 trains that many runs at once in separate
    processes (for many-core machines; each run is seeded, so the points do not depend on it). Every
    finished run is appended to ``<cache>.partial.jsonl``; an interrupted measurement resumes from it.
    """
    if workers < 1:
        raise ValueError(f"workers: at least 1 process is needed, got {workers}")
    seeds = list(range(profile.seeds)) if seeds is None else seeds
    coalitions = fig5_coalitions() if coalitions is None else coalitions
    config = training_config(setting, profile, data_dir)
    key = config_key(config, seeds, coalitions)
    cache = out_dir / "measured" / f"{setting.key}-{profile.name}-{key}.json"
    partial = cache.with_suffix(".partial.jsonl")
    cached = _cached(cache, key) if reuse else None
    if cached is not None:
        return cached
    cache.parent.mkdir(parents=True, exist_ok=True)
    wanted = [(seed, list(k)) for seed in seeds for k in coalitions]
    done = _resumed(partial) if reuse else {}
    if not done:
        partial.write_text("")
    resumed = sum((s, tuple(k)) in done for s, k in wanted)
    todo = [(s, k) for s, k in wanted if (s, tuple(k)) not in done]
    started = time.perf_counter()

    def record(p: dict[str, Any]) -> None:
        done[(int(p["seed"]), tuple(p["participants"]))] = p
        with partial.open("a") as f:
            f.write(json.dumps(p) + "\n")
        if progress is not None:
            progress(
                f"{setting.key}: {len(done)}/{len(wanted)} K={p['participants']} seed={p['seed']} "
                f"ε={p['epsilon']:.4f} ({p['seconds']:.1f} s)"
            )

    _train_points(config, todo, data_dir, workers, record)
    points = [done[(s, tuple(k))] for s, k in wanted]
    fit = fit_points(points, list(setting.sizes))
    m = Measurement(
        setting.key,
        {**config, "seeds": seeds, "key": key, "workers": workers, "resumed_points": resumed},
        list(setting.sizes),
        points,
        fit,
        time.perf_counter() - started,
    )
    cache.write_text(json.dumps(m.to_dict(), indent=1))
    partial.unlink(missing_ok=True)
    return m
