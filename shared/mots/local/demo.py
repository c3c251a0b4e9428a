"""The main job: two tasks' market cycles at once, Fashion-MNIST with real Flower training and
digits beside it, start to finish.

Starts Redis (unless one listens on 6379), the four services, a local Flower federation with one
SuperNode per client (inside the orchestration worker; each node trains on a data folder of its
own, cut from the public set as ``mots data split`` does) and Prometheus where installed;
registers the paper's 20 Fashion-MNIST clients and the digits task file's 10; opens a round of
each task; each task's clients best-respond to its own SWAN quote; both rounds train, evaluate,
settle and publish; a buyer of each downloads and verifies its model. Prints both summaries,
writes ``summary.json`` (Fashion-MNIST's figures, both tasks' under ``tasks``) and stops every
process it started.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from mots.cli.progress import round_bar
from mots.client import MarketClient, ModelIntegrityError
from mots.economics.utility import PowerUtility, Utility
from mots.local.agents import Agent, act, choose, register_population, wait_for_quote
from mots.local.keys import process_secrets
from mots.local.launcher import (
    PROMETHEUS_BINARY,
    RedisServer,
    Stack,
    exit_on_sigterm,
)
from mots.platform.api.base import Strategy
from mots.platform.api.tasks import DEFAULT_TASK
from mots.platform.contracts import round_calls
from mots.training.processes import listening
from mots.training.progress import RoundProgress

DEMO_TYPES: list[dict[str, Any]] = [
    {"name": "type-1", "count": 10, "data_size": 50, "cost": "0.5"},
    {"name": "type-2", "count": 5, "data_size": 120, "cost": "1.2"},
    {"name": "type-3", "count": 5, "data_size": 300, "cost": "3.0"},
]
"""Table 1's MNIST column (N_i = 10/5/5, D_i = 50/120/300) with C_i = 0.01·D_i."""
DEMO_UTILITY = {"kind": "power", "scale": 1.0, "exponent": 8.0}
SUMMARY_KEYS = (
    "participants",
    "buyers",
    "price",
    "rewards",
    "welfare",
    "incentive_cost",
    "epsilon",
    "round_seconds",
)


def start_redis(workdir: Path) -> tuple[str, subprocess.Popen[bytes] | None]:
    """Redis on 127.0.0.1:6379 if one listens, else a private redis-server on a free port with
    persistence (append-only file under ``workdir/redis``)."""
    if listening(6379):
        return "redis://127.0.0.1:6379/0", None
    server = RedisServer(workdir)
    url = server.start()
    return url, server.popen


def wait_round(
    http: httpx.Client,
    round_id: int,
    timeout_s: float,
    on_fedavg: Callable[[RoundProgress], None] | None = None,
) -> dict[str, Any]:
    """Poll the orchestration API until the round reaches a terminal state, printing each state
    and, while it trains, each finished FedAvg round (also handed to ``on_fedavg``: a bar)."""
    deadline = time.monotonic() + timeout_s
    last = ""
    last_fedavg = 0
    while time.monotonic() < deadline:
        body: dict[str, Any] = http.get(f"/v1/rounds/{round_id}").json()
        # FedAvg rounds first: the last one may be seen together with the move to evaluating
        progress = body.get("training_progress")
        if progress and not progress["in_progress"] and progress["fedavg_round"] > last_fedavg:
            last_fedavg = progress["fedavg_round"]
            print(f"    {fedavg_line(progress)}", flush=True)
            if on_fedavg is not None:
                on_fedavg(fedavg_progress(progress))
        if body["state"] != last:
            print(f"  round {round_id}: {body['state']}", flush=True)
            last = body["state"]
        if body["state"] in ("published", "settled_by_rule"):
            return body
        time.sleep(0.2)
    raise TimeoutError(f"round {round_id} did not finish within {timeout_s}s (last state {last})")


