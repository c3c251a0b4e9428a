"""`mots solve | dynamics | effects | compare | mechanisms`: the economics core on a scenario file."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import click
import numpy as np
from rich import box
from rich.console import Console
from rich.table import Table

from mots.economics.assumptions import curvature_warnings
from mots.economics.comparison import compare_mechanisms
from mots.economics.dynamics import run_dynamics
from mots.economics.error import generalization_error
from mots.economics.mechanisms.registry import (
    DEFAULT_MECHANISM,
    MECHANISMS,
    get_mechanism,
)
from mots.economics.network_effects import eta, type_effect
from mots.economics.optimum import RequirementInfeasibleError, min_error
from mots.economics.scenario import Scenario
from mots.economics.summary import market_summary
from mots.scenario_file import (
    ScenarioError,
    ScenarioFileError,
    ScenarioRangeError,
    check_range,
    load_scenario,
)

_SCENARIO_HELP = (
    "SCENARIO is a YAML or JSON file: types (name, count N_i, data_size D_i, cost C_i) in increasing "
    "data size, error_model {d_gamma2 | d + gamma2, sigma2, eps0}, utility {kind: power|exponential, …} "
    "and an optional eps_req. See examples/scenarios/."
)

scenario_argument = click.argument(
    "scenario_path", metavar="SCENARIO", type=click.Path(dir_okay=False, path_type=Path)
)
JSON_DIGITS = 12
"""Significant digits of every float the economics commands print as JSON (issue 26: no
``1.0500000000000003``; the solver's own precision is far coarser than 12 digits)."""
json_option = click.option(
    "--json",
    "as_json",
    is_flag=True,
    help=f"Print machine-readable JSON (floats rounded to {JSON_DIGITS} significant digits).",
)
eps_req_option = click.option(
    "--eps-req",
    type=float,
    default=None,
    help="Override the scenario's error requirement ε_req ('inf' for none).",
)


class InputError(click.ClickException):
    """Input the command cannot use (an unreadable file, counts beyond the solver's range): one
    line on stderr, ``Error: <file or field>: <rule>``, and exit status 2 like a usage error."""

    exit_code = 2


def _load(path: Path, eps_req: float | None = None) -> Scenario:
    try:
        scenario = check_range(load_scenario(path), str(path))
    except (ScenarioFileError, ScenarioRangeError) as err:
        raise InputError(str(err)) from err
    except ScenarioError as err:
        raise click.UsageError(str(err)) from err
    if eps_req is not None:
        if math.isnan(eps_req) or eps_req <= 0:
            raise click.BadParameter("must be a number > 0 or 'inf'", param_hint="--eps-req")
        scenario = scenario.with_eps_req(eps_req)
    return scenario


def _parse_counts(text: str, scenario: Scenario, option: str) -> np.ndarray:
    """'1,0,3' → per-type counts, each an integer 0 ≤ K_i ≤ N_i, one per type."""
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != scenario.n_types:
        raise click.BadParameter(
            f"needs one count per type ({scenario.n_types}: "
            f"{', '.join(t.name for t in scenario.types)}), got {len(parts)}",
            param_hint=option,
        )
    counts = []
    for t, p in zip(scenario.types, parts, strict=True):
        if not p.isdigit():
            raise click.BadParameter(
                f"count for type {t.name!r} must be a whole number ≥ 0, got {p!r}",
                param_hint=option,
            )
        if int(p) > t.count:
            raise click.BadParameter(
                f"count for type {t.name!r} is {p}, above its N_i = {t.count}", param_hint=option
            )
        counts.append(int(p))
    return np.array(counts, dtype=np.int64)


def _fmt(x: float) -> str:
    """Six significant digits; float residue below 1e-9 (e.g. a balanced budget) prints as 0."""
    return "0" if abs(x) < 1e-9 else f"{x:.6g}"


def _rounded(doc: Any) -> Any:
    """``doc`` with every finite float rounded to :data:`JSON_DIGITS` significant digits."""
    if isinstance(doc, float):
        return float(f"{doc:.{JSON_DIGITS}g}") if math.isfinite(doc) else doc
    if isinstance(doc, dict):
        return {k: _rounded(v) for k, v in doc.items()}
    if isinstance(doc, list | tuple):
        return [_rounded(v) for v in doc]
    return doc


def _emit_json(doc: Any) -> None:
    click.echo(json.dumps(_rounded(doc), indent=2, allow_nan=True))


def _warn(scenario: Scenario, eps_min: float) -> None:
    err = Console(stderr=True)
    for w in curvature_warnings(scenario, eps_min):
        err.print(f"[yellow]warning:[/] {w}; Proposition 1 and Theorem 3 may not hold there")


@click.command()
@scenario_argument
@json_option
@eps_req_option
def solve(scenario_path: Path, as_json: bool, eps_req: float | None) -> None:
    """The welfare-maximising social state, SWAN's price and rewards there, and the FL framework's best.

    Solves Problem 2 exactly (the state K* of participants per type, everybody else buying, Lemma 1),
    then SWAN's schedule at K* (Mechanism 1: τ of Eq. 13, L0, λ, price p and rewards r_i) and the plain
    FL framework's best state with the payments its participants need to break even (Proposition 3).

    \b
    Example:
      mots solve examples/scenarios/paper_mnist.yaml
      mots solve examples/scenarios/paper_mnist.yaml --eps-req 1.2 --json

    The JSON has exactly the keys regime, eps_min, optimum {participants, buyers, welfare, epsilon},
    mechanism {price, rewards, tau, L0, lambda, incentive_cost} and fl_optimum {participants, welfare,
    epsilon, incentive_cost}; lists are in the scenario's type order.
    """
    scenario = _load(scenario_path, eps_req)
    try:
        doc = market_summary(scenario)
    except RequirementInfeasibleError as err:
        raise click.UsageError(str(err)) from err
    _warn(scenario, doc["eps_min"])
    if as_json:
        _emit_json(doc)
        return
    con = Console()
    opt, mech, fl = doc["optimum"], doc["mechanism"], doc["fl_optimum"]
    req = "none" if scenario.eps_req is None else _fmt(scenario.eps_req)
    con.print(
        f"[bold]{scenario_path}[/]: {scenario.n_clients} clients in {scenario.n_types} types, "
        f"{doc['regime']} heterogeneity regime, ε_min = {_fmt(doc['eps_min'])}, ε_req = {req}"
    )
    table = Table(title="Optimal social state K* under SWAN (MoTS) and the FL framework's best")
    for col in ("type", "N_i", "D_i", "C_i", "K*_i (join)", "B*_i (buy)", "reward r_i", "FL K_i"):
        table.add_column(col, justify="right" if col != "type" else "left")
    for i, t in enumerate(scenario.types):
        table.add_row(
            t.name, str(t.count), _fmt(t.data_size), _fmt(t.cost), str(opt["participants"][i]),
            str(opt["buyers"][i]), _fmt(mech["rewards"][i]), str(fl["participants"][i]),
        )  # fmt: skip
    con.print(table)
    tau = "→ 0+ (W* ≤ 0)" if doc["optimum"]["welfare"] <= 0 else _fmt(mech["tau"])
    con.print(
        f"MoTS: welfare W* = {_fmt(opt['welfare'])}, ε = {_fmt(opt['epsilon'])}, price p = "
        f"{_fmt(mech['price'])}, incentive cost = {_fmt(mech['incentive_cost'])}\n"
        f"SWAN: τ = {tau}, L0 = {_fmt(mech['L0'])}, λ = {_fmt(mech['lambda'])}\n"
        f"FL:   welfare = {_fmt(fl['welfare'])}, ε = {_fmt(fl['epsilon'])}, "
        f"incentive cost = {_fmt(fl['incentive_cost'])}"
    )


@click.command()
@scenario_argument
@click.option(
    "--start",
    required=True,
    metavar="K1,K2,...",
    help="Participants per type at the start; everybody else buys unless --start-buyers is given.",
)
@click.option(
    "--start-buyers", default=None, metavar="B1,B2,...", help="Buyers per type at the start."
)
@click.option(
    "--mechanism",
    "mechanism_name",
    default=DEFAULT_MECHANISM,
    show_default=True,
    help="Which mechanism publishes the schedule (`mots mechanisms` lists them).",
)
@click.option(
    "--max-moves", default=1_000_000, show_default=True, help="Stop after this many moves."
)
@click.option(
    "--order",
    type=click.Choice(["deterministic", "random"]),
    default="deterministic",
    show_default=True,
    help="Who moves next: classes swept in order, or a random improving client.",
)
@click.option("--seed", type=int, default=None, help="Seed for --order random.")
@json_option
@eps_req_option
def dynamics(
    scenario_path: Path,
    start: str,
    start_buyers: str | None,
    mechanism_name: str,
    max_moves: int,
    order: str,
    seed: int | None,
    as_json: bool,
    eps_req: float | None,
) -> None:
    """Let self-interested clients best-respond, one at a time, to a mechanism's published schedule.

    Each client knows only the price and reward schedule and the current aggregate state (incomplete
    information) and picks join, buy or abstain to maximise its own payoff (Eq. 6). The last
    participant cannot leave: nobody can buy a model that nobody trains.

    \b
    Example (issue 2's stall: paper SWAN stops at (1, 0), the platform's default reaches K* = (4, 4)):
      mots dynamics examples/scenarios/stall.yaml --start 1,0 --mechanism swan
      mots dynamics examples/scenarios/stall.yaml --start 1,0

    JSON keys: final [K_i], moves, welfare, converged.
    """
    scenario = _load(scenario_path, eps_req)
    k0 = _parse_counts(start, scenario, "--start")
    b0 = None if start_buyers is None else _parse_counts(start_buyers, scenario, "--start-buyers")
    if b0 is not None and np.any(k0 + b0 > scenario.counts):
        raise click.BadParameter(
            "participants plus buyers exceed N_i for some type", param_hint="--start-buyers"
        )
    try:
        mech = get_mechanism(mechanism_name, scenario)
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint="--mechanism") from err
    except RequirementInfeasibleError as err:
        raise click.UsageError(str(err)) from err
    result = run_dynamics(scenario, mech, k0, b0, max_moves=max_moves, order=order, seed=seed)  # type: ignore[arg-type]
    if as_json:
        _emit_json(
            {
                "final": result.final_participants.tolist(),
                "moves": result.moves,
                "welfare": result.welfare,
                "converged": result.converged,
            }
        )
        return
    con = Console()
    con.print(
        f"{mech.name}: from K = {k0.tolist()} to K = {result.final_participants.tolist()}, "
        f"B = {result.final_buyers.tolist()} after {result.moves} moves ({result.reason})\n"
        f"welfare = {_fmt(result.welfare)}, ε = {_fmt(result.epsilon)}"
    )


