"""Rounds of several tasks at once (issue 36, Measure): each task's round alone, then two and
three tasks' rounds at once, on the same platform and federations.

Run with ``make bench-tasks`` (``.venv/bin/python -m benchmarks.bench_tasks``). Starts the four
services (Flower's deployment engine for every task, each task on a local federation of its own:
fashion-mnist with the demo's 20 clients; digits and breast-cancer stored from their task files,
each with its file's clients), then runs five rows (after a warm-up round of all three that
starts their federations, not counted): each task alone (``fashion-mnist``, ``digits``,
``breast-cancer``: every task trains its own FedAvg rounds, so each has its own single-task
round); ``fashion-mnist`` and ``digits`` at once; all three at once. In each row every task's
round is opened and its clients best-respond to its own quote before the next task's round
opens, so the rounds overlap from collection to publication. Writes out/bench/tasks.json, per row
``{"tasks", "round_s" (each task's round wall time), "platform_seconds" (each task's round less
its training and evaluation), "ledger_balanced"}`` with each task's phases and FedAvg rounds'
seconds, and per row of several tasks each round's ratio to the same task's round alone in this
run. Target (issue 36): with two tasks at once each round takes at most 1.3× that task's round
alone; the verdict is per task. Exits 1 if a round ends in any state but published or the ledger
check fails.
"""

from __future__ import annotations

import argparse
import json
import shutil
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx

from mots.client import MarketClient
from mots.economics.utility import PowerUtility
from mots.local.agents import register_population
from mots.local.demo import (
    DEMO_TYPES,
    DEMO_UTILITY,
    TaskRound,
    enrol_task,
    open_task_round,
    wait_round,
)
from mots.local.keys import process_secrets
from mots.local.launcher import Stack, exit_on_sigterm

OPERATOR_TOKEN = process_secrets().operator_token
OPERATOR = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
TASKS = ("fashion-mnist", "digits", "breast-cancer")
SOLO_ROWS = tuple([t] for t in TASKS)
"""Each task's round alone: the baseline its rounds beside other tasks' are divided by."""
ROWS = (*SOLO_ROWS, ["fashion-mnist", "digits"], list(TASKS))
TARGET = 1.3
"""Each round of two tasks at once at most this many times the same task's round alone."""


def _row(
    tasks: list[str], rounds: dict[str, TaskRound], orch: httpx.Client, market: MarketClient
) -> dict[str, Any]:
    """Open each task's round (its clients declare), wait for all; the row's figures."""
    for task in tasks:
        open_task_round(orch, market, rounds[task])
    bodies = {t: wait_round(orch, rounds[t].round_id, 1200) for t in tasks}
    check = market.with_token(OPERATOR_TOKEN).ledger_check()
    balanced = (
        check.unbalanced_transactions == 0 and check.mismatched_accounts == 0 and check.total == 0
    )
    summaries = {t: b["summary"] for t, b in bodies.items()}

    def platform(s: dict[str, Any]) -> float:
        phases = s["phase_seconds"]
        work = phases.get("training", 0.0) + phases.get("evaluating", 0.0)
        return float(s["round_seconds"] - work)

    return {
        "tasks": tasks,
        "states": {t: s["state"] for t, s in summaries.items()},
        "round_s": {t: s["round_seconds"] for t, s in summaries.items()},
        "platform_seconds": {t: platform(s) for t, s in summaries.items()},
        "phase_seconds": {t: s["phase_seconds"] for t, s in summaries.items()},
        "fedavg_round_seconds": {t: s.get("training_round_seconds") for t, s in summaries.items()},
        "ledger_balanced": balanced,
        "ledger_total": str(Decimal(check.total)),
    }


def ratios_to_alone(
    rows: list[dict[str, Any]],
) -> tuple[dict[str, float], dict[str, Any], dict[str, str]]:
    """Each task's round alone; every row of several tasks gets ``ratio_to_alone`` (each task's
    round over the same task's round alone, never another task's); the two-task row and its
    verdict per task against :data:`TARGET`."""
    solo = {r["tasks"][0]: r["round_s"][r["tasks"][0]] for r in rows if len(r["tasks"]) == 1}
    for r in rows:
        if len(r["tasks"]) > 1:
            r["ratio_to_alone"] = {t: x / solo[t] for t, x in r["round_s"].items()}
    pair = next(r for r in rows if len(r["tasks"]) == 2)
    verdict = {t: "met" if x <= TARGET else "missed" for t, x in pair["ratio_to_alone"].items()}
    return solo, pair, verdict