def fedavg_progress(progress: dict[str, Any]) -> RoundProgress:
    """The round API's ``training_progress`` as the training engines report a round."""
    eps = progress.get("epsilon")
    return RoundProgress(
        round=int(progress["fedavg_round"]) - 1,
        rounds=int(progress["fedavg_rounds"]),
        clients_done=int(progress["clients_done"]),
        clients=int(progress["clients"]),
        epsilon=float("nan") if eps is None else float(eps),
        seconds=float(progress["round_seconds"]),
    )


def fedavg_line(progress: dict[str, Any]) -> str:
    """One finished FedAvg round, as the round API reports it (``training_progress``)."""
    eps = progress.get("epsilon")
    return (
        f"FedAvg round {progress['fedavg_round']}/{progress['fedavg_rounds']}: "
        f"{progress['clients_done']}/{progress['clients']} clients, "
        f"ε {'–' if eps is None else f'{eps:.4f}'}, {progress['round_seconds']:.1f} s"
    )


def print_summary(summary: dict[str, Any]) -> None:
    """A readable table of the round's figures."""
    task = summary.get("task", DEFAULT_TASK)
    print(f"\nMoTS market round {summary.get('round_id')} ({task}) - {summary.get('state')}")
    if summary.get("rule"):
        print("  settled by rule:", summary["rule"])
    print(
        f"  mechanism {summary.get('mechanism')}, equilibrium check: {summary.get('equilibrium')}"
    )
    print(f"  {'type':<8} {'join K_i':>9} {'buy B_i':>8} {'reward r_i':>11}")
    joined, bought = summary.get("participants") or {}, summary.get("buyers") or {}
    rewards = summary.get("rewards") or {}
    for name in sorted({*joined, *bought, *rewards}):  # a round settled by rule may lack some
        print(
            f"  {name:<8} {joined.get(name, 0):>9} {bought.get(name, 0):>8} "
            f"{float(rewards.get(name, 0)):>11.4f}"
        )

    def num(value: Any, digits: int = 4) -> str:
        return "-" if value is None else f"{float(value):.{digits}f}"

    print(f"  price p           {num(summary.get('price'))}")
    print(f"  social welfare    {num(summary.get('welfare'))}  (Eq. 5 at the realised state)")
    print(f"  incentive cost    {summary.get('incentive_cost')}  (platform subsidy booked)")
    print(
        f"  test loss ε       {num(summary.get('epsilon'))}  "
        f"(predicted {num(summary.get('epsilon_predicted'))})"
    )
    print(
        f"  round latency     {num(summary.get('round_seconds'), 2)} s, "
        f"platform share {float(summary.get('platform_share') or 0):.2%}"
    )
    phases = ", ".join(f"{k} {v:.2f}s" for k, v in (summary.get("phase_seconds") or {}).items())
    print(f"  time per state    {phases}")
    if "round_calls" in summary:
        print(f"  round calls       {summary['round_calls']}  (service calls, from the call log)")
    print_verification(summary)


def print_verification(summary: dict[str, Any]) -> None:
    """Per participant: were its updates verified in every FedAvg round it was asked for (only
    those participants are paid), or did it drop out or fail verification."""
    verification: dict[str, str] = summary.get("verification") or {}
    if not verification:
        return
    if summary.get("trainer", "deployment") == "deployment":
        how = "Flower deployment engine: TLS and SuperNode authentication"
    else:  # the in-process engine has no network: nothing to encrypt or authenticate
        how = "in-process engine: no network, so no TLS or node authentication"
    print(f"  participants' updates ({how}; each update verified):")
    for client, status in sorted(verification.items(), key=lambda kv: int(kv[0])):
        paid = "paid" if status == "verified" else "not paid"
        print(f"    client {client:>4}  {status:<20} {paid}")


def buyer_model_path(out_dir: Path, round_id: int) -> Path:
    """Where the demo's buyer saves round ``round_id``'s model file."""
    return out_dir / f"model-round-{round_id}.pt2"