@click.command()
@scenario_argument
@click.option(
    "--coalition", required=True, metavar="K1,K2,...", help="Participants per type (non-empty)."
)
@json_option
def effects(scenario_path: Path, coalition: str, as_json: bool) -> None:
    """Network effects of one more client of each type joining a coalition (Section 3.A).

    Prints ε of the coalition, Theorem 1's η, and for each type j Definition 2's effect
    ε_K − ε_{K∪{n}}, Theorem 2's region (I–IV) and, where the sign reverses as more type-j clients
    join, the count K_j from which it does.

    \b
    Example (Fig. 5's dashed curve: the error peaks at K1 = 3, then falls):
      mots effects examples/scenarios/paper_mnist.yaml --coalition 0,0,5
    """
    scenario = _load(scenario_path)
    k = _parse_counts(coalition, scenario, "--coalition")
    if k.sum() == 0:
        raise click.BadParameter("must be non-empty (some K_i ≥ 1)", param_hint="--coalition")
    em, sizes = scenario.error_model, scenario.sizes
    eps = float(generalization_error(k, sizes, em))
    h = eta(k, sizes, em)
    rows: list[dict[str, Any]] = []
    for j, t in enumerate(scenario.types):
        v = type_effect(k, j, sizes, em)
        rows.append(
            {
                "type": t.name,
                "effect": v.first_effect,
                "region": v.region.value,
                "meaning": v.region.description,
                "reversal_at": v.reversal_at,
            }
        )
    if as_json:
        _emit_json({"coalition": k.tolist(), "epsilon": eps, "eta": h, "types": rows})
        return
    con = Console()
    con.print(
        f"coalition K = {k.tolist()}: ε = {_fmt(eps)}, η = {_fmt(h)}, σ²/(dγ²) = {_fmt(em.heterogeneity_ratio)}"
    )
    table = Table(title="One more client of each type (Definition 2, Theorem 2)")
    for col in ("type", "1/D_j", "effect ε_K − ε_K+1", "region", "as more join", "reverses at K_j"):
        table.add_column(col)
    for t, r in zip(scenario.types, rows, strict=True):
        table.add_row(
            t.name, _fmt(1 / t.data_size), _fmt(r["effect"]), r["region"], r["meaning"],
            "-" if r["reversal_at"] is None else str(r["reversal_at"]),
        )  # fmt: skip
    con.print(table)


