"""The reproduction end to end: measure (or load) the error models, sweep, plot, compute improvements, report.

Output layout under ``out_dir``: ``measured/<setting>.json`` (training cache), ``results.json`` (every
number the figures and the report show), ``fig5_network_effects.png``, ``fig6_mechanisms_iid.png``,
``fig7_mechanisms_noniid.png``, ``fig8_frameworks_iid.png``, ``fig9_frameworks_noniid.png``, ``report.md``.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mots.economics.assumptions import curvature_warnings
from mots.economics.optimum import regime
from mots.reproduce import figures
from mots.reproduce.environment import describe_machine
from mots.reproduce.grids import (
    FixedValue,
    build_scenario,
    cost_axis,
    error_range,
    fixed_cost,
    fixed_requirement,
    requirement_axis,
    zero_welfare_cost,
)
from mots.reproduce.improvement import incentive_change, welfare_improvement
from mots.reproduce.measure import DEFAULT_DATA_DIR, Measurement, measure_setting
from mots.reproduce.settings import FULL, QUICK, SETTINGS, Profile, ProfileName, Setting
from mots.reproduce.sweeps import (
    MECHANISM_NAMES,
    FrameworkSweep,
    MechanismSweep,
    default_starts,
    framework_sweep,
    mechanism_sweep,
)

MECH_COST_FRACTION = 0.1
"""Fixed C_i/D_i of Figs. 6(b)/7(b) as a fraction of c0 (the paper's 0.002 / 0.07 are on its own scale)."""
FW_COST_FRACTION = 0.5
"""Fixed C_i/D_i of Figs. 8(b)/9(b) as a fraction of c0 (the paper's 0.01 / 1.8)."""


@dataclass(frozen=True)
class ReproduceOptions:
    """What to run: profile, where, how many runs/rounds/sweep points, which settings."""

    profile: Profile = QUICK
    out_dir: Path = Path("out/reproduce")
    data_dir: Path = DEFAULT_DATA_DIR
    settings: tuple[str, ...] = tuple(SETTINGS)
    points: int = 16
    """Sweep points per axis."""
    random_starts: int = 5
    """Random start states for the dynamics, on top of the three fixed ones."""
    reuse: bool = True
    """Reuse cached measurements whose configuration matches (and resume interrupted ones)."""
    workers: int = 1
    """Training processes run at once (many-core machines)."""
    command: str = "mots reproduce"

    @staticmethod
    def for_profile(
        name: ProfileName,
        *,
        seeds: int | None = None,
        rounds: int | None = None,
        test_subset: int | str | None = "default",
        **kw: Any,
    ) -> ReproduceOptions:
        """Options of the quick or full profile with optional overrides of runs, rounds and test subset."""
        base = QUICK if name == "quick" else FULL
        prof = replace(
            base,
            seeds=base.seeds if seeds is None else seeds,
            rounds_override=rounds,
            test_subset=base.test_subset if test_subset == "default" else test_subset,  # type: ignore[arg-type]
        )
        if prof.seeds < 1:
            raise ValueError(f"seeds: at least 1 run is needed, got {prof.seeds}")
        if rounds is not None and rounds < 1:
            raise ValueError(f"rounds: at least 1 round is needed, got {rounds}")
        return ReproduceOptions(profile=prof, **kw)


@dataclass
class SettingResult:
    """Everything one setting produced."""

    setting: Setting
    measurement: Measurement
    c0: float
    eps_min: float
    eps_max: float
    fixed: dict[str, FixedValue]
    mech_cost: MechanismSweep
    mech_req: MechanismSweep
    fw_cost: FrameworkSweep
    fw_req: FrameworkSweep
    improvements: dict[str, dict[str, Any]] = field(default_factory=dict)
    figures: dict[str, str] = field(default_factory=dict)
    regime: str = "low"
    assumption_warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "setting": self.setting.key,
            "title": self.setting.title,
            "measurement": self.measurement.to_dict(),
            "c0": self.c0,
            "eps_min": self.eps_min,
            "eps_max": self.eps_max,
            "fixed": {k: v.to_dict() for k, v in self.fixed.items()},
            "mechanisms_vs_cost": self.mech_cost.to_dict(),
            "mechanisms_vs_req": self.mech_req.to_dict(),
            "frameworks_vs_cost": self.fw_cost.to_dict(),
            "frameworks_vs_req": self.fw_req.to_dict(),
            "improvements": self.improvements,
            "figures": self.figures,
            "regime": self.regime,
            "assumption_warnings": self.assumption_warnings,
        }