def _download_as_buyer(
    market: MarketClient, agents: list[Agent], choices: dict[int, Strategy], round_id: int,
    out_dir: Path, summary: dict[str, Any],
) -> None:  # fmt: skip
    """A buyer downloads the published model; whether its sha256 verified goes in ``summary``."""
    buyer = next((a for a in agents if choices[a.id] is Strategy.BUY), None)
    if buyer is None:
        return
    try:
        got = market.with_token(buyer.token).download_model(
            round_id, buyer_model_path(out_dir, round_id)
        )
        ok, size = True, got.size
    except ModelIntegrityError:
        ok, size = False, 0
    summary["buyer_download_verified"] = ok
    print(f"a buyer downloaded the model ({size} bytes), sha256 verified: {ok}")


def check_ledger(
    market: MarketClient, operator_token: str, prometheus: str | None, summary: dict[str, Any]
) -> None:
    """The ledger's balance check and, where Prometheus runs, the welfare it scraped."""
    check = market.with_token(operator_token).ledger_check()
    summary["ledger"] = check.model_dump(mode="json")
    print(
        f"ledger: {check.transactions} transactions, total {check.total}, "
        f"unbalanced {check.unbalanced_transactions}"
    )
    if prometheus is not None:
        time.sleep(2.5)
        q = httpx.get(f"{prometheus}/api/v1/query", params={"query": "mots_social_welfare"}).json()
        summary["prometheus_social_welfare"] = [s["value"][1] for s in q["data"]["result"]]


SECOND_TASK = "digits"
"""The task whose round the demo runs beside Fashion-MNIST's (issue 36): the types, U(ε), ε prior
and FedAvg settings of its task file (examples/tasks/digits.yaml)."""


@dataclass
class TaskRound:
    """One task's round in the demo: its registered clients, its round and their choices."""

    task: str
    agents: list[Agent]
    utility: Utility
    round_id: int = 0
    choices: dict[int, Strategy] = field(default_factory=dict)


def enrol_task(market: MarketClient, operator_token: str, task: str) -> TaskRound:
    """Store a task at the market from its file (found by name as the platform finds it:
    ``$MOTS_TASKS_DIR``, then the shipped ones) and register (and fund) its file's clients."""
    from mots.tasks.task_file import find_task_file, inline_task_text, load_task_file

    path = find_task_file(task)
    operator = market.with_token(operator_token)
    operator.create_task(inline_task_text(path))
    scenario = load_task_file(path).economics.scenario
    types = [t.model_dump(mode="json") for t in scenario.types]
    agents = register_population(market, types, operator_token, task=task)
    return TaskRound(task, agents, scenario.utility)


def open_task_round(orchestration: httpx.Client, market: MarketClient, rnd: TaskRound) -> None:
    """Open the task's round; its clients best-respond to its quote and declare."""
    r = orchestration.post("/v1/rounds", json={"task": rnd.task})
    r.raise_for_status()
    rnd.round_id = r.json()["round_id"]
    quote = wait_for_quote(market, rnd.agents[0], rnd.round_id)
    print(
        f"{rnd.task} round {rnd.round_id} quote: price {quote.price}, rewards "
        + ", ".join(f"{t.type_name} {t.reward}" for t in quote.types),
        flush=True,
    )
    rnd.choices = choose(rnd.agents, quote, rnd.utility)
    act(market, rnd.agents, rnd.round_id, rnd.choices)


def task_summary(
    market: MarketClient, rnd: TaskRound, got: dict[str, Any], trainer: str, out_dir: Path
) -> dict[str, Any]:
    """The summary of the task's ended round (``got``: its ``GET /v1/rounds/{id}``), with the
    task, the engine and the round's service calls, and (if published) whether a buyer's
    download of its model file (:func:`buyer_model_path`) verified."""
    summary: dict[str, Any] = got["summary"]
    summary["task"] = rnd.task
    summary["trainer"] = trainer  # every task trains on the same engine (issue 36)
    summary["round_calls"] = round_calls(got.get("calls") or [])  # issue 38: at most 7
    if got["state"] == "published":
        _download_as_buyer(market, rnd.agents, rnd.choices, rnd.round_id, out_dir, summary)
    return summary