@click.command()
@scenario_argument
@click.option(
    "--start", default=None, metavar="K1,K2,...", help="Common start (default: empty network)."
)
@json_option
@eps_req_option
def compare(scenario_path: Path, start: str | None, as_json: bool, eps_req: float | None) -> None:
    """SWAN against the baselines: where each market settles, its welfare, incentive cost and moves.

    Runs every mechanism's best-response dynamics (the Dynamic baseline and the FL optimum use their
    own starts) and tabulates the final state, W_MoTS, whether ε ≤ ε_req, the platform's incentive
    cost Σ(K_i r_i − B_i p) and the number of single-client moves.

    \b
    Example:
      mots compare examples/scenarios/paper_mnist.yaml
    """
    scenario = _load(scenario_path, eps_req)
    k0 = None if start is None else _parse_counts(start, scenario, "--start")
    try:
        eps_min, _ = min_error(scenario)
        if scenario.eps_req is not None and scenario.eps_req < eps_min:
            raise RequirementInfeasibleError(scenario.eps_req, eps_min)
        rows = compare_mechanisms(scenario, k0)
    except RequirementInfeasibleError as err:
        raise click.UsageError(str(err)) from err
    if as_json:
        _emit_json([r.as_dict() for r in rows])
        return
    print_comparison(rows, f"Mechanisms on {scenario_path} (ε_min = {_fmt(eps_min)})")


