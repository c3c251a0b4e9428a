"""Training benchmark (issues 3 and 27): Flower rounds on 20 nodes in both edge layouts, client throughput.

Run with ``make bench-training`` (``.venv/bin/python -m benchmarks.bench_training``). Measures, in
one run on this machine:

1. per-client training throughput (samples/s) of the platform's local update (``train_local``,
   what every ClientApp/trainer runs) against a plain PyTorch loop (``optim.SGD``, ``backward``,
   ``step``) on the same client data, mini-batches and model; interleaved repeats, medians;
2. one FedAvg round of the same 20 clients in process (per-client ``train_local`` + aggregation +
   evaluation: the deployment's arithmetic without Flower) and batched (vectorised logistic);
3. on Flower's deployment engine, the same 20 SuperNodes (10/5/5 by type) in each edge layout
   (``subprocess``: today's SuperNode + SuperExec + a ``flwr-clientapp`` process per message + a
   resident trainer; ``warm``: one process per node, :mod:`mots.training.warm_node`), one after the
   other in this run: the idle edge node's RSS; Flower's floor (rounds of a ClientApp that does no
   work, ``noop``, before and after the real rounds); the real rounds and the slowest participant's
   training in each; medians of the rounds after the first; issue 27's targets (warm round
   ≤ max(10 s, subprocess round / 4), warm floor ≤ subprocess floor / 3, idle RSS ≤ 300 MiB).

Writes ``out/bench/training.json``: ``rows`` (one per layout: layout, nodes, round_s,
slowest_training_s, floor_s, idle_edge_rss_mib), ``verdict``, and every figure behind them.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from rich.console import Console
from rich.table import Table
from torch.nn import functional as F

from mots.training.config import TrainConfig
from mots.training.deployment import DeploymentError, run_app
from mots.training.federation import LocalFederation, free_port_block, ports_needed
from mots.training.inprocess import _loop_rounds, prepare, run_inprocess
from mots.training.local import batch_indices, torch_threads, train_local
from mots.training.models import build_model
from mots.training.residency import memory_mib


def plain_loop(
    model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, idx: np.ndarray, lr: float
) -> float:
    """The textbook PyTorch loop: optimizer.zero_grad, loss.backward, optimizer.step; seconds."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    batches = torch.from_numpy(idx)
    start = time.perf_counter()
    for step in range(batches.shape[0]):
        b = batches[step]
        opt.zero_grad()
        loss = F.cross_entropy(model(x[b]), y[b])
        loss.backward()
        opt.step()
    return time.perf_counter() - start


def throughput(cfg: TrainConfig, model_name: str, steps: int, repeats: int) -> dict[str, Any]:
    """Samples/s of train_local and of the plain loop on client (type 3, index 0)'s data."""
    fed = prepare([0, 0, 1], cfg.model_copy(update={"model": model_name}))
    client = fed.client(0)
    idx = batch_indices(0, 0, client.pid, client.size, steps, cfg.batch_size)
    ours, plain = [], []
    with torch_threads(1):
        for _ in range(repeats):
            m = build_model(model_name, fed.input_shape, seed=1)
            ours.append(train_local(m, client, idx, 0.05).seconds)
            m = build_model(model_name, fed.input_shape, seed=1)
            plain.append(plain_loop(m, client.x, client.y, idx, 0.05))
    samples = steps * cfg.batch_size
    o, p = samples / statistics.median(ours), samples / statistics.median(plain)
    return {
        "model": model_name,
        "steps": steps,
        "batch": cfg.batch_size,
        "ours_sps": o,
        "plain_sps": p,
        "ratio": o / p,
    }


def inprocess_round(cfg: TrainConfig, participants: list[int], rounds: int) -> dict[str, float]:
    """Seconds per round in process: per-client loop (the deployment's arithmetic) and batched."""
    c = cfg.model_copy(update={"rounds": rounds})
    fed = prepare(participants, c)
    with torch_threads(1):
        loop = [o.seconds for o in _loop_rounds(fed, c, None)]
    vec = [o.seconds for o in run_inprocess(participants, c)]
    return {"loop_round_s": statistics.median(loop), "vectorised_round_s": statistics.median(vec)}