def analyse_setting(
    setting: Setting,
    m: Measurement,
    points: int,
    random_starts: int,
    progress: Callable[[str], None] | None = None,
) -> SettingResult:
    """Sweeps of Figs. 6-9 for one setting, on the error model fitted to its measurements."""
    model = m.error_model()
    sizes = list(m.sizes)
    template = build_scenario(sizes, model, 0.0)
    c0 = zero_welfare_cost(template)
    eps_min, eps_max = error_range(template)
    a = setting.anchors
    fixed = {
        "mech_cost": fixed_cost(
            f"C_i/D_i, Fig. {a.fig_mechanisms}(b)", a.mech_cost, c0, MECH_COST_FRACTION
        ),
        "fw_eps_req": fixed_requirement(
            f"ε_req, Fig. {a.fig_frameworks}(a)", a.fw_eps_req, eps_min, eps_max
        ),
        "fw_cost": fixed_cost(
            f"C_i/D_i, Fig. {a.fig_frameworks}(b)", a.fw_cost, c0, FW_COST_FRACTION
        ),
    }
    costs = cost_axis(c0, points)
    reqs = requirement_axis(eps_min, eps_max, points)
    starts = default_starts(template.counts.tolist(), random_starts, seed=0)
    if progress:
        progress(f"{setting.key}: sweeps (c0={c0:.4g}, ε in [{eps_min:.4g}, {eps_max:.4g}])")
    mech_cost = mechanism_sweep(sizes, model, "cost", costs, math.inf, starts, MECHANISM_NAMES)
    mech_req = mechanism_sweep(sizes, model, "eps_req", reqs, fixed["mech_cost"].used, starts)
    fw_cost = framework_sweep(sizes, model, "cost", costs, fixed["fw_eps_req"].used)
    fw_req = framework_sweep(sizes, model, "eps_req", reqs, fixed["fw_cost"].used)
    res = SettingResult(
        setting, m, c0, eps_min, eps_max, fixed, mech_cost, mech_req, fw_cost, fw_req
    )
    res.regime = regime(template)
    res.assumption_warnings = [str(w) for w in curvature_warnings(template, eps_min)]
    res.improvements = {
        "vs_cost": {
            "welfare": welfare_improvement(fw_cost.w_mots, fw_cost.w_fl).to_dict(),
            "incentive": incentive_change(fw_cost.ic_mots, fw_cost.ic_fl).to_dict(),
            "paper_welfare": a.welfare_vs_cost,
            "paper_incentive": a.incentive_vs_cost,
        },
        "vs_req": {
            "welfare": welfare_improvement(fw_req.w_mots, fw_req.w_fl).to_dict(),
            "incentive": incentive_change(fw_req.ic_mots, fw_req.ic_fl).to_dict(),
            "paper_welfare": a.welfare_vs_req,
            "paper_incentive": a.incentive_vs_req,
        },
    }
    return res


def run_reproduction(
    options: ReproduceOptions, progress: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Measure, sweep, plot and report; returns the content of ``results.json``."""
    started = time.perf_counter()
    out = options.out_dir
    out.mkdir(parents=True, exist_ok=True)
    unknown = [k for k in options.settings if k not in SETTINGS]
    if unknown:
        raise ValueError(f"settings: unknown {unknown}; choose from {sorted(SETTINGS)}")
    results: list[SettingResult] = []
    for key in options.settings:
        setting = SETTINGS[key]
        m = measure_setting(
            setting,
            options.profile,
            out,
            data_dir=options.data_dir,
            reuse=options.reuse,
            workers=options.workers,
            progress=progress,
        )
        if progress:
            cached = " (cached)" if m.cached else ""
            progress(f"{key}: measured in {m.seconds:.1f} s{cached}; fit {m.fit}")
        results.append(analyse_setting(setting, m, options.points, options.random_starts, progress))
    return publish(results, options, started, progress)


def publish(
    results: Sequence[SettingResult],
    options: ReproduceOptions,
    started: float,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Draw the figures, write ``results.json`` and ``report.md`` for analysed settings."""
    from mots.reproduce.report import write_report

    out = options.out_dir
    out.mkdir(parents=True, exist_ok=True)
    _draw(results, out)
    doc: dict[str, Any] = {
        "generated": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": options.command,
        "profile": {
            "name": options.profile.name,
            "seeds": options.profile.seeds,
            "test_subset": options.profile.test_subset,
            "rounds": {r.setting.key: options.profile.rounds(r.setting) for r in results},
        },
        "points": options.points,
        "machine": describe_machine(),
        "settings": [r.to_dict() for r in results],
    }
    doc["seconds"] = time.perf_counter() - started
    (out / "results.json").write_text(json.dumps(doc, indent=1))
    write_report(doc, results, out / "report.md")
    if progress:
        progress(f"report: {out / 'report.md'} ({doc['seconds']:.0f} s)")
    return doc


FIGURE_NAMES = {
    "iid_logistic": ("fig6_mechanisms_iid.png", "fig8_frameworks_iid.png"),
    "noniid_cnn": ("fig7_mechanisms_noniid.png", "fig9_frameworks_noniid.png"),
}


def _draw(results: Sequence[SettingResult], out: Path) -> None:
    """Write every figure and record its file name on the setting's result."""
    fig5 = figures.network_effects_figure(
        [(r.setting.title, r.measurement) for r in results], out / "fig5_network_effects.png"
    )
    for r in results:
        r.figures["fig5"] = fig5.name
        mech_name, fw_name = FIGURE_NAMES[r.setting.key]
        a = r.setting.anchors
        figures.mechanisms_figure(
            [r.mech_cost, r.mech_req],
            f"Fig. {a.fig_mechanisms} — SWAN vs benchmark mechanisms ({r.setting.title})",
            out / mech_name,
        )
        figures.frameworks_figure(
            [r.fw_cost, r.fw_req],
            f"Fig. {a.fig_frameworks} — MoTS vs FL framework ({r.setting.title})",
            out / fw_name,
        )
        r.figures["mechanisms"] = mech_name
        r.figures["frameworks"] = fw_name
