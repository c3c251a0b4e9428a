"""Market round benchmark (issue 4, item 5): the platform's own time as a share of a round.

Run with ``make bench-round`` (``.venv/bin/python -m benchmarks.bench_round``). Starts the four
services with Flower's deployment engine (a SuperLink and one SuperNode per client, the demo's 20
clients), then runs ``--rounds`` market rounds in which the simulated clients best-respond at once.
The first round also starts the federation; every round's time per state comes from the
orchestrator's persisted transitions. Platform time = the round's wall time minus its training and
evaluation states (so it holds the queues, pricing, the market's calls, settlement and the
clients' REST calls while collecting). Target: at most 5% of the round. Writes out/bench/round.json;
exits 1 if a round ends in any state but published.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from typing import Any

import httpx

from mots.economics.utility import PowerUtility
from mots.local.agents import act, choose, register_population, wait_for_quote
from mots.local.demo import DEMO_TYPES, DEMO_UTILITY, wait_round
from mots.local.keys import process_secrets
from mots.local.launcher import Stack, exit_on_sigterm
from mots.platform.contracts import round_calls

OPERATOR_TOKEN = process_secrets().operator_token
OPERATOR = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rounds", type=int, default=2, help="market rounds (the first starts Flower)"
    )
    parser.add_argument(
        "--train-rounds", type=int, default=5, help="FedAvg rounds per market round"
    )
    parser.add_argument("--trainer", choices=["deployment", "inprocess"], default="deployment")
    parser.add_argument("--out", type=Path, default=Path("out/bench"))
    args = parser.parse_args()
    exit_on_sigterm()
    args.out.mkdir(parents=True, exist_ok=True)
    # A fresh market: a previous run's databases would add its clients, who never declare, to
    # this run's population (each round would then wait out the collect timeout).
    workdir = args.out / "round-run"
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
        market = httpx.Client(base_url=stack.url("market"), timeout=60)
        orch = httpx.Client(base_url=stack.url("orchestration"), timeout=60, headers=OPERATOR)
        agents = register_population(market, DEMO_TYPES, OPERATOR_TOKEN, deposit="1000")
        utility = PowerUtility.model_validate(DEMO_UTILITY)
        for _ in range(args.rounds):
            round_id = orch.post("/v1/rounds", headers=OPERATOR).json()["round_id"]
            quote = wait_for_quote(market, agents[0], round_id)
            act(market, agents, round_id, choose(agents, quote, utility))
            body = wait_round(orch, round_id, 1200)
            s = body["summary"]
            phases = s["phase_seconds"]
            work = phases.get("training", 0.0) + phases.get("evaluating", 0.0)
            rows.append(
                {
                    "round_id": round_id,
                    "state": s["state"],
                    "round_seconds": s["round_seconds"],
                    "training_seconds": phases.get("training", 0.0),
                    "evaluation_seconds": phases.get("evaluating", 0.0),
                    "platform_seconds": s["round_seconds"] - work,
                    "platform_share": (s["round_seconds"] - work) / s["round_seconds"],
                    "phase_seconds": phases,
                    "fedavg_round_seconds": s["training_round_seconds"],
                    "round_calls": round_calls(body.get("calls") or []),
                }
            )
        market.close()
        orch.close()
    finally:
        stack.stop(timeout_s=60)
    (args.out / "round.json").write_text(
        json.dumps({"trainer": args.trainer, "rounds": rows, "target_share": 0.05}, indent=2)
    )
    for r in rows:
        ph = ", ".join(f"{k} {v:.2f}s" for k, v in r["phase_seconds"].items())
        print(
            f"round {r['round_id']}: {r['round_seconds']:.1f} s, training {r['training_seconds']:.1f} s, "
            f"evaluation {r['evaluation_seconds']:.1f} s, platform {r['platform_seconds']:.2f} s "
            f"= {r['platform_share']:.2%} of the round ({ph}); {r['round_calls']} calls"
        )
    print("target: platform share ≤ 5%")
    unfinished = [r["round_id"] for r in rows if r["state"] != "published"]
    if unfinished:
        print(f"rounds not published: {unfinished}")
        raise SystemExit(1)


if __name__ == "__main__":
    main()