def _task_rounds(
    stack: Stack, out_dir: Path, trainer: str, train_rounds: int, timeout_s: float,
    prometheus: str | None,
) -> dict[str, Any]:  # fmt: skip
    """Register both tasks' clients, run a Fashion-MNIST and a digits round at once to their
    end, check them; Fashion-MNIST's summary with the digits round's under ``tasks``."""
    market = MarketClient(stack.url("market"), timeout_s=60)
    operator_token = process_secrets().operator_token
    operator = {"Authorization": f"Bearer {operator_token}"}
    orchestration = httpx.Client(base_url=stack.url("orchestration"), timeout=60, headers=operator)
    try:
        fashion = TaskRound(
            DEFAULT_TASK,
            register_population(market, DEMO_TYPES, operator_token),
            PowerUtility.model_validate(DEMO_UTILITY),
        )
        digits = enrol_task(market, operator_token, SECOND_TASK)
        print(
            f"registered {len(fashion.agents)} {DEFAULT_TASK} and {len(digits.agents)} "
            f"{SECOND_TASK} clients and funded their wallets; opening both tasks' rounds",
            flush=True,
        )
        for rnd in (fashion, digits):
            open_task_round(orchestration, market, rnd)
        print("every client declared; training both tasks' participants ...", flush=True)
        with round_bar("FedAvg", total=train_rounds) as fedavg:
            body = wait_round(orchestration, fashion.round_id, timeout_s, on_fedavg=fedavg)
        other = wait_round(orchestration, digits.round_id, timeout_s)
        summaries = [
            task_summary(market, rnd, got, trainer, out_dir)
            for rnd, got in ((fashion, body), (digits, other))
        ]
        check_ledger(market, operator_token, prometheus, summaries[0])
        return {**summaries[0], "tasks": {s["task"]: s for s in summaries}}
    finally:
        market.close()
        orchestration.close()


def run_demo(
    out_dir: Path = Path("out/demo"),
    n_nodes: int = 20,
    trainer: str = "deployment",
    train_rounds: int = 5,
    timeout_s: float = 900,
) -> dict[str, Any]:
    """Run one market cycle end to end and return the summary written to ``summary.json``."""
    exit_on_sigterm()
    out_dir.mkdir(parents=True, exist_ok=True)
    workdir = out_dir / "run"
    if workdir.exists():
        shutil.rmtree(workdir)
    (workdir / "logs").mkdir(parents=True)
    redis_url, redis_proc = start_redis(workdir)
    stack = Stack(
        workdir=workdir,
        redis_url=redis_url,
        extra_env={
            "MOTS_TRAINER": trainer,
            "MOTS_N_NODES": str(n_nodes),
            "MOTS_TRAIN_ROUNDS": str(train_rounds),
            "MOTS_UTILITY": json.dumps(DEMO_UTILITY),
        },
    )
    try:
        print(
            "starting the market, pricing, orchestration and evaluation services as child "
            f"processes (logs in {workdir / 'logs'}); they stop when the demo ends, Ctrl-C stops "
            "them all ...",
            flush=True,
        )
        stack.start(timeout_s=180)
        prometheus = None
        if Path(PROMETHEUS_BINARY).exists():
            prometheus = stack.start_prometheus(interval="1s")
            print(f"Prometheus scraping every service at {prometheus}", flush=True)
        summary = _task_rounds(stack, out_dir, trainer, train_rounds, timeout_s, prometheus)
        for one in summary["tasks"].values():
            print_summary(one)
        (out_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
        print(f"\nwrote {out_dir / 'summary.json'}")
        return summary
    finally:
        print("stopping every process ...", flush=True)
        stack.stop(timeout_s=60)
        if redis_proc is not None:
            redis_proc.terminate()
            redis_proc.wait(timeout=10)