def _table(rows: list[dict[str, Any]], solo: dict[str, float]) -> str:
    """One line per task per row: its round, the same task's round alone, their ratio."""
    lines = [
        f"{'tasks at once':<36} {'task':<14} {'round s':>8} {'alone s':>8} {'ratio':>6} "
        f"{'training s':>10} {'platform s':>10} ledger"
    ]
    for r in rows:
        for t, sec in r["round_s"].items():
            ratio = r.get("ratio_to_alone", {}).get(t)
            lines.append(
                f"{', '.join(r['tasks']):<36} {t:<14} {sec:>8.1f} {solo[t]:>8.1f} "
                f"{'–' if ratio is None else f'{ratio:.2f}×':>6} "
                f"{r['phase_seconds'][t].get('training', 0.0):>10.1f} "
                f"{r['platform_seconds'][t]:>10.2f} {'yes' if r['ledger_balanced'] else 'NO'}"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train-rounds", type=int, default=5, help="FedAvg rounds (fashion)")
    parser.add_argument("--trainer", choices=["deployment", "inprocess"], default="deployment")
    parser.add_argument("--out", type=Path, default=Path("out/bench"))
    args = parser.parse_args()
    exit_on_sigterm()
    args.out.mkdir(parents=True, exist_ok=True)
    workdir = args.out / "tasks-run"
    shutil.rmtree(workdir, ignore_errors=True)
    stack = Stack(
        workdir=workdir,
        extra_env={
            "MOTS_TRAINER": args.trainer,
            "MOTS_TRAIN_ROUNDS": str(args.train_rounds),
            "MOTS_UTILITY": json.dumps(DEMO_UTILITY),
        },
    )
    rows: list[dict[str, Any]] = []
    try:
        stack.start(timeout_s=180)
        market = MarketClient(stack.url("market"), timeout_s=60)
        orch = httpx.Client(base_url=stack.url("orchestration"), timeout=60, headers=OPERATOR)
        fashion = register_population(market, DEMO_TYPES, OPERATOR_TOKEN, deposit="1000")
        rounds = {
            "fashion-mnist": TaskRound(
                "fashion-mnist", fashion, PowerUtility.model_validate(DEMO_UTILITY)
            ),
            **{t: enrol_task(market, OPERATOR_TOKEN, t) for t in ("digits", "breast-cancer")},
        }
        # every task's first round starts its own federation (issue 36): warm-up, not a row
        warmup = _row(list(ROWS[-1]), rounds, orch, market)
        print(f"warm-up rounds (start the federations): {warmup['round_s']}", flush=True)
        for tasks in ROWS:
            rows.append(_row(list(tasks), rounds, orch, market))
        market.close()
        orch.close()
    finally:
        stack.stop(timeout_s=60)
    solo, pair, verdict = ratios_to_alone(rows)
    out = {
        "trainer": args.trainer,
        "rows": rows,
        "alone_round_s": solo,
        "two_tasks_ratio": pair["ratio_to_alone"],
        "target": TARGET,
        "verdict": verdict,
    }
    (args.out / "tasks.json").write_text(json.dumps(out, indent=2))
    print(_table(rows, solo))
    print(
        "two tasks at once, each round / the same task's round alone: "
        + ", ".join(f"{t} {x:.2f}× ({verdict[t]})" for t, x in pair["ratio_to_alone"].items())
        + f" (target ≤ {TARGET}×)"
    )
    bad = [r["tasks"] for r in rows if set(r["states"].values()) != {"published"}]
    if bad or not all(r["ledger_balanced"] for r in rows):
        print(f"rows with a round not published: {bad}; ledger balanced: "
              f"{[r['ledger_balanced'] for r in rows]}")  # fmt: skip
        raise SystemExit(1)


if __name__ == "__main__":
    main()
