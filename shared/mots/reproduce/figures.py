"""PNG figures of the reproduction (matplotlib, Agg backend): Fig. 5, Figs. 6-7 and Figs. 8-9.

Every function takes the plain data the sweeps produce and writes one file; nothing is recomputed here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from mots.economics import ErrorModel
from mots.economics.error import generalization_error
from mots.reproduce.measure import Measurement
from mots.reproduce.settings import FIG5_FIXED, PAPER_COUNTS
from mots.reproduce.sweeps import FrameworkSweep, MechanismSweep

DPI = 110
COLORS = {
    "swan": "tab:blue",
    "swan_robust": "tab:green",
    "dynamic": "tab:orange",
    "modified_fl": "tab:purple",
}
LABELS = {
    "swan": "SWAN (paper)",
    "swan_robust": "SWAN robust (platform)",
    "dynamic": "Dynamic (Hu et al.)",
    "modified_fl": "Modified FL (Yan et al.)",
}
AXIS_LABEL = {
    "cost": "per-sample cost $C_i/D_i$",
    "eps_req": r"error requirement $\varepsilon_{req}$",
}


def _nan(values: Sequence[float | None]) -> np.ndarray:
    return np.array([math.nan if v is None else float(v) for v in values], dtype=np.float64)


def network_effects_figure(measurements: Sequence[tuple[str, Measurement]], path: Path) -> Path:
    """Fig. 5: measured ε (mean ± s.d. over seeds) against K1, beside Eq. 3 + ε0 with the fitted parameters."""
    fig, axes = plt.subplots(
        1, len(measurements), figsize=(6.0 * len(measurements), 4.4), squeeze=False
    )
    for ax, (title, m) in zip(axes[0], measurements, strict=True):
        curve = m.mean_curve()
        model: ErrorModel = m.error_model()
        for (k2, k3), style in zip(FIG5_FIXED, (":", "--"), strict=True):
            k1 = np.arange(PAPER_COUNTS[0] + 1)
            keys = [(int(a), k2, k3) for a in k1]
            have = [k in curve for k in keys]
            mean = np.array([curve[k][0] if k in curve else math.nan for k in keys])
            std = np.array([curve[k][1] if k in curve else math.nan for k in keys])
            label = f"$K_2={k2}, K_3={k3}$"
            ax.errorbar(
                k1[have],
                mean[have],
                yerr=std[have],
                color="tab:blue",
                ls=style,
                marker="o",
                ms=4,
                capsize=2,
                label=f"measured, {label}",
            )
            states = np.stack([k1, np.full_like(k1, k2), np.full_like(k1, k3)], axis=1)
            theory = generalization_error(states, m.sizes, model)
            ax.plot(
                k1, theory, color="tab:red", ls=style, marker="s", ms=3, label=f"Eq. 3 fit, {label}"
            )
        f = m.fit
        r2 = "n/a" if f["r2"] is None else f"{f['r2']:.3f}"
        ax.set_title(
            f"{title}\nfit: $d\\gamma^2$={f['d_gamma2']:.4g}, $\\sigma^2$={f['sigma2']:.3g}, "
            f"$\\varepsilon_0$={f['eps0']:.4g}, $R^2$={r2}",
            fontsize=9,
        )
        ax.set_xlabel("type-1 participants $K_1$")
        ax.set_ylabel(r"generalization error $\varepsilon$ (test loss)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("Fig. 5 — network effects of client participation: measured vs Eq. 3", fontsize=11)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def mechanisms_figure(sweeps: Sequence[MechanismSweep], title: str, path: Path) -> Path:
    """Figs. 6-7: per mechanism, settled welfare, incentive cost and moves along each sweep axis."""
    fig, axes = plt.subplots(len(sweeps), 3, figsize=(15.0, 4.0 * len(sweeps)), squeeze=False)
    for row, sw in zip(axes, sweeps, strict=True):
        x = np.asarray(sw.x)
        row[0].plot(
            x,
            _nan(sw.optimum),
            color="grey",
            ls="-",
            lw=6,
            alpha=0.35,
            label="optimum $W^*$",
            zorder=0,
        )
        for name, s in sw.series.items():
            kw = {
                "color": COLORS.get(name),
                "label": LABELS.get(name, name),
                "marker": ".",
                "ms": 5,
            }
            row[0].plot(x, _nan(s.welfare), **kw)
            row[1].plot(x, _nan(s.incentive_cost), **kw)
            row[2].plot(x, _nan(s.moves), **kw)
        fixed = (
            "no $\\varepsilon_{req}$"
            if sw.axis == "cost" and math.isinf(sw.fixed)
            else (
                f"$\\varepsilon_{{req}}$={sw.fixed:.4g}"
                if sw.axis == "cost"
                else f"$C_i/D_i$={sw.fixed:.4g}"
            )
        )
        for ax, what in zip(
            row,
            (
                "social welfare $W_{MoTS}$",
                "incentive cost "
                r"$\sum_i(K_ir_i-B_ip)$",
                "moves to settle",
            ),
            strict=True,
        ):
            ax.set_xlabel(AXIS_LABEL[sw.axis])
            ax.set_ylabel(what)
            ax.set_title(f"{what} ({fixed})", fontsize=9)
            ax.grid(alpha=0.3)
        row[0].legend(fontsize=7)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def frameworks_figure(sweeps: Sequence[FrameworkSweep], title: str, path: Path) -> Path:
    """Figs. 8-9: welfare (blue, left axis) and incentive cost (red, right axis) of MoTS and FL."""
    fig, axes = plt.subplots(1, len(sweeps), figsize=(6.5 * len(sweeps), 4.4), squeeze=False)
    for ax, sw in zip(axes[0], sweeps, strict=True):
        x = np.asarray(sw.x)
        ax.plot(
            x, _nan(sw.w_mots), color="tab:blue", marker="o", ms=4, label="welfare, MoTS (SWAN)"
        )
        ax.plot(
            x,
            _nan(sw.w_fl),
            color="tab:blue",
            ls="--",
            marker="^",
            ms=4,
            label="welfare, FL optimum",
        )
        ax.set_xlabel(AXIS_LABEL[sw.axis])
        ax.set_ylabel("social welfare", color="tab:blue")
        ax.grid(alpha=0.3)
        right = ax.twinx()
        right.plot(
            x, _nan(sw.ic_mots), color="tab:red", marker="o", ms=4, label="incentive cost, MoTS"
        )
        right.plot(
            x,
            _nan(sw.ic_fl),
            color="tab:red",
            ls="--",
            marker="^",
            ms=4,
            label="incentive cost, FL",
        )
        right.set_ylabel("platform incentive cost", color="tab:red")
        fixed = (
            f"$\\varepsilon_{{req}}$={sw.fixed:.4g}"
            if sw.axis == "cost"
            else f"$C_i/D_i$={sw.fixed:.4g}"
        )
        ax.set_title(f"varying {AXIS_LABEL[sw.axis]} ({fixed})", fontsize=9)
        lines = ax.get_legend_handles_labels()
        more = right.get_legend_handles_labels()
        ax.legend(
            lines[0] + more[0],
            lines[1] + more[1],
            fontsize=7,
            ncol=2,
            loc="upper center",
            bbox_to_anchor=(0.5, -0.2),
        )
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path
