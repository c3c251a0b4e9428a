"""Count the project's files whose code runs on a purchase and on a round (issue 25, item 6).

Run with ``.venv/bin/python -m benchmarks.trace_paths [--trainer inprocess|deployment]``. Starts
the four services and the training worker (as ``mots.local`` does) with a profile hook in every process
(``benchmarks/trace/sitecustomize.py``), registers the demo's 20 clients, and traces two windows:

- ``purchase``: one buyer's ``POST /v1/purchases`` while the round collects, in the market API
  process that serves it (the request, the batcher, the booking);
- ``round``: from ``POST /v1/rounds`` to the published round, in every service process (APIs,
  workers, and the Flower processes the trainer starts), the clients' REST calls included.

A file counts when one of its functions was called inside the window; only the repository's
files count (not the libraries'), and not this tracer. What runs in the window in the same
process counts too (a poller, the reconciler's thread): the lists are what ran, not a reading of
the code. Writes ``out/trace/paths.json`` (per window: the files, per process and together).
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

ROOT = Path(__file__).resolve().parents[1]
TRACER = Path(__file__).resolve().parent / "trace"
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
    return rel


def read_window(folder: Path, window: str) -> dict[str, list[str]]:
    """The project files each process ran in ``window``, by the process's command line."""
    out: dict[str, list[str]] = {}
    for path in sorted(folder.glob(f"{window}.*.files")):
        head, *files = path.read_text().splitlines()
        mine = sorted({f for f in map(project_file, files) if f is not None})
        if mine:
            out[f"{head.removeprefix('# ')} [{path.name.split('.')[1]}]"] = mine
    return out


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
    }


def _summary(by_process: dict[str, list[str]]) -> dict[str, Any]:
    files = sorted({f for fs in by_process.values() for f in fs})
    return {"files": len(files), "list": files, "by_process": by_process}


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
    print(f"round ended {result['round_state']}; wrote {args.out / 'paths.json'}")


if __name__ == "__main__":
    main()
