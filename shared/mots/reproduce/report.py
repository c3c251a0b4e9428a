"""The Markdown report of a reproduction: setup, each figure, paper-versus-ours numbers, and the checks of the paper's claims.

Every number in the report comes from ``results.json`` (the same dict is passed in); the prose around
the numbers that depends on them is generated from them, not written in advance.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mots.economics.network_effects import example1_threshold
from mots.reproduce.analysis import (
    PAPER_FIG5_PEAK,
    PAPER_RUNS,
    UNIFORM_GUESS_LOSS,
    SettingAnalysis,
    analyse,
)
from mots.reproduce.settings import PAPER_COUNTS, PAPER_UTILITY
from mots.reproduce.sweeps import FrameworkSweep, MechanismSweep


def _pct(x: float | None) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{x:+.2f}%"


def _num(x: float | None, digits: int = 4) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    return f"{x:.{digits}g}"


def write_report(doc: dict[str, Any], results: Sequence[Any], path: Path) -> Path:
    """Write ``report.md`` from the results document and the per-setting results."""
    analysis = analyse(results)
    sections = (
        _title(doc, results),
        _setup(doc, results),
        _fig5(results, analysis),
        _sweep_axes(results),
        _mechanisms(results, analysis),
        _frameworks(results),
        _findings(results, analysis),
        _files(),
    )
    path.write_text("\n".join(line for section in sections for line in section))
    return path


def _title(doc: dict[str, Any], results: Sequence[Any]) -> list[str]:
    """The title, when and how the report was made, and what a quick or partial run leaves out."""
    prof = doc["profile"]
    quick = prof["name"] == "quick"
    lines = [
        "# Reproduction of the paper's evaluation (Section 5)",
        "",
        f"Generated {doc['generated']} by `{doc['command']}` in {doc.get('seconds', 0):.0f} s "
        f"(profile **{prof['name']}**).",
        "",
    ]
    if quick:
        lines += [
            "> **Quick variant.** This run uses fewer rounds and runs than the paper "
            f"({', '.join(f'{k}: R = {v}' for k, v in prof['rounds'].items())}; {prof['seeds']} run(s) per "
            f"coalition instead of 30; {prof['test_subset'] or 'all 10,000'} test images). Its numbers show "
            "the pipeline and the qualitative picture, not the paper's precision. `make reproduce-full` "
            "runs the paper's rounds (R = 500 / 600) and 30 runs.",
            "",
        ]
    if not quick and (prof["seeds"] < PAPER_RUNS or len(results) < 2):
        lines += [
            "> **Partial full run.** The paper's rounds and test set, but "
            f"{prof['seeds']} run(s) per coalition (the paper: {PAPER_RUNS}) and the setting(s) "
            f"{', '.join(r.setting.key for r in results)} only.",
            "",
        ]
    return lines


def _setup(doc: dict[str, Any], results: Sequence[Any]) -> list[str]:
    """Machine, market, data and runs; each setting's training; our deviations from the paper."""
    prof = doc["profile"]
    mach = doc["machine"]
    lines = [
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
        lines.append(
            f"| {r.setting.title} | {r.setting.paper_dataset} | {' / '.join(f'{d:g}' for d in c['sizes'])} "
            f"| {c['model']} | {c['partition']} | {c['aggregation']} | {c['rounds']} | {c['local_steps']} "
            f"| {c['batch_size']} | {c['lr']:g} | {'zero' if c['zero_init'] else 'default'} "
            f"| {c['test_subset'] or 10000} |"
        )
    return [
        *lines,
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
    ]


def _fig5(results: Sequence[Any], analysis: dict[str, SettingAnalysis]) -> list[str]:
    """Fig. 5: the fitted Eq. 3 per setting, where ε peaks, how good the fit is, and the paper's
    claims about Fig. 5 against its own equation."""
    lines = [
        "## Fig. 5 — network effects, measured against Eq. 3",
        "",
        "![Fig. 5](fig5_network_effects.png)",
        "",
        "| setting | ε0 | dγ² | σ² | R² | points | training time |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        m = r.measurement
        f = m.fit
        lines.append(
            f"| {r.setting.title} | {_num(f['eps0'])} | {_num(f['d_gamma2'])} | {_num(f['sigma2'])} "
            f"| {_num(f['r2'], 3)} | {len(m.points)} | {m.seconds:.0f} s{' (cached)' if m.cached else ''}"
            + (f" on {m.config['measured_on']}" if m.config.get("measured_on") else "")
            + " |"
        )
    lines.append("")
    for r in results:
        lines += _fig5_peaks_md(r.setting.title, analysis[r.setting.key].peaks)
    for r in results:
        lines.append(_fig5_fit_md(r, analysis[r.setting.key]))
    for r in results:
        a = analysis[r.setting.key]
        if a.near_uniform >= len(a.epsilons) / 2:
            lines.append(
                f"- {r.setting.title}: {a.near_uniform}/{len(a.epsilons)} measured losses lie within 15 % of ln 10 ≈ "
                f"{UNIFORM_GUESS_LOSS:.3f}, the loss of a uniform guess: after "
                f"{r.measurement.config['rounds']} round(s) these models are barely trained, so the "
                "differences between coalitions are early-training effects rather than the converged "
                "error Eq. 3 describes."
            )
    if "iid_logistic" in analysis:
        lines += _paper_vs_eq3_md(analysis["iid_logistic"].peaks)
    return [*lines, ""]


def _fig5_peaks_md(title: str, peaks: dict[str, Any]) -> list[str]:
    """Where the measured and the fitted ε peak along each Fig. 5 curve."""
    lines = []
    for curve, text in (("0,5", "(K2, K3) = (0, 5)"), ("5,0", "(K2, K3) = (5, 0)")):
        if curve not in peaks:
            continue
        c = peaks[curve]
        lines.append(
            f"- {title}, {text}: measured ε peaks at K1 = {c['measured_peak']} "
            f"({'falls monotonically' if c['measured_monotone_down'] else 'not monotone'}), the "
            f"fitted Eq. 3 at K1 = {c['theory_peak']} "
            f"({'falls monotonically' if c['theory_monotone_down'] else 'not monotone'})."
        )
    return lines


def _fig5_fit_md(r: Any, a: SettingAnalysis) -> str:
    """The measured ε range, the fit's R², parameters at 0 and Proposition 1's regime."""
    bounds = a.zero_fit
    return (
        f"- {r.setting.title}: measured ε spans [{min(a.epsilons):.4g}, {max(a.epsilons):.4g}] over "
        f"{len(a.epsilons)} runs; R² = {_num(r.measurement.fit['r2'], 3)} "
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


def _paper_vs_eq3_md(p: dict[str, Any]) -> list[str]:
    """The paper's text about Fig. 5 against what its Eq. 3 and Example 1 give."""
    ex = p["example1_falls_from"]
    lines = [
        f"- **Paper vs its own equation:** the paper says the error peaks at K1 = {PAPER_FIG5_PEAK} for "
        f"(K2, K3) = (0, 5). With the paper's sizes (50 / 120 / 300) and σ² = 0, Eq. 3 and Example 1 "
        f"(ε falls once K1 ≥ {ex}) put the peak at K1 = {ex}, whatever dγ²."
    ]
    if "5,0" in p and not p["5,0"]["theory_monotone_down"]:
        lines.append(
            "- **Paper vs its own equation (2):** the paper says that with (K2, K3) = (5, 0) type-1 "
            "clients *consistently* reduce the error; with σ² = 0, Eq. 3 has the first type-1 client "
            f"raise it (peak at K1 = {p['5,0']['theory_peak']}; Example 1's threshold with K2 = 5, "
            f"D = (50, 120) is {example1_threshold(5, 50.0, 120.0)})."
        )
    return lines


def _sweep_axes(results: Sequence[Any]) -> list[str]:
    """Where the cost and ε_req axes lie for our fitted models, and the paper's fixed values used."""
    lines = [
        "## Sweep axes",
        "",
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
            lines.append(
                f"| {r.setting.key} | {_num(r.c0)} | {_num(r.eps_min, 6)} | {_num(r.eps_max, 6)} "
                f"| {fv.name} | {fv.paper:g} | {_num(fv.used, 6)} | {fv.reason} |"
            )
    return [*lines, ""]


def _mechanisms(results: Sequence[Any], analysis: dict[str, SettingAnalysis]) -> list[str]:
    """Figs. 6 and 7: SWAN against the Dynamic and Modified FL mechanisms, one section a setting."""
    lines: list[str] = []
    for r in results:
        a = r.setting.anchors
        tables = analysis[r.setting.key].mechanisms
        lines += [
            f"## Fig. {a.fig_mechanisms} — SWAN against the Dynamic and Modified FL mechanisms ({r.setting.title})",
            "",
            f"![Fig. {a.fig_mechanisms}]({r.figures['mechanisms']})",
            "",
            "Welfare is W_MoTS (Eq. 5) of the state the clients' best-response dynamics settle in, averaged "
            "over start states whose final state meets ε_req (a point where no run meets it is left blank); "
            "incentive cost is Σ_i (K_i r_i − B_i p) there.",
            "",
        ]
        lines += _mech_md(r.mech_cost, tables["cost"], "(a) varying C_i/D_i, no ε_req")
        lines += _mech_md(
            r.mech_req, tables["req"], f"(b) varying ε_req, C_i/D_i = {_num(r.mech_req.fixed)}"
        )
    return lines


def _mech_md(sw: MechanismSweep, table: list[dict[str, Any]], label: str) -> list[str]:
    """One mechanism sweep's table (:func:`mechanism_table`'s rows)."""
    lines = [
        f"*{label}* — {len(sw.x)} points, each mechanism run from {len(sw.starts)} start states "
        "(the Dynamic baseline from its own start, the empty network):",
        "",
        "| mechanism | Σ welfare / Σ|W*| | points with a run meeting ε_req | runs at K* | runs meeting ε_req | runs converged | mean moves (max) | mean incentive cost |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in table:
        lines.append(
            f"| {r['name']} | {_num(r['welfare_sum_share'], 3)} | {r['points_with_feasible_run']}/{r['points']} "
            f"| {r['at_optimum']:.0%} | {r['feasible']:.0%} | {r['converged']:.0%} "
            f"| {_num(r['moves'], 3)} ({_num(r['max_moves'], 3)}) | {_num(r['incentive_cost'])} |"
        )
    return [*lines, ""]


def _frameworks(results: Sequence[Any]) -> list[str]:
    """Figs. 8 and 9: MoTS against FL, our percentage improvements beside the paper's, the points."""
    lines = [
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
        lines += [f"![Fig. {r.setting.anchors.fig_frameworks}]({r.figures['frameworks']})", ""]
    lines += [
        "| panel | quantity | paper | ours: mean of ratios | ours: median of ratios | ours: ratio of totals | points used |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        for key, panel in (("vs_cost", "(a) varying C_i/D_i"), ("vs_req", "(b) varying ε_req")):
            imp = r.improvements[key]
            fig = f"Fig. {r.setting.anchors.fig_frameworks}{panel[:3]}"
            for q, pk in (("welfare", "paper_welfare"), ("incentive", "paper_incentive")):
                d = imp[q]
                lines.append(
                    f"| {fig} {panel[4:]} | {'welfare' if q == 'welfare' else 'incentive cost'} "
                    f"| {_pct(imp[pk])} | {_pct(d['mean_pct'])} | {_pct(d.get('median_pct'))} "
                    f"| {_pct(d['totals_pct'])} "
                    f"| {d['points_used']}/{d['points_total']} |"
                )
    for r in results:
        for sw, panel in ((r.fw_cost, "a"), (r.fw_req, "b")):
            lines += [
                "",
                f"Fig. {r.setting.anchors.fig_frameworks}({panel}) points ({r.setting.key}):",
                "",
            ]
            lines += _framework_points_md(sw)
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


def _findings(results: Sequence[Any], analysis: dict[str, SettingAnalysis]) -> list[str]:
    """Which of the paper's claims hold here and which do not, per setting, and why the
    percentages differ from the paper's."""
    lines = ["## What the comparison shows", ""]
    for r in results:
        a = analysis[r.setting.key]
        lines.append(_curvature_md(r))
        for key, label in (("cost", "varying cost"), ("req", "varying ε_req")):
            lines.append(_framework_checks_md(r, a.frameworks[key], label))
        if r.setting.key == "noniid_cnn":
            lines += _flat_welfare_md(r.setting.key, a.frameworks["req"]["w_mots_range"])
        for key, label in (("cost", "varying cost"), ("req", "varying ε_req")):
            lines += _mechanism_findings_md(r.setting.key, a.mechanisms[key], label)
    lines += [
        "- Why our percentages differ from the paper's: (1) Fashion-MNIST, not MNIST/CIFAR-10, and a "
        "different learning rate (logistic) and initialisation (CNN), so the measured ε levels and the "
        "fitted dγ², σ², ε0 differ; (2) U = 40·ε^−16 makes welfare scale like ε^−16, so the same relative "
        "network effect gives a very different welfare landscape at a different ε level; (3) the cost "
        "and ε_req axes cannot be the paper's numbers and are placed relative to our model (c0, [ε_min, "
        "ε_max]); (4) the paper does not define how its percentages are averaged; ours is stated above "
        "and its alternative (ratio of totals) shows how much the definition alone moves the number.",
        "",
    ]
    return lines


def _curvature_md(r: Any) -> str:
    """Whether the fitted model keeps the paper's curvature assumption (Section 2.A.3)."""
    t = r.setting.key
    if r.assumption_warnings:
        return (
            f"- {t} ({r.regime} regime): the fitted model breaks the paper's curvature assumption "
            "(ε − σ²)U″ + 2U′ ≥ 0 (Section 2.A.3, checked on the Eq. 3 part ε − ε0): "
            + "; ".join(r.assumption_warnings)
            + ". The measured loss carries an irreducible offset ε0 that Eq. 3 lacks; with it, "
            "U(ε0 + dγ²S/K²) is no longer convex along a type, which is what Proposition 1's "
            "all-or-none pattern rests on."
        )
    return (
        f"- {t} ({r.regime} regime): the paper's curvature assumption holds over the fitted "
        "model's error range."
    )


def _framework_checks_md(r: Any, c: dict[str, Any], label: str) -> str:
    """Proposition 3, Theorem 3's budget balance and Proposition 1's pattern along one sweep."""
    t = r.setting.key
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
        pts = ", ".join(f"{_num(u['x'])} → K* = {tuple(u['k'] or ())}" for u in c["non_vertex"])
        line += (
            f" **Proposition 1's all-or-none pattern fails** for the fitted model (low regime, where it "
            f"predicts K*_i ∈ {{0, N_i}}) at "
            f"{len(c['non_vertex'])} point(s): {pts}."
        )
    return line


def _flat_welfare_md(t: str, rng: list[float] | None) -> list[str]:
    """Fig. 9(b): whether the MoTS optimum's welfare stays constant across ε_req (Proposition 2)."""
    if rng is None:
        return []
    flat = abs(rng[1] - rng[0]) <= 1e-9 * max(1.0, abs(rng[1]))
    return [
        f"- {t}: across ε_req the MoTS optimum's welfare is "
        f"{'constant' if flat else 'not constant'} ({_num(rng[0])} to {_num(rng[1])}); the "
        "paper reports it constant in Fig. 9(b) (Proposition 2: maximising welfare and "
        "minimising ε coincide)."
    ]


def _mechanism_findings_md(t: str, table: list[dict[str, Any]], label: str) -> list[str]:
    """Theorem 3 (SWAN reaches K*) for both SWANs, and how the baselines fared, along one sweep."""
    rows = {row["name"]: row for row in table}
    lines = []
    if "swan" in rows and "swan_robust" in rows:
        paper, robust = rows["swan"]["at_optimum"], rows["swan_robust"]["at_optimum"]
        verdict = (
            "consistent with Theorem 3 here"
            if paper >= 1.0
            else "Theorem 3 claims SWAN reaches K*; the other runs stalled where single-client "
            "best responses cannot raise θ (docs/mechanisms.md characterises where)"
        )
        lines.append(
            f"- {t}, {label}: the paper's SWAN settled at K* in {paper:.0%} of runs, the robust "
            f"SWAN in {robust:.0%} — {verdict}."
        )
    for base in ("dynamic", "modified_fl"):
        if base in rows and "swan" in rows:
            b = rows[base]
            lines.append(
                f"- {t}, {label}: {base} reached K* in {b['at_optimum']:.0%} of runs, met ε_req "
                f"in {b['feasible']:.0%}, Σ welfare / Σ|W*| = {_num(b['welfare_sum_share'], 3)} "
                f"(paper's SWAN {_num(rows['swan']['welfare_sum_share'], 3)})."
            )
    return lines


def _files() -> list[str]:
    """What the output directory holds besides the report."""
    return [
        "## Files",
        "",
        "- `results.json`: every number above, per sweep point; `measured/<setting>-<profile>-<digest>.json`: "
        "the measured losses and the fit (re-used by later runs with the same configuration, so the report can be "
        "rebuilt without retraining).",
        "",
    ]