COMPARE_LEGEND = (
    "K, B: final participants and buyers per type; W: welfare W_MoTS; ok: ε ≤ ε_req; "
    "cost: incentive cost Σ(K_i r_i − B_i p); stop: eq = equilibrium, cycle = a state repeated, "
    "max = move limit reached."
)
_STOP = {"equilibrium": "eq", "cycle": "cycle", "move limit": "max"}


def _short(x: float) -> str:
    """Four significant digits (the JSON keeps every digit); residue below 1e-9 prints as 0."""
    return "0" if abs(x) < 1e-9 else f"{x:.4g}"


def print_comparison(rows: list[Any], title: str, console: Console | None = None) -> None:
    """The comparison as a table that fits 80 columns (short headers, counts without brackets,
    four significant digits; never truncated) and its legend."""
    con = console or Console()
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, title_justify="left")
    for col in ("mechanism", "K", "B", "W", "ε", "ok", "cost", "moves", "stop"):
        right = col in ("W", "ε", "cost", "moves")
        counts = col in ("K", "B")  # one count per type: may wrap (folded), never cut
        table.add_column(
            col,
            no_wrap=not counts,
            overflow="fold" if counts else "ellipsis",
            justify="right" if right else "left",
        )
    for r in rows:
        table.add_row(
            r.mechanism, ",".join(map(str, r.final_participants.tolist())),
            ",".join(map(str, r.final_buyers.tolist())), _short(r.welfare), _short(r.epsilon),
            "yes" if r.meets_requirement else "no", _short(r.incentive_cost), str(r.moves),
            _STOP.get(r.reason, r.reason),
        )  # fmt: skip
    con.print(table)
    con.print(COMPARE_LEGEND, highlight=False)


@click.command(name="mechanisms")
def mechanisms_command() -> None:
    """List the mechanisms `--mechanism` accepts; the platform's default is marked.

    \b
    Example:
      mots mechanisms
      mots solve examples/scenarios/paper_mnist.yaml --json   # uses the default
    """
    for name, cls in MECHANISMS.items():
        mark = " (default)" if name == DEFAULT_MECHANISM else ""
        click.echo(f"{name}{mark}: {cls.description}")


def main_error(message: str) -> None:
    """Print an error the way click does and exit 2 (for callers outside click)."""
    click.echo(f"Error: {message}", err=True)
    sys.exit(2)


commands: list[click.Command] = [solve, dynamics, effects, compare, mechanisms_command]
