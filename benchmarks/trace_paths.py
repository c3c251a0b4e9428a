"""Count the project's files whose code runs on a purchase and on a round (issue 25, item 6).

Run with ``.venv/bin/python -m benchmarks.trace_paths [--trainer inprocess|deployment]``. Starts
the four services and the training worker (as ``mots.local`` does) with a profile hook in every process
(``benchmarks/trace/sitecustomize.py``), registers the demo's 20 clients, and traces two windows:

- ``purchase``: one buyer's ``POST /v1/purchases`` while the round collects, in the market API
  process that serves it (the request, the batcher, the booking);
- ``round``: from ``POST /v1/rounds`` to the published round, in every service process (APIs,
  workers, and the Flower processes the trainer starts), the clients' REST calls included.

A file counts when one of its functions was called inside the window; only the repository's
files count (not the libraries'), and not this tracer. Each call is recorded with the name of
the thread that made it. The path's files are those the threads serving the work called: the
event loop, its worker threads (``to_thread``, the batchers' threads), a Celery worker's main
thread, and any thread without a background name. A background loop (the ledger gauge's
refresh, the reconciler, this tracer's poller) is started with a name beginning
``background:``; what such threads called inside the window is listed apart, per process and
thread, and is not in the path's count (a file the path also ran is in both). Writes
``out/trace/paths.json``: per window, the path's files (together, per process, per thread) and
the background threads' files.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import httpx

from mots.economics.utility import PowerUtility
from mots.local.agents import act, choose, register_population, wait_for_quote
from mots.local.demo import DEMO_TYPES, DEMO_UTILITY, wait_round
from mots.local.keys import process_secrets
from mots.local.launcher import Stack, exit_on_sigterm
from mots.platform.api.base import Strategy
from mots.platform.contracts import (
    ALL_TASKS,
    EVALUATION_PUBLISHED,
    MARKET_DECLARATION_PROGRESS,
    MARKET_SETTLE_ROUND,
    round_calls,
)

OWNS = {
    "orchestration": "the round, its terms and call log",
    "market": "clients, members, decisions, node keys, the ledger",
    "evaluation": "measurements, the error model",
    "training": "the coalition's training (Flower)",
}
"""Who owns which data, as the sequence diagram's participants say."""

ROOT = Path(__file__).resolve().parents[1]
TRACER = Path(__file__).resolve().parent / "trace"
FLOWER_APP = "edge/flower_app"
"""The Flower app's source folder (its FAB), whose installed copies count as these files."""
OPERATOR_TOKEN = process_secrets().operator_token
OPERATOR = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}


def project_file(path: str) -> str | None:
    """The repository-relative path of a project source file, else None."""
    p = Path(path)
    if not p.is_absolute() or not p.is_relative_to(ROOT):
        return None
    rel = p.relative_to(ROOT).as_posix()
    if rel.startswith((".venv/", "benchmarks/trace/")) or not rel.endswith(".py"):
        return None
    parts = rel.split("/")
    if rel.startswith("out/") and "apps" in parts[:-2]:
        # Flower's installed copy of the app (FLWR_HOME/apps/PUBLISHER.NAME.VERSION.HASH/...,
        # one per SuperLink and SuperNode home): the repository's own edge/flower_app file
        at = len(parts) - 1 - parts[::-1].index("apps")
        return "/".join([FLOWER_APP, *parts[at + 2 :]])
    return rel


BACKGROUND = "background:"
"""The thread-name prefix of a background loop (its files are listed apart from the path's)."""


def read_window(folder: Path, window: str) -> dict[str, dict[str, list[str]]]:
    """The project files each thread of each process ran in ``window``: process (its command
    line and pid) → thread name → files; threads and processes that ran none left out."""
    out: dict[str, dict[str, list[str]]] = {}
    for path in sorted(folder.glob(f"{window}.*.files")):
        head, *lines = path.read_text().splitlines()
        threads: dict[str, set[str]] = {}
        current: set[str] = set()
        for line in lines:
            if line.startswith("## "):
                current = threads.setdefault(line.removeprefix("## "), set())
            elif (f := project_file(line)) is not None:
                current.add(f)
        mine = {t: sorted(fs) for t, fs in sorted(threads.items()) if fs}
        if mine:
            out[f"{head.removeprefix('# ')} [{path.name.split('.')[1]}]"] = mine
    return out


def split(
    by_process: dict[str, dict[str, list[str]]], background: bool
) -> dict[str, dict[str, list[str]]]:
    """The background threads' part (``background``) or the path's part of a window."""
    out = {
        proc: {t: fs for t, fs in threads.items() if t.startswith(BACKGROUND) == background}
        for proc, threads in by_process.items()
    }
    return {proc: threads for proc, threads in out.items() if threads}


def _window(folder: Path, name: str, mark: str) -> None:
    (folder / f"{name}.{mark}").touch()
    time.sleep(0.5)  # every process's poller (every 50 ms) has seen it


