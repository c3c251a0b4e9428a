"""The Markdown report of a reproduction: setup, each figure, paper-versus-ours numbers, and the checks of the paper's claims.

Every number in the report comes from ``results.json`` (the same dict is passed in); the prose around
the numbers that depends on them is generated from them, not written in advance.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mots.economics.network_effects import example1_threshold
from mots.reproduce.measure import Measurement
from mots.reproduce.settings import FIG5_FIXED, PAPER_COUNTS, PAPER_UTILITY
from mots.reproduce.sweeps import FrameworkSweep, MechanismSweep

UNIFORM_GUESS_LOSS = math.log(10.0)
"""Cross-entropy of predicting the 10 classes uniformly: an untrained model's test loss."""

PAPER_RUNS = 30
"""Section 5.A: "all results are averaged over 30 independent runs"."""

PAPER_FIG5_PEAK = 4
"""Section 5.B: "the generalization error peaks at K1 = 4 when K2 = 0, K3 = 5"."""

BUDGET_TOL = 1e-6
"""|incentive cost| below this fraction of the welfare scale counts as zero (budget balance)."""


def _pct(x: float | None) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{x:+.2f}%"


def _num(x: float | None, digits: int = 4) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    return f"{x:.{digits}g}"


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


def _mech_md(sw: MechanismSweep, label: str) -> list[str]:
    lines = [
        f"*{label}* — {len(sw.x)} points, each mechanism run from {len(sw.starts)} start states "
        "(the Dynamic baseline from its own start, the empty network):",
        "",
        "| mechanism | Σ welfare / Σ|W*| | points with a run meeting ε_req | runs at K* | runs meeting ε_req | runs converged | mean moves (max) | mean incentive cost |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in mechanism_table(sw):
        lines.append(
            f"| {r['name']} | {_num(r['welfare_sum_share'], 3)} | {r['points_with_feasible_run']}/{r['points']} "
            f"| {r['at_optimum']:.0%} | {r['feasible']:.0%} | {r['converged']:.0%} "
            f"| {_num(r['moves'], 3)} ({_num(r['max_moves'], 3)}) | {_num(r['incentive_cost'])} |"
        )
    return [*lines, ""]


def _framework_points_md(sw: FrameworkSweep) -> list[str]:
    """One row per sweep point: the axis value, both optima, both incentive costs, both states."""
    head = "C_i/D_i" if sw.axis == "cost" else "ε_req"
    lines = [
        f"| {head} | W_MoTS* | W_FL* | IC MoTS | IC FL | K* (MoTS) | K (FL) |",
        "|---|---|---|---|---|---|---|",
    ]
    for i, x in enumerate(sw.x):
        k_m, k_f = sw.k_mots[i], sw.k_fl[i]
        lines.append(
            f"| {_num(x, 5)} | {_num(sw.w_mots[i])} | {_num(sw.w_fl[i])} | {_num(sw.ic_mots[i])} "
            f"| {_num(sw.ic_fl[i])} | {tuple(k_m) if k_m else 'infeasible'} "
            f"| {tuple(k_f) if k_f else 'infeasible'} |"
        )
    return lines


def write_report(doc: dict[str, Any], results: Sequence[Any], path: Path) -> Path:
    """Write ``report.md`` from the results document and the per-setting results."""
    prof = doc["profile"]
    mach = doc["machine"]
    quick = prof["name"] == "quick"
    L: list[str] = []
    L += [
        "# Reproduction of the paper's evaluation (Section 5)",
        "",
        f"Generated {doc['generated']} by `{doc['command']}` in {doc.get('seconds', 0):.0f} s "
        f"(profile **{prof['name']}**).",
        "",
    ]
    if quick:
        L += [
            "> **Quick variant.** This run uses fewer rounds and runs than the paper "
            f"({', '.join(f'{k}: R = {v}' for k, v in prof['rounds'].items())}; {prof['seeds']} run(s) per "
            f"coalition instead of 30; {prof['test_subset'] or 'all 10,000'} test images). Its numbers show "
            "the pipeline and the qualitative picture, not the paper's precision. `make reproduce-full` "
            "runs the paper's rounds (R = 500 / 600) and 30 runs.",
            "",
        ]
    if not quick and (prof["seeds"] < PAPER_RUNS or len(results) < 2):
        L += [
            "> **Partial full run.** The paper's rounds and test set, but "
            f"{prof['seeds']} run(s) per coalition (the paper: {PAPER_RUNS}) and the setting(s) "
            f"{', '.join(r.setting.key for r in results)} only.",
            "",
        ]
    L += [
        "## Setup",
        "",
        f"- Machine: {mach['nproc']} CPU cores ({mach['cpu']}), {mach['os']}; Python {mach['python']}, "
        f"numpy {mach['numpy']}, torch {mach['torch']}, flwr {mach['flwr']}, matplotlib {mach['matplotlib']}.",
        f"- Market: N = {sum(PAPER_COUNTS)} clients ({' / '.join(map(str, PAPER_COUNTS))} of types 1 / 2 / 3), "
        f"U(ε) = {PAPER_UTILITY[0]:g}·ε^−{PAPER_UTILITY[1]:g}, C_i = c·D_i (cost proportional to data size).",
        "- Data: Fashion-MNIST (Debian `dataset-fashion-mnist`) stands in for MNIST and CIFAR-10, which "
        "cannot be fetched here; each setting keeps the paper's data sizes per type. ε is the global "
        "model's test loss after the last round (Section 5.A).",
        f"- Runs (seeds): {prof['seeds']} per coalition (seeds 0..{prof['seeds'] - 1}); the fit uses the "
        "seed-mean ε of each coalition.",
        "",
        "| setting | paper data set | D_1 / D_2 / D_3 | model | partition | aggregation | R | E | b | η0 (η0/(1+r)) | init | test images |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        c = r.measurement.config
        L.append(
            f"| {r.setting.title} | {r.setting.paper_dataset} | {' / '.join(f'{d:g}' for d in c['sizes'])} "
            f"| {c['model']} | {c['partition']} | {c['aggregation']} | {c['rounds']} | {c['local_steps']} "
            f"| {c['batch_size']} | {c['lr']:g} | {'zero' if c['zero_init'] else 'default'} "
            f"| {c['test_subset'] or 10000} |"
        )
    L += [
        "",
        "Deviations from the paper's protocol, on purpose:",
        "",
        "- **Learning rate of the logistic model:** η0 = 0.5 instead of 0.001. With η0 = 0.001 on pixels "
        "in [0, 1] the loss stays near ln 10 ≈ 2.3 for hundreds of rounds whatever the coalition "
        "(measured by the training engine, issue 3), so no network effect is measurable.",
        "- **CNN initialisation:** the default (random) one. A CNN started at w0 = 0 has zero gradients in "
        "every layer but the last bias and never learns features.",
        "- **Uniform FedAvg** (each participant 1/K), the averaging Eq. 3's derivation assumes; the paper's "
        "Eq. 2 weights by data size.",
        "- **Non-convex setting of Fig. 5(b):** the label-skew CNN of the CIFAR-10 column (the setting the "
        "Figs. 7 and 9 use), not the i.i.d. SVHN CNN.",
        "",
        "## Fig. 5 — network effects, measured against Eq. 3",
        "",
        "![Fig. 5](fig5_network_effects.png)",
        "",
        "| setting | ε0 | dγ² | σ² | R² | points | training time |",
        "|---|---|---|---|---|---|---|",
    ]
    peaks = {}
    for r in results:
        m = r.measurement
        f = m.fit
        L.append(
            f"| {r.setting.title} | {_num(f['eps0'])} | {_num(f['d_gamma2'])} | {_num(f['sigma2'])} "
            f"| {_num(f['r2'], 3)} | {len(m.points)} | {m.seconds:.0f} s{' (cached)' if m.cached else ''}"
            + (f" on {m.config['measured_on']}" if m.config.get("measured_on") else "")
            + " |"
        )
        peaks[r.setting.key] = fig5_peaks(m)
    L += [""]
    for r in results:
        p = peaks[r.setting.key]
        for curve, text in (("0,5", "(K2, K3) = (0, 5)"), ("5,0", "(K2, K3) = (5, 0)")):
            if curve not in p:
                continue
            c = p[curve]
            L.append(
                f"- {r.setting.title}, {text}: measured ε peaks at K1 = {c['measured_peak']} "
                f"({'falls monotonically' if c['measured_monotone_down'] else 'not monotone'}), the "
                f"fitted Eq. 3 at K1 = {c['theory_peak']} "
                f"({'falls monotonically' if c['theory_monotone_down'] else 'not monotone'})."
            )
    for r in results:
        f = r.measurement.fit
        eps = [float(p["epsilon"]) for p in r.measurement.points]
        bounds = [n for n in ("d_gamma2", "sigma2", "eps0") if not (f[n] or 0.0) > 0.0]
        L.append(
            f"- {r.setting.title}: measured ε spans [{min(eps):.4g}, {max(eps):.4g}] over "
            f"{len(eps)} runs; R² = {_num(f['r2'], 3)} "
            + (
                f"(the non-negative fit put {', '.join(bounds)} at 0"
                + (
                    ": Eq. 3's data term is not identified by these points"
                    if "d_gamma2" in bounds
                    else ""
                )
                + ")"
                if bounds
                else "(all three parameters positive)"
            )
            + f"; regime of Proposition 1: {r.regime} (I_H "
            + ("≠ ∅" if r.regime == "high" else "= ∅")
            + ")."
        )
    for r in results:
        eps = [float(p["epsilon"]) for p in r.measurement.points]
        near = sum(abs(e - UNIFORM_GUESS_LOSS) <= 0.15 * UNIFORM_GUESS_LOSS for e in eps)
        if near >= len(eps) / 2:
            L.append(
                f"- {r.setting.title}: {near}/{len(eps)} measured losses lie within 15 % of ln 10 ≈ "
                f"{UNIFORM_GUESS_LOSS:.3f}, the loss of a uniform guess: after "
                f"{r.measurement.config['rounds']} round(s) these models are barely trained, so the "
                "differences between coalitions are early-training effects rather than the converged "
                "error Eq. 3 describes."
            )
    if "iid_logistic" in peaks:
        p = peaks["iid_logistic"]
        ex = p["example1_falls_from"]
        L.append(
            f"- **Paper vs its own equation:** the paper says the error peaks at K1 = {PAPER_FIG5_PEAK} for "
            f"(K2, K3) = (0, 5). With the paper's sizes (50 / 120 / 300) and σ² = 0, Eq. 3 and Example 1 "
            f"(ε falls once K1 ≥ {ex}) put the peak at K1 = {ex}, whatever dγ²."
        )
        if "5,0" in p and not p["5,0"]["theory_monotone_down"]:
            L.append(
                "- **Paper vs its own equation (2):** the paper says that with (K2, K3) = (5, 0) type-1 "
                "clients *consistently* reduce the error; with σ² = 0, Eq. 3 has the first type-1 client "
                f"raise it (peak at K1 = {p['5,0']['theory_peak']}; Example 1's threshold with K2 = 5, "
                f"D = (50, 120) is {example1_threshold(5, 50.0, 120.0)})."
            )
    L += ["", "## Sweep axes", ""]
    L += [
        "U = 40·ε^−16 multiplies a 1 % change of ε into a 16 % change of utility, so what counts as a "
        "cheap or an expensive per-sample cost depends on the absolute ε level. Our ε (Fashion-MNIST "
        "test loss) is not the paper's, so the cost axis is written in units of **c0**, the per-sample "
        "cost above which every social state has negative MoTS welfare (c0 = max_K N·U(ε(K)) / Σ K_i D_i), "
        "and runs from 0.05·c0 to 1.5·c0; the ε_req axis spans [ε_min, ε_max] of the fitted model "
        "(quadratically spaced, denser near ε_min). The paper's fixed values are used where the fitted "
        "model can use them:",
        "",
        "| setting | c0 | ε_min | ε_max | fixed value | paper | used | why |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        for fv in r.fixed.values():
            L.append(
                f"| {r.setting.key} | {_num(r.c0)} | {_num(r.eps_min, 6)} | {_num(r.eps_max, 6)} "
                f"| {fv.name} | {fv.paper:g} | {_num(fv.used, 6)} | {fv.reason} |"
            )
    L += [""]
    for r in results:
        a = r.setting.anchors
        L += [
            f"## Fig. {a.fig_mechanisms} — SWAN against the Dynamic and Modified FL mechanisms ({r.setting.title})",
            "",
            f"![Fig. {a.fig_mechanisms}]({r.figures['mechanisms']})",
            "",
            "Welfare is W_MoTS (Eq. 5) of the state the clients' best-response dynamics settle in, averaged "
            "over start states whose final state meets ε_req (a point where no run meets it is left blank); "
            "incentive cost is Σ_i (K_i r_i − B_i p) there.",
            "",
        ]
        L += _mech_md(r.mech_cost, "(a) varying C_i/D_i, no ε_req")
        L += _mech_md(r.mech_req, f"(b) varying ε_req, C_i/D_i = {_num(r.mech_req.fixed)}")
    L += [
        "## Figs. 8 and 9 — MoTS against the FL framework",
        "",
        "MoTS is the optimum of Problem 2 with SWAN's incentive cost there; FL is the best state of W_FL "
        "(Eq. 15) under the same ε_req, with the payments its participants need to break even, "
        "Σ_i K_i max(0, C_i − U(ε)).",
        "",
        "**Percentage improvements, as defined here** (the paper gives no formula): over the points of a "
        "sweep where both frameworks have a feasible state, welfare improvement = mean of "
        "(W_MoTS − W_FL)/|W_FL| (points with W_FL ≠ 0), incentive-cost change = mean of "
        "(IC_MoTS − IC_FL)/IC_FL (points with IC_FL > 0; −100 % = MoTS pays nothing), with IC the "
        "platform's additional cost [Σ_i (K_i r_i − B_i p)]^+ of Problem 1 (a surplus, shown negative "
        "in the figures and point tables, counts as zero). Because a mean of "
        "ratios is dominated by points where W_FL is near zero, the median of the same ratios and the "
        "change of the totals Σ(W_MoTS − W_FL)/Σ|W_FL| are given beside it.",
        "",
    ]
    for r in results:
        a = r.setting.anchors
        L += [f"![Fig. {a.fig_frameworks}]({r.figures['frameworks']})", ""]
    L += [
        "| panel | quantity | paper | ours: mean of ratios | ours: median of ratios | ours: ratio of totals | points used |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        a = r.setting.anchors
        for key, panel in (("vs_cost", "(a) varying C_i/D_i"), ("vs_req", "(b) varying ε_req")):
            imp = r.improvements[key]
            fig = f"Fig. {a.fig_frameworks}{panel[:3]}"
            for q, pk in (("welfare", "paper_welfare"), ("incentive", "paper_incentive")):
                d = imp[q]
                L.append(
                    f"| {fig} {panel[4:]} | {'welfare' if q == 'welfare' else 'incentive cost'} "
                    f"| {_pct(imp[pk])} | {_pct(d['mean_pct'])} | {_pct(d.get('median_pct'))} "
                    f"| {_pct(d['totals_pct'])} "
                    f"| {d['points_used']}/{d['points_total']} |"
                )
    for r in results:
        a = r.setting.anchors
        for sw, panel in ((r.fw_cost, "a"), (r.fw_req, "b")):
            L += ["", f"Fig. {a.fig_frameworks}({panel}) points ({r.setting.key}):", ""]
            L += _framework_points_md(sw)
    L += ["", "## What the comparison shows", ""]
    L += _findings(results, peaks)
    L += [
        "",
        "## Files",
        "",
        "- `results.json`: every number above, per sweep point; `measured/<setting>-<profile>-<digest>.json`: "
        "the measured losses and the fit (re-used by later runs with the same configuration, so the report can be "
        "rebuilt without retraining).",
        "",
    ]
    path.write_text("\n".join(L))
    return path


def _findings(results: Sequence[Any], peaks: dict[str, Any]) -> list[str]:
    """Bullet points computed from the results: which of the paper's claims hold here, which do not."""
    out: list[str] = []
    for r in results:
        t = r.setting.key
        if r.assumption_warnings:
            out.append(
                f"- {t} ({r.regime} regime): the fitted model breaks the paper's curvature assumption "
                "(ε − σ²)U″ + 2U′ ≥ 0 (Section 2.A.3, checked on the Eq. 3 part ε − ε0): "
                + "; ".join(r.assumption_warnings)
                + ". The measured loss carries an irreducible offset ε0 that Eq. 3 lacks; with it, "
                "U(ε0 + dγ²S/K²) is no longer convex along a type, which is what Proposition 1's "
                "all-or-none pattern rests on."
            )
        else:
            out.append(
                f"- {t} ({r.regime} regime): the paper's curvature assumption holds over the fitted "
                "model's error range."
            )
        for sw, label in ((r.fw_cost, "varying cost"), (r.fw_req, "varying ε_req")):
            c = framework_checks(sw)
            line = (
                f"- {t}, {label}: W_MoTS* ≥ W_FL* at {c['prop3_holds']}/{c['feasible_points']} feasible "
                f"points (Proposition 3); SWAN's incentive cost is zero at {c['budget_balanced']}/"
                f"{c['positive_points']} points with W* > 0 (Theorem 3's budget balance)."
            )
            if c["unbalanced"]:
                where = "; ".join(
                    f"x = {_num(u['x'])}: K* = {tuple(u['k'] or ())}, cost {_num(u['incentive_cost'])}"
                    for u in c["unbalanced"]
                )
                line += (
                    f" **Not balanced** at {where}: there K* is not a vertex of X = Π{{0, N_i}}; θ "
                    "(Eq. 11) interpolates L between vertices and differs from L(K*), while τ is scaled "
                    "by L(K*) − L0, so the schedule at K* hands out τ·N·(θ(K*) − L0) ≠ W* (a negative "
                    "cost is a surplus)."
                )
            if c["non_vertex"] and r.regime == "low":
                pts = ", ".join(
                    f"{_num(u['x'])} → K* = {tuple(u['k'] or ())}" for u in c["non_vertex"]
                )
                line += (
                    f" **Proposition 1's all-or-none pattern fails** for the fitted model (low regime, where it "
                    f"predicts K*_i ∈ {{0, N_i}}) at "
                    f"{len(c['non_vertex'])} point(s): {pts}."
                )
            out.append(line)
        if t == "noniid_cnn":
            rng = framework_checks(r.fw_req)["w_mots_range"]
            if rng is not None:
                flat = abs(rng[1] - rng[0]) <= 1e-9 * max(1.0, abs(rng[1]))
                out.append(
                    f"- {t}: across ε_req the MoTS optimum's welfare is "
                    f"{'constant' if flat else 'not constant'} ({_num(rng[0])} to {_num(rng[1])}); the "
                    "paper reports it constant in Fig. 9(b) (Proposition 2: maximising welfare and "
                    "minimising ε coincide)."
                )
        for sw, label in ((r.mech_cost, "varying cost"), (r.mech_req, "varying ε_req")):
            rows = {row["name"]: row for row in mechanism_table(sw)}
            if "swan" in rows and "swan_robust" in rows:
                paper, robust = rows["swan"]["at_optimum"], rows["swan_robust"]["at_optimum"]
                verdict = (
                    "consistent with Theorem 3 here"
                    if paper >= 1.0
                    else "Theorem 3 claims SWAN reaches K*; the other runs stalled where single-client "
                    "best responses cannot raise θ (docs/mechanisms.md characterises where)"
                )
                out.append(
                    f"- {t}, {label}: the paper's SWAN settled at K* in {paper:.0%} of runs, the robust "
                    f"SWAN in {robust:.0%} — {verdict}."
                )
            for base in ("dynamic", "modified_fl"):
                if base in rows and "swan" in rows:
                    b = rows[base]
                    out.append(
                        f"- {t}, {label}: {base} reached K* in {b['at_optimum']:.0%} of runs, met ε_req "
                        f"in {b['feasible']:.0%}, Σ welfare / Σ|W*| = {_num(b['welfare_sum_share'], 3)} "
                        f"(paper's SWAN {_num(rows['swan']['welfare_sum_share'], 3)})."
                    )
    out += [
        "- Why our percentages differ from the paper's: (1) Fashion-MNIST, not MNIST/CIFAR-10, and a "
        "different learning rate (logistic) and initialisation (CNN), so the measured ε levels and the "
        "fitted dγ², σ², ε0 differ; (2) U = 40·ε^−16 makes welfare scale like ε^−16, so the same relative "
        "network effect gives a very different welfare landscape at a different ε level; (3) the cost "
        "and ε_req axes cannot be the paper's numbers and are placed relative to our model (c0, [ε_min, "
        "ε_max]); (4) the paper does not define how its percentages are averaged; ours is stated above "
        "and its alternative (ratio of totals) shows how much the definition alone moves the number.",
    ]
    return out
