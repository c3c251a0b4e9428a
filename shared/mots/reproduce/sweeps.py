"""Parameter sweeps over C_i/D_i and ε_req: MoTS against FL (Figs. 8-9) and SWAN against the baselines (Figs. 6-7).

Each point builds the paper's market (:func:`mots.reproduce.grids.build_scenario`) from a fitted error
model and asks the economics core for optima, or runs the clients' best-response dynamics under each
mechanism. An infeasible point (ε_req below ε_min, or a mechanism whose market settles above ε_req)
is recorded as NaN, never as a number.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from mots.economics import ErrorModel, Scenario
from mots.economics.error import generalization_error
from mots.economics.optimum import (
    RequirementInfeasibleError,
    solve_fl_optimum,
    solve_mots_optimum,
)
from mots.reproduce.grids import build_scenario

Axis = Literal["cost", "eps_req"]
NAN = math.nan

MECHANISM_NAMES: tuple[str, ...] = ("swan", "swan_robust", "dynamic", "modified_fl")
"""Mechanisms compared in Figs. 6-7: the paper's SWAN, the platform's robust SWAN and the two baselines."""


def _scenario_at(
    sizes: Sequence[float], model: ErrorModel, axis: Axis, x: float, fixed: float
) -> Scenario:
    """The market at one sweep point: x is C_i/D_i (fixed = ε_req, inf = none) or ε_req (fixed = C_i/D_i)."""
    if axis == "cost":
        return build_scenario(list(sizes), model, x, None if math.isinf(fixed) else fixed)
    if axis == "eps_req":
        return build_scenario(list(sizes), model, fixed, x)
    raise ValueError(f"axis: must be 'cost' or 'eps_req', got {axis!r}")


@dataclass
class FrameworkSweep:
    """MoTS's optimum (with SWAN's incentive cost) against the FL framework's optimum along one axis."""

    axis: Axis
    fixed: float
    x: list[float]
    w_mots: list[float] = field(default_factory=list)
    w_fl: list[float] = field(default_factory=list)
    ic_mots: list[float] = field(default_factory=list)
    ic_fl: list[float] = field(default_factory=list)
    eps_mots: list[float] = field(default_factory=list)
    eps_fl: list[float] = field(default_factory=list)
    k_mots: list[list[int] | None] = field(default_factory=list)
    k_fl: list[list[int] | None] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (NaN → None)."""
        out: dict[str, Any] = _jsonable(self.__dict__)
        return out


def framework_sweep(
    sizes: Sequence[float], model: ErrorModel, axis: Axis, xs: Sequence[float], fixed: float
) -> FrameworkSweep:
    """W_MoTS(K*, B*) (Problem 2) with SWAN's incentive cost, and W_FL's optimum (Eq. 15) with break-even payments."""
    from mots.economics.mechanisms.registry import get_mechanism

    out = FrameworkSweep(axis, fixed, [float(v) for v in xs])
    for x in xs:
        sc = _scenario_at(sizes, model, axis, x, fixed)
        try:
            opt = solve_mots_optimum(sc)
            fl = solve_fl_optimum(sc)
        except RequirementInfeasibleError:
            for series in (out.w_mots, out.w_fl, out.ic_mots, out.ic_fl, out.eps_mots, out.eps_fl):
                series.append(NAN)
            out.k_mots.append(None)
            out.k_fl.append(None)
            continue
        swan = get_mechanism("swan", sc)
        fl_mech = get_mechanism("fl_optimum", sc)
        out.w_mots.append(float(opt.welfare))
        out.w_fl.append(float(fl.welfare))
        out.ic_mots.append(float(swan.incentive_cost(opt.participants, opt.buyers)))
        out.ic_fl.append(
            float(fl_mech.incentive_cost(fl.participants, np.zeros_like(fl.participants)))
        )
        out.eps_mots.append(float(opt.epsilon))
        out.eps_fl.append(float(fl.epsilon))
        out.k_mots.append([int(v) for v in opt.participants])
        out.k_fl.append([int(v) for v in fl.participants])
    return out


def default_starts(counts: Sequence[int], extra: int, seed: int) -> list[list[int]]:
    """Start states for the dynamics: one smallest client, all type-1, all clients, plus ``extra`` seeded random ones."""
    n = [int(c) for c in counts]
    starts = [[1] + [0] * (len(n) - 1), [n[0]] + [0] * (len(n) - 1), list(n)]
    rng = np.random.default_rng(seed)
    while len(starts) < 3 + extra:
        k = [int(rng.integers(0, c + 1)) for c in n]
        if sum(k) > 0 and k not in starts:
            starts.append(k)
    return starts


@dataclass
class MechanismSeries:
    """One mechanism along a sweep: means over start states; NaN where no start meets ε_req."""

    name: str
    welfare: list[float] = field(default_factory=list)
    incentive_cost: list[float] = field(default_factory=list)
    moves: list[float] = field(default_factory=list)
    reached_optimum: list[float] = field(default_factory=list)
    """Fraction of starts whose market settled at K*."""
    feasible: list[float] = field(default_factory=list)
    """Fraction of starts whose final state meets ε_req."""
    converged: list[float] = field(default_factory=list)
    """Fraction of starts that ended at an equilibrium (not a cycle or the move limit)."""


@dataclass
class MechanismSweep:
    """SWAN and the baselines along one axis, with the optimum W_MoTS* for reference."""

    axis: Axis
    fixed: float
    x: list[float]
    starts: list[list[int]]
    optimum: list[float] = field(default_factory=list)
    series: dict[str, MechanismSeries] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (NaN → None)."""
        d = dict(self.__dict__)
        d["series"] = {k: dict(v.__dict__) for k, v in self.series.items()}
        out: dict[str, Any] = _jsonable(d)
        return out


