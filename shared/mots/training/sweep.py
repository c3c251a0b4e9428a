"""Coalition sweeps (Fig. 5): measure ε over grids of K, fit Eq. 3 plus ε0, plot both.

The fit is the economics core's :func:`mots.economics.error_fit.fit_error_model` (beside Eq. 3).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mots.economics.error_fit import Fit, fit_error_model
from mots.training.config import TrainConfig


def fig5_coalitions(
    k1_max: int = 10, families: Sequence[tuple[int, int]] = ((5, 0), (0, 5))
) -> list[list[int]]:
    """K1 = 0..k1_max with (K2, K3) fixed per family, as in Fig. 5 (K = 0 left out)."""
    out = []
    for k2, k3 in families:
        for k1 in range(k1_max + 1):
            if k1 + k2 + k3 > 0:
                out.append([k1, k2, k3])
    return out


@dataclass
class SweepResult:
    """Measured points (one per coalition and seed) and the fit of Eq. 3 plus ε0."""

    config: TrainConfig
    sizes: list[int]
    points: list[dict[str, Any]]
    fit: Fit
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The content of sweep.json."""
        return {
            "sizes": self.sizes,
            "points": self.points,
            "fit": self.fit.as_dict(),
            "config": self.config.model_dump(mode="json"),
            "seconds": self.seconds,
            **self.extra,
        }

    def means(self) -> dict[tuple[int, ...], tuple[float, float, int]]:
        """Per coalition: (mean ε, std ε, number of seeds)."""
        groups: dict[tuple[int, ...], list[float]] = {}
        for p in self.points:
            groups.setdefault(tuple(p["participants"]), []).append(float(p["epsilon"]))
        return {k: (float(np.mean(v)), float(np.std(v)), len(v)) for k, v in groups.items()}

    def save(self, out_dir: str | Path) -> tuple[Path, Path]:
        """Write ``sweep.json`` and ``network_effects.png`` into ``out_dir``."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        js = out / "sweep.json"
        js.write_text(json.dumps(self.to_dict(), indent=1))
        png = out / "network_effects.png"
        plot_network_effects(self, png)
        return js, png


def plot_network_effects(result: SweepResult, path: Path) -> None:
    """Empirical ε (mean ± std over seeds) against the fitted Eq. 3 + ε0, one curve per (K2, K3)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    means = result.means()
    families: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
    for k in means:
        families.setdefault(tuple(k[1:]), []).append(k)
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    styles = [":", "--", "-.", "-"]
    for n, (rest, ks) in enumerate(sorted(families.items())):
        ks = sorted(ks)
        x = [k[0] for k in ks]
        m = np.array([means[k][0] for k in ks])
        s = np.array([means[k][1] for k in ks])
        label = ", ".join(f"K{i + 2}={v}" for i, v in enumerate(rest))
        ls = styles[n % len(styles)]
        ax.errorbar(
            x,
            m,
            yerr=s,
            color="tab:blue",
            ls=ls,
            marker="o",
            ms=3,
            capsize=2,
            label=f"measured ({label})",
        )
        ax.plot(
            x,
            result.fit.predict(ks, result.sizes),
            color="tab:red",
            ls=ls,
            label=f"Eq. 3 + ε0 ({label})",
        )
    r2 = "n/a" if result.fit.r2 is None else f"{result.fit.r2:.3f}"
    c = result.config
    ax.set_title(
        f"{c.dataset}, {c.model}, {c.aggregation} FedAvg, R={c.rounds}, η0={c.lr}: fit R²={r2}",
        fontsize=9,
    )
    ax.set_xlabel("K1 (type-1 participants)")
    ax.set_ylabel("test loss ε")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run_sweep(
    config: TrainConfig,
    coalitions: Sequence[Sequence[int]] | None = None,
    seeds: Sequence[int] = (0, 1),
    *,
    progress: Callable[[str], None] | None = None,
    train: Callable[[list[int], TrainConfig], float] | None = None,
) -> SweepResult:
    """Train every coalition for every seed (in process by default) and fit Eq. 3 + ε0."""
    from mots.training.runner import train_coalition

    grid = [list(k) for k in (coalitions if coalitions is not None else fig5_coalitions())]
    for k in grid:
        config.check_participants(k)

    def default_train(k: list[int], cfg: TrainConfig) -> float:
        return train_coalition(k, cfg).epsilon

    run = train if train is not None else default_train
    start = time.perf_counter()
    points: list[dict[str, Any]] = []
    total = len(grid) * len(seeds)
    for seed in seeds:
        cfg = config.model_copy(update={"seed": int(seed)})
        for k in grid:
            t0 = time.perf_counter()
            eps = float(run(k, cfg))
            points.append(
                {
                    "participants": k,
                    "epsilon": eps,
                    "seed": int(seed),
                    "seconds": time.perf_counter() - t0,
                }
            )
            if progress is not None:
                progress(f"sweep {len(points)}/{total}: K={k} seed={seed} ε={eps:.4f}")
    fit = fit_error_model(points, config.sizes)
    return SweepResult(config, list(config.sizes), points, fit, time.perf_counter() - start)


def load_sweep(path: str | Path) -> dict[str, Any]:
    """Read a sweep.json back (plain dict)."""
    return dict(json.loads(Path(path).read_text()))


__all__ = ["SweepResult", "fig5_coalitions", "run_sweep"]