def _alive(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and "Z" not in stat.read_text().split()[2]


def _steady(values: list[float]) -> float:
    """Median of the rounds after the first (all of them when there is one; NaN for none)."""
    if not values:
        return math.nan
    return float(statistics.median(values[1:] if len(values) > 1 else values))


def node_memory_split(status: list[dict[str, Any]], n_nodes: int) -> dict[str, float]:
    """Per edge node (mean), the processes the bench's RSS counts (SuperNode, its children, the
    trainer) split into anonymous and file-backed RSS, and their PSS (MiB): what the idle RSS is
    made of (:mod:`mots.training.residency`)."""
    pids = {int(c) for r in status if r["role"] in ("supernode", "trainer") for c in r["children"]}
    pids |= {int(r["pid"]) for r in status if r["role"] in ("supernode", "trainer")}
    total = {"rss_anon": 0.0, "rss_file": 0.0, "pss": 0.0}
    for pid in pids:
        try:
            m = memory_mib(pid)
        except OSError:  # ended since the status was read
            continue
        for key in total:
            total[key] += m.get(key, 0.0)
    return {key: value / max(1, n_nodes) for key, value in total.items()}


def deployment(
    cfg: TrainConfig,
    participants: list[int],
    rounds: int,
    nodes: list[int],
    workdir: Path,
    layout: str,
    no_trainer: bool = False,
) -> dict[str, Any]:
    """One layout on a local federation of ``nodes``: idle node memory, Flower's floor (noop
    rounds before and after the real ones) and the real rounds with their slowest training."""
    port = free_port_block(ports_needed(len(nodes)), start=9700)
    c = cfg.model_copy(update={"rounds": rounds})
    out: dict[str, Any] = {"layout": layout, "nodes": len(nodes), "load_before": os.getloadavg()}
    t0 = time.perf_counter()
    with LocalFederation(
        n_nodes=len(nodes),
        node_types=nodes,
        superlink_port=port,
        workdir=workdir / layout,
        layout=layout,
    ) as fed:
        out["start_s"] = time.perf_counter() - t0
        time.sleep(5.0)
        st = fed.status()["processes"]
        out["idle_node_mb"] = fed.idle_node_memory_mb()
        out["idle_node_split_mb"] = node_memory_split(st, len(nodes))
        out["idle_supernode_mb"] = statistics.mean(
            p["rss_mb"] for p in st if p["role"] == "supernode"
        )
        trainers = [p["rss_mb"] for p in st if p["role"] == "trainer"]
        out["idle_trainer_mb"] = statistics.mean(trainers) if trainers else 0.0
        out["superlink_mb"] = sum(p["rss_mb"] for p in st if p["role"] == "superlink")
        # floor, real, floor again: the floor brackets the real run (load drifts on a shared host)
        out["errors"] = []
        floor = _run(fed, participants, c, True, out["errors"])
        real = _run(fed, participants, c, False, out["errors"])
        floor_after = _run(fed, participants, c, True, out["errors"])
        out["floor_round_s"] = floor.get("round_seconds", [])
        out["floor_after_round_s"] = floor_after.get("round_seconds", [])
        out["real_round_s"] = real.get("round_seconds", [])
        out["train_max_s"] = real.get("train_seconds_max", [])
        out["epsilon"] = real.get("epsilon", math.nan)
        out["after_rounds_node_mb"] = fed.idle_node_memory_mb()
        out["after_rounds_split_mb"] = node_memory_split(fed.status()["processes"], len(nodes))
        pids = fed.all_pids()
    if no_trainer and layout == "subprocess":
        with LocalFederation(
            n_nodes=len(nodes),
            node_types=nodes,
            superlink_port=port,
            workdir=workdir / "no-trainer",
            trainer=False,
            layout="subprocess",
        ) as fed:
            plain = run_app(fed, tuple(participants), c)
            out["no_trainer_round_s"] = plain["round_seconds"]
            out["no_trainer_train_max_s"] = plain["train_seconds_max"]
            pids |= fed.all_pids()
    out["load_after"] = os.getloadavg()
    out["left_running"] = len([p for p in pids if _alive(p)])
    floor_s = [*out["floor_round_s"][1:], *out["floor_after_round_s"][1:]]
    out["row"] = {
        "layout": layout,
        "nodes": len(nodes),
        "round_s": _steady(out["real_round_s"]),
        "slowest_training_s": _steady(out["train_max_s"]),
        "floor_s": float(statistics.median(floor_s)) if floor_s else math.nan,
        "idle_edge_rss_mib": out["idle_node_mb"],
    }
    if out["errors"]:
        out["row"]["error"] = "; ".join(e[:300] for e in out["errors"])
    return out


def _run(
    fed: LocalFederation, participants: list[int], c: TrainConfig, noop: bool, errors: list[str]
) -> dict[str, Any]:
    """One run's result; a failed run (e.g. every ClientApp too slow to start on an overloaded
    host) is recorded in ``errors`` and measured as nothing, so the other layout still runs."""
    try:
        return run_app(fed, tuple(participants), c, noop=noop)
    except DeploymentError as err:
        errors.append(f"{'floor' if noop else 'real'} run: {err}")
        return {}


def verdict(rows: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Issue 27's targets, from the two layouts measured in this run."""
    old, new = rows["subprocess"], rows["warm"]
    round_limit = max(10.0, old["round_s"] / 4.0)
    return {
        "round_limit_s": round_limit,
        "round_met": new["round_s"] <= round_limit,
        "floor_limit_s": old["floor_s"] / 3.0,
        "floor_met": new["floor_s"] <= old["floor_s"] / 3.0,
        "rss_limit_mib": 300.0,
        "rss_met": new["idle_edge_rss_mib"] <= 300.0,
        "round_speedup": old["round_s"] / new["round_s"],
        "floor_speedup": old["floor_s"] / new["floor_s"],
    }


def _first(values: list[float]) -> float:
    return values[0] if values else math.nan


def _split(m: dict[str, float]) -> str:
    return f"{m['rss_anon']:.0f} / {m['rss_file']:.0f}; {m['pss']:.0f}"


def print_layouts(console: Console, runs: list[dict[str, Any]], participants: list[int]) -> None:
    """One column per layout."""
    t = Table(title=f"Flower deployment engine, K={participants}: median of rounds 2..R")
    t.add_column("measure")
    for d in runs:
        t.add_column(d["layout"])
    rows = [
        ("real round (s)", lambda d: f"{d['row']['round_s']:.2f}"),
        ("slowest participant's training (s)", lambda d: f"{d['row']['slowest_training_s']:.3f}"),
        ("Flower floor, no-work ClientApp (s)", lambda d: f"{d['row']['floor_s']:.2f}"),
        ("idle edge node RSS (MiB)", lambda d: f"{d['row']['idle_edge_rss_mib']:.0f}"),
        (
            "  SuperNode (+ children) / trainer (MiB)",
            lambda d: f"{d['idle_supernode_mb']:.0f} / {d['idle_trainer_mb']:.0f}",
        ),
        ("  of it anonymous / file-backed; PSS (MiB)", lambda d: _split(d["idle_node_split_mb"])),
        ("edge node RSS after the rounds (MiB)", lambda d: f"{d['after_rounds_node_mb']:.0f}"),
        (
            "  of it anonymous / file-backed; PSS (MiB)",
            lambda d: _split(d["after_rounds_split_mb"]),
        ),
        ("SuperLink + its SuperExec (MiB)", lambda d: f"{d['superlink_mb']:.0f}"),
        (
            "first round: floor / real (s)",
            lambda d: f"{d['floor_round_s'][0]:.2f} / {d['real_round_s'][0]:.2f}",
        ),
        ("federation start (s)", lambda d: f"{d['start_s']:.1f}"),
        (
            "load average before / after",
            lambda d: f"{d['load_before'][0]:.1f} / {d['load_after'][0]:.1f}",
        ),
        ("processes left after stop", lambda d: str(d["left_running"])),
        ("errors", lambda d: "; ".join(e[:60] for e in d["errors"]) or "none"),
    ]
    for name, cell in rows:
        t.add_row(name, *[cell(d) for d in runs])
    console.print(t)


def main() -> None:
    """Run the measurements and print them."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--rounds", type=int, default=5, help="FedAvg rounds per run (medians of rounds 2..R)"
    )
    ap.add_argument("--nodes", default="10,5,5", help="SuperNodes per type")
    ap.add_argument(
        "--steps", type=int, default=400, help="SGD steps for the throughput comparison"
    )
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--skip-deployment", action="store_true")
    ap.add_argument(
        "--layouts",
        default="subprocess,warm",
        help="edge layouts to compare (mots.training.federation.LAYOUTS), in this order",
    )
    ap.add_argument(
        "--compare-no-trainer",
        action="store_true",
        help="also run the subprocess layout without resident trainers (torch per ClientApp)",
    )
    ap.add_argument("--out", type=Path, default=Path("out/bench/training.json"))
    args = ap.parse_args()
    per_type = [int(x) for x in args.nodes.split(",")]
    nodes = [i for i, n in enumerate(per_type) for _ in range(n)]
    participants = per_type
    cfg = TrainConfig(counts=tuple(max(n, 1) for n in per_type))
    console = Console()
    report: dict[str, Any] = {"config": cfg.model_dump(mode="json"), "participants": participants}

    report["throughput"] = [
        throughput(cfg, m, args.steps, args.repeats) for m in ("logistic", "cnn")
    ]
    t = Table(title="Per-client training throughput (one thread, D = 300, b = 32)")
    for col in ("model", "platform samples/s", "plain PyTorch samples/s", "ratio (target ≥ 0.90)"):
        t.add_column(col)
    for r in report["throughput"]:
        t.add_row(r["model"], f"{r['ours_sps']:.0f}", f"{r['plain_sps']:.0f}", f"{r['ratio']:.3f}")
    console.print(t)

    report["inprocess"] = inprocess_round(cfg, participants, max(3, args.rounds))
    console.print(
        f"In-process FedAvg round, K={participants}: per-client loop "
        f"{report['inprocess']['loop_round_s']:.3f} s, "
        f"batched {report['inprocess']['vectorised_round_s']:.3f} s"
    )
    if not args.skip_deployment:
        wd = Path("out/bench/federation")
        runs = [
            deployment(cfg, participants, args.rounds, nodes, wd, layout, args.compare_no_trainer)
            for layout in args.layouts.split(",")
        ]
        report["layouts"] = runs
        report["rows"] = [d["row"] for d in runs]
        by_layout = {d["layout"]: d["row"] for d in runs}
        for d in runs:
            d["row"]["over_inprocess"] = d["row"]["round_s"] / report["inprocess"]["loop_round_s"]
        print_layouts(console, runs, participants)
        if {"subprocess", "warm"} <= set(by_layout):
            v = verdict(by_layout)
            report["verdict"] = v
            console.print(
                f"warm vs subprocess: round {v['round_speedup']:.1f}× faster "
                f"(target ≤ {v['round_limit_s']:.2f} s: {'met' if v['round_met'] else 'MISSED'}), "
                f"floor {v['floor_speedup']:.1f}× lower (target ≤ {v['floor_limit_s']:.2f} s: "
                f"{'met' if v['floor_met'] else 'MISSED'}), idle RSS "
                f"{by_layout['warm']['idle_edge_rss_mib']:.0f} MiB (target ≤ 300: "
                f"{'met' if v['rss_met'] else 'MISSED'})"
            )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1))
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