def _settle(
    sc: Scenario, name: str, starts: Sequence[Sequence[int]], max_moves: int
) -> list[tuple[np.ndarray, np.ndarray, int, bool]]:
    """Run the clients' dynamics under mechanism ``name`` from each start (or from its own start)."""
    from mots.economics.dynamics import run_dynamics
    from mots.economics.mechanisms.registry import get_mechanism

    mech = get_mechanism(name, sc)
    own = mech.start_state()
    runs = []
    todo: list[tuple[Any, Any]] = [own] if own is not None else [(s, None) for s in starts]
    for k0, b0 in todo:
        res = run_dynamics(sc, mech, k0, b0, max_moves=max_moves)
        k = np.asarray(res.final_participants, dtype=np.int64)
        b = np.asarray(res.final_buyers, dtype=np.int64)
        runs.append((k, b, int(res.moves), bool(res.converged)))
    return runs


def mechanism_sweep(
    sizes: Sequence[float],
    model: ErrorModel,
    axis: Axis,
    xs: Sequence[float],
    fixed: float,
    starts: Sequence[Sequence[int]],
    names: Sequence[str] = MECHANISM_NAMES,
    max_moves: int = 10_000,
    progress: Callable[[str], None] | None = None,
) -> MechanismSweep:
    """Each mechanism's settled welfare (Eq. 5), incentive cost Σ(K_i r_i − B_i p) and moves at every point."""
    from mots.economics.mechanisms.registry import get_mechanism
    from mots.economics.welfare import welfare_mots

    out = MechanismSweep(axis, fixed, [float(v) for v in xs], [list(s) for s in starts])
    out.series = {n: MechanismSeries(n) for n in names}
    for x in xs:
        sc = _scenario_at(sizes, model, axis, x, fixed)
        try:
            opt = solve_mots_optimum(sc)
        except RequirementInfeasibleError:
            out.optimum.append(NAN)
            for s in out.series.values():
                for series in (s.welfare, s.incentive_cost, s.moves, s.reached_optimum):
                    series.append(NAN)
                s.feasible.append(0.0)
                s.converged.append(NAN)
            continue
        out.optimum.append(float(opt.welfare))
        for name in names:
            runs = _settle(sc, name, starts, max_moves)
            mech = get_mechanism(name, sc)
            ws, ics, ok, at_opt = [], [], [], []
            for k, b, _moves, _conv in runs:
                eps = float(generalization_error(k, sc.sizes, sc.error_model))
                meets = eps <= sc.eps_req_value
                ok.append(meets)
                at_opt.append(bool(np.array_equal(k, opt.participants)))
                if meets:
                    ws.append(float(welfare_mots(sc, k, b)))
                    ics.append(float(mech.incentive_cost(k, b)))
            s = out.series[name]
            s.welfare.append(float(np.mean(ws)) if ws else NAN)
            s.incentive_cost.append(float(np.mean(ics)) if ics else NAN)
            s.moves.append(float(np.mean([r[2] for r in runs])))
            s.reached_optimum.append(float(np.mean(at_opt)))
            s.feasible.append(float(np.mean(ok)))
            s.converged.append(float(np.mean([r[3] for r in runs])))
        if progress is not None:
            progress(f"{axis}={x:.4g}")
    return out


def _jsonable(value: Any) -> Any:
    """Replace non-finite floats by None, recursively, so that the JSON is standard."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return _jsonable(value.item())
    return value
