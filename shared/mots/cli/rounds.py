"""`mots rounds open|ls|show|watch`: market rounds on the orchestration API."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import click

from mots.cli.client import Session, connection, decimal_amount, from_now, money, table
from mots.cli.errors import report
from mots.client.rounds import DEFAULT_LIST_LIMIT
from mots.platform.api.base import RoundState
from mots.platform.api.rounds import RoundDetail, RoundOut


@click.group("rounds")
def rounds() -> None:
    """Market rounds: open one (operator), list them, show one, watch one train and settle.

    Settings as for `mots market` (flags, MOTS_ORCHESTRATION_URL, MOTS_TOKEN or
    MOTS_OPERATOR_TOKEN, a profile, or `mots platform up`'s endpoints.json).

    \b
    Example:
      mots rounds open
      mots rounds watch 1
      mots rounds show 1 --json
    """


@rounds.command("open")
@click.option(
    "--task",
    help="the task the round trains (a task's name, as `mots tasks ls` lists them); one round "
    "per task at a time (default: fashion-mnist)",
)
@click.option(
    "--subsidy-budget",
    callback=decimal_amount,
    help="most the platform subsidises this round (default: the task's subsidy_budget; "
    "fashion-mnist: MOTS_ROUND_SUBSIDY_BUDGET)",
)
@click.option(
    "--collect-seconds",
    type=float,
    help="how long the round takes decisions, 1 to 86400 s; the silent then abstain "
    "(default: the task's collection window; fashion-mnist: MOTS_COLLECT_TIMEOUT_S, 60 s)",
)
@connection
def open_round(
    session: Session,
    task: str | None,
    subsidy_budget: Decimal | None,
    collect_seconds: float | None,
) -> None:
    """(operator) Open a market round of a task; its clients then see its quote and declare.

    \b
    Example:
      mots rounds open --subsidy-budget 5 --collect-seconds 120 --workdir /tmp/mots
      mots rounds open --task digits      # beside a fashion-mnist round in flight
    """
    with session.rounds(operator=True) as r:
        out = r.open_round(subsidy_budget, collect_seconds, task)
    what = "" if task is None else f" of task {task}"
    session.emit(out, f"round {out.round_id}{what} opened ({out.state.value})")


@rounds.command("ls")
@click.option(
    "--limit", type=click.IntRange(1, 1000), default=DEFAULT_LIST_LIMIT, show_default=True
)
@connection
def list_rounds(session: Session, limit: int) -> None:
    """The latest rounds, newest first: state, mechanism, price, K, ε.

    \b
    Example:
      mots rounds ls --limit 5
    """
    with session.rounds() as r:
        views = r.rounds(limit)
    rows = []
    for v in views:
        s = v.summary
        rows.append(
            (
                v.id,
                v.state.value,
                v.mechanism or "-",
                "-" if s is None else money(s.price),
                "-" if s is None else _coalition(s.participants),
                "-" if s is None else _float(s.epsilon),
                v.created_at.strftime("%Y-%m-%d %H:%M"),
            )
        )
    session.emit(views, table(rows, ("id", "state", "mechanism", "price", "K", "ε", "created")))


@rounds.command("show")
@click.argument("round_id", type=click.IntRange(1))
@connection
def show(session: Session, round_id: int) -> None:
    """A round's state, transitions, training progress and figures.

    \b
    Example:
      mots rounds show 1
    """
    with session.rounds() as r:
        view = r.require_round(round_id)
    session.emit(view, describe(view))


@rounds.command("watch")
@click.argument("round_id", type=click.IntRange(1))
@click.option("--timeout", "timeout_s", type=click.FloatRange(1), help="give up after SECONDS")
@click.option("--poll", "poll_s", type=click.FloatRange(0.05, 60), default=0.5, show_default=True)
@connection
def watch(session: Session, round_id: int, timeout_s: float | None, poll_s: float) -> None:
    """Follow a round until it is published or settled by rule: its state and FedAvg progress
    (a progress bar; with --json, one JSON line per change). Exits 0 only when the round
    published; 5 when it was settled by rule (code round-not-published), 4 on --timeout.

    \b
    Example:
      mots rounds watch 1 --timeout 600
    """
    with session.rounds() as r:
        updates = r.watch(round_id, poll_s=poll_s, timeout_s=timeout_s)
        last = _follow(updates, session.as_json)
    if not session.as_json:
        click.echo(describe(last))
    if last.state is not RoundState.PUBLISHED:  # issue 40: a script sees the round failed
        report(
            session.as_json,
            "round-not-published",
            f"round {last.id} was {last.state.value}, not published: {last.rule or 'no rule given'}",
            method="GET",
            path=f"/v1/rounds/{last.id}",
        )


def _follow(updates: Any, as_json: bool) -> RoundDetail:
    """Print each update (JSON lines, or a rich progress bar of the FedAvg rounds)."""
    from rich.progress import (
        BarColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    last: RoundDetail | None = None
    if as_json:
        for last in updates:
            click.echo(json.dumps(last.model_dump(mode="json", by_alias=True)))
        assert last is not None
        return last
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[fedavg]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, transient=False) as bar:
        task = bar.add_task("open", total=None, fedavg="")
        for last in updates:
            p = last.training_progress
            done = 0 if p is None else p.fedavg_round - (1 if p.in_progress else 0)
            eps = "" if p is None or p.epsilon is None else f", ε {p.epsilon:.4f}"
            bar.update(
                task,
                description=f"round {last.id}: {last.state.value}{eps}",
                total=None if p is None else p.fedavg_rounds,
                completed=done,
                fedavg="" if p is None else f"{done}/{p.fedavg_rounds} FedAvg rounds",
            )
    assert last is not None
    return last


def describe(v: RoundOut) -> str:
    """A round in a few lines: state, mechanism, its task and pinned version, progress, figures,
    transitions."""
    lines = [f"round {v.id}: {v.state.value} (mechanism {v.mechanism or '-'})"]
    if v.task_version is None:  # a round opened before versions were pinned (issue 36)
        lines.append(f"task {v.task}, version not pinned (its latest)")
    else:
        lines.append(f"task {v.task}, version {v.task_version} (pinned when the round opened)")
    if v.rule:
        lines.append(f"settled by rule: {v.rule}")
    due = v.deadline()
    if due is not None:
        left = due - time.time()
        at = datetime.fromtimestamp(due, UTC).strftime("%H:%M:%S")
        lines.append(f"deadline of {v.state.value}: {at} UTC ({from_now(left)})")
    p = v.training_progress
    if p is not None:
        lines.append(
            f"FedAvg {p.fedavg_round}/{p.fedavg_rounds}: {p.clients_done}/{p.clients} clients, "
            f"ε {_float(p.epsilon)}{' (in progress)' if p.in_progress else ''}"
        )
    s = v.summary
    if s is not None:
        lines.append(
            f"K {_coalition(s.participants)}, B {_coalition(s.buyers)}, "
            f"price {money(s.price)}, welfare {_float(s.welfare)}, "
            f"incentive cost {money(s.incentive_cost)}"
        )
        lines.append(
            f"ε measured {_float(s.epsilon)}, predicted {_float(s.epsilon_predicted)}"
            f", equilibrium {s.equilibrium}, round {_float(s.round_seconds, 1)} s"
        )
        if s.verification:
            lines.append(
                "participants: " + ", ".join(f"{c} {o}" for c, o in s.verification.items())
            )
        if s.rewards and v.state is RoundState.PUBLISHED:
            lines.append("rewards " + ", ".join(f"{t} {money(r)}" for t, r in s.rewards.items()))
        elif s.rewards:  # issue 40: a round settled by rule pays none of its quoted rewards
            lines.append(
                "no reward paid, no charge made, every buyer refunded (settled by rule); the"
                " quoted rewards were " + ", ".join(f"{t} {money(r)}" for t, r in s.rewards.items())
            )
    moves = v.transitions if isinstance(v, RoundDetail) else []
    if moves:  # each state with the time the round spent in it (issue 26)
        spent = [f"{t.from_state.value} {_float(t.seconds_in_from, 1)} s" for t in moves]
        lines.append("states: " + " → ".join([*spent, moves[-1].to.value]))
    return "\n".join(lines)


def _coalition(counts: dict[str, int]) -> str:
    """K or B per type as ``type=n`` pairs (or ``-``)."""
    return ",".join(f"{t}={n}" for t, n in counts.items()) or "-"


def _float(x: float | None, places: int = 4) -> str:
    return "-" if x is None else f"{float(x):.{places}f}"


commands: list[click.Command] = [rounds]