def run(trainer: str, out: Path) -> dict[str, Any]:
    """Start the platform, trace one purchase and one round, stop it; the files per window."""
    workdir = out / "run"
    traces = out / "windows"
    shutil.rmtree(out, ignore_errors=True)
    traces.mkdir(parents=True)
    pythonpath = os.pathsep.join([str(TRACER), *filter(None, [os.environ.get("PYTHONPATH")])])
    stack = Stack(
        workdir=workdir,
        extra_env={
            "MOTS_TRAINER": trainer,
            "MOTS_TRAIN_ROUNDS": "2",
            "MOTS_TRAIN_LOCAL_STEPS": "5",
            "MOTS_UTILITY": json.dumps(DEMO_UTILITY),
            "PYTHONPATH": pythonpath,
            "TRACE_PATHS_DIR": str(traces.resolve()),
        },
    )
    stack.start(timeout_s=300)
    try:
        market = httpx.Client(base_url=stack.url("market"), timeout=60)
        orch = httpx.Client(base_url=stack.url("orchestration"), timeout=60, headers=OPERATOR)
        agents = register_population(market, DEMO_TYPES, OPERATOR_TOKEN, deposit="1000")
        utility = PowerUtility.model_validate(DEMO_UTILITY)
        _window(traces, "round", "start")
        round_id = orch.post("/v1/rounds").json()["round_id"]
        quote = wait_for_quote(market, agents[0], round_id)
        choices = choose(agents, quote, utility)
        buyer = next(a for a in agents if choices[a.id] == Strategy.BUY)
        _window(traces, "purchase", "start")
        act(market, [buyer], round_id, choices)
        _window(traces, "purchase", "stop")
        act(market, [a for a in agents if a is not buyer], round_id, choices)
        state = wait_round(orch, round_id, 1800)["state"]
        _window(traces, "round", "stop")
        calls = orch.get(f"/v1/rounds/{round_id}").json()["calls"]
        time.sleep(1.0)
    finally:
        stack.stop()
    rounds = read_window(traces, "round")
    purchase = {
        k: v
        for k, v in read_window(traces, "purchase").items()
        if "services.market.main:create_app" in k
    }
    return {
        "trainer": trainer,
        "round_state": state,
        "purchase": _summary(purchase),
        "round": _summary(rounds),
        "round_calls": {
            "count": round_calls(calls),
            "polls": len(calls) - round_calls(calls),
            "calls": calls,
        },
    }


def sequence_diagram(calls: list[str]) -> str:
    """The round's calls as a mermaid sequence diagram, in the order its call log holds them:
    each a request and its reply between the orchestration and the service that owns the data;
    consecutive progress polls folded into one line."""
    specs = {spec.name: spec for spec in ALL_TASKS}
    lines = ["sequenceDiagram"]
    for who, owns in OWNS.items():
        lines.append(f"  participant {who} as {who} (owns {owns})")
    polls = 0
    for task in [*calls, ""]:
        if task == MARKET_DECLARATION_PROGRESS.name:
            polls += 1
            continue
        if polls:
            spec = specs[MARKET_DECLARATION_PROGRESS.name]
            lines.append(f"  loop {polls} polls while clients decide")
            lines.append(f"    orchestration->>market: {spec.name} ({spec.input.__name__})")
            lines.append(f"    market-->>orchestration: {spec.output.__name__}")
            lines.append("  end")
            polls = 0
        if not task:
            continue
        spec = specs[task]
        lines.append(f"  orchestration->>{spec.queue}: {spec.name} ({spec.input.__name__})")
        lines.append(f"  {spec.queue}-->>orchestration: {spec.output.__name__}")
        if task == MARKET_SETTLE_ROUND.name:  # an event, not a call: nothing answers it
            event = EVALUATION_PUBLISHED
            lines.append(
                f"  orchestration-)evaluation: {event.name} ({event.input.__name__}), event"
            )
    return "\n".join(lines) + "\n"


def _files(by_process: dict[str, dict[str, list[str]]]) -> list[str]:
    return sorted({f for threads in by_process.values() for fs in threads.values() for f in fs})


def _summary(by_process: dict[str, dict[str, list[str]]]) -> dict[str, Any]:
    path, background = split(by_process, False), split(by_process, True)
    return {
        "files": len(_files(path)),
        "list": _files(path),
        "by_process": {proc: _files({proc: threads}) for proc, threads in path.items()},
        "by_thread": path,
        "background": {
            "files": len(_files(background)),
            "list": _files(background),
            "by_thread": background,
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trainer", choices=["inprocess", "deployment"], default="inprocess")
    parser.add_argument("--out", type=Path, default=Path("out/trace"))
    args = parser.parse_args()
    exit_on_sigterm()
    result = run(args.trainer, args.out)
    (args.out / "paths.json").write_text(json.dumps(result, indent=2) + "\n")
    for window in ("purchase", "round"):
        w = result[window]
        print(f"{window}: {w['files']} project files ({args.trainer} trainer)")
        for f in w["list"]:
            print(f"  {f}")
        bg = w["background"]
        print(f"  and, apart, background threads ran {bg['files']} files:")
        for proc, threads in bg["by_thread"].items():
            for thread, files in threads.items():
                print(f"    {thread} ({proc.rsplit(' ', 1)[-1]}): {', '.join(files)}")
    calls = result["round_calls"]
    (args.out / "round_sequence.mmd").write_text(sequence_diagram(calls["calls"]))
    print(f"round calls: {calls['count']}")
    print(f"  and {calls['polls']} progress polls; the sequence: {args.out / 'round_sequence.mmd'}")
    print(f"round ended {result['round_state']}; wrote {args.out / 'paths.json'}")


if __name__ == "__main__":
    main()
