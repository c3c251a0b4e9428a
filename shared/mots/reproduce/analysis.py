"""What a reproduction's report states, computed from its results before any layout (pure).

Fig. 5's peaks and monotonicity, the framework checks of the paper's claims, the mechanism tables;
:mod:`mots.reproduce.report` lays them out as Markdown.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mots.economics.network_effects import example1_threshold
from mots.reproduce.measure import Measurement
from mots.reproduce.settings import FIG5_FIXED, PAPER_COUNTS
from mots.reproduce.sweeps import FrameworkSweep, MechanismSweep

UNIFORM_GUESS_LOSS = math.log(10.0)
"""Cross-entropy of predicting the 10 classes uniformly: an untrained model's test loss."""

PAPER_RUNS = 30
"""Section 5.A: "all results are averaged over 30 independent runs"."""

PAPER_FIG5_PEAK = 4
"""Section 5.B: "the generalization error peaks at K1 = 4 when K2 = 0, K3 = 5"."""

BUDGET_TOL = 1e-6
"""|incentive cost| below this fraction of the welfare scale counts as zero (budget balance)."""


def _arr(values: Sequence[float | None]) -> np.ndarray:
    return np.array([math.nan if v is None else float(v) for v in values], dtype=np.float64)


def fig5_peaks(m: Measurement) -> dict[str, Any]:
    """Per Fig. 5 curve ((K2, K3) = (5, 0) and (0, 5)): argmax over K1 of the measured and fitted ε,
    whether each falls monotonically in K1, and Example 1's threshold for the (0, 5) curve."""
    from mots.economics.error import generalization_error

    curve = m.mean_curve()
    out: dict[str, Any] = {}
    for k2, k3 in FIG5_FIXED:
        k1 = [a for a in range(PAPER_COUNTS[0] + 1) if (a, k2, k3) in curve]
        if not k1:
            continue
        measured = [curve[(a, k2, k3)][0] for a in k1]
        theory = generalization_error(
            np.array([[a, k2, k3] for a in k1]), m.sizes, m.error_model()
        ).tolist()
        out[f"{k2},{k3}"] = {
            "measured_peak": int(k1[int(np.argmax(measured))]),
            "theory_peak": int(k1[int(np.argmax(theory))]),
            "measured_monotone_down": all(b <= a for a, b in itertools.pairwise(measured)),
            "theory_monotone_down": all(b <= a for a, b in itertools.pairwise(theory)),
            "measured_first_rise": len(measured) > 1 and measured[1] > measured[0],
        }
    # Example 1 (σ² = 0, two types): type 1 against K3 = 5 clients of type 3.
    out["example1_falls_from"] = example1_threshold(FIG5_FIXED[1][1], m.sizes[0], m.sizes[2])
    return out


def framework_checks(sw: FrameworkSweep) -> dict[str, Any]:
    """Proposition 3 (W_MoTS* ≥ W_FL*) and Theorem 3's budget balance (IC = 0 where W* > 0) along a sweep."""
    wm, wf, ic = _arr(sw.w_mots), _arr(sw.w_fl), _arr(sw.ic_mots)
    ok = np.isfinite(wm) & np.isfinite(wf)
    scale = float(np.nanmax(np.abs(wm))) if ok.any() else 1.0
    pos = ok & (wm > 0)
    balanced = pos & (np.abs(ic) <= BUDGET_TOL * max(scale, 1.0))
    unbalanced = [
        {"x": sw.x[i], "incentive_cost": float(ic[i]), "welfare": float(wm[i]), "k": sw.k_mots[i]}
        for i in np.flatnonzero(pos & ~balanced)
    ]
    counts = np.asarray(PAPER_COUNTS)
    non_vertex = [
        {"x": sw.x[i], "k": sw.k_mots[i]}
        for i in range(len(sw.x))
        if sw.k_mots[i] is not None
        and not all(k in (0, n) for k, n in zip(sw.k_mots[i] or [], counts, strict=True))
    ]
    return {
        "non_vertex": non_vertex,
        "unbalanced": unbalanced,
        "feasible_points": int(ok.sum()),
        "prop3_holds": int((wm[ok] >= wf[ok] - 1e-9 * max(scale, 1.0)).sum()),
        "positive_points": int(pos.sum()),
        "budget_balanced": int(balanced.sum()),
        "w_mots_range": [float(np.min(wm[ok])), float(np.max(wm[ok]))] if ok.any() else None,
    }


def mechanism_table(sw: MechanismSweep) -> list[dict[str, Any]]:
    """Per mechanism: welfare share of the optimum, fraction of runs at K*, meeting ε_req, moves, incentive cost."""
    opt = _arr(sw.optimum)
    rows = []
    for name, s in sw.series.items():
        w = _arr(s.welfare)
        both = np.isfinite(w) & np.isfinite(opt)
        share = (
            float(np.sum(w[both]) / np.sum(np.abs(opt[both])))
            if both.any() and np.sum(np.abs(opt[both])) > 0
            else math.nan
        )
        rows.append(
            {
                "name": name,
                "welfare_sum_share": share,
                "points_with_feasible_run": int(np.isfinite(w).sum()),
                "points": len(w),
                "at_optimum": float(np.nanmean(_arr(s.reached_optimum))) if len(w) else math.nan,
                "feasible": float(np.nanmean(_arr(s.feasible))) if len(w) else math.nan,
                "converged": float(np.nanmean(_arr(s.converged))) if len(w) else math.nan,
                "moves": float(np.nanmean(_arr(s.moves))) if len(w) else math.nan,
                "max_moves": float(np.nanmax(_arr(s.moves)))
                if np.isfinite(_arr(s.moves)).any()
                else math.nan,
                "incentive_cost": float(np.nanmean(_arr(s.incentive_cost)))
                if np.isfinite(_arr(s.incentive_cost)).any()
                else math.nan,
            }
        )
    return rows


@dataclass(frozen=True)
class SettingAnalysis:
    """What the report states about one setting, computed from its results before any layout."""

    peaks: dict[str, Any]
    """Fig. 5's peaks and monotonicity, measured and fitted (:func:`fig5_peaks`)."""
    epsilons: list[float]
    """The measured ε of every run."""
    zero_fit: list[str]
    """Eq. 3's parameters the non-negative fit put at 0."""
    near_uniform: int
    """Measured losses within 15 % of ln 10, an untrained model's loss."""
    frameworks: dict[str, dict[str, Any]]
    """:func:`framework_checks` of the sweep along the cost (``"cost"``) and ε_req (``"req"``)."""
    mechanisms: dict[str, list[dict[str, Any]]]
    """:func:`mechanism_table` of the sweep along the cost (``"cost"``) and ε_req (``"req"``)."""


def analyse(results: Sequence[Any]) -> dict[str, SettingAnalysis]:
    """The report's analysis of every setting, by setting key (pure: no layout, no I/O)."""
    out = {}
    for r in results:
        fit = r.measurement.fit
        eps = [float(p["epsilon"]) for p in r.measurement.points]
        out[r.setting.key] = SettingAnalysis(
            peaks=fig5_peaks(r.measurement),
            epsilons=eps,
            zero_fit=[n for n in ("d_gamma2", "sigma2", "eps0") if not (fit[n] or 0.0) > 0.0],
            near_uniform=sum(abs(e - UNIFORM_GUESS_LOSS) <= 0.15 * UNIFORM_GUESS_LOSS for e in eps),
            frameworks={"cost": framework_checks(r.fw_cost), "req": framework_checks(r.fw_req)},
            mechanisms={"cost": mechanism_table(r.mech_cost), "req": mechanism_table(r.mech_req)},
        )
    return out
