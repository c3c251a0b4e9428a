"""Training benchmark (issue 3, item 8): Flower rounds with 20 nodes, overhead, client throughput.

Run with ``make bench-training`` (``.venv/bin/python -m benchmarks.bench_training``). Measures, in
one run on this machine:

1. per-client training throughput (samples/s) of the platform's local update (``train_local``,
   what every ClientApp/trainer runs) against a plain PyTorch loop (``optim.SGD``, ``backward``,
   ``step``) on the same client data, mini-batches and model; interleaved repeats, medians;
2. one FedAvg round of the same 20 clients in process (per-client ``train_local`` + aggregation +
   evaluation: the deployment's arithmetic without Flower) and batched (vectorised logistic);
3. on Flower's deployment engine, a local federation of 20 SuperNodes (10/5/5 by type) with their
   resident trainers: the memory of an idle edge node; Flower's floor (the same rounds with a
   ClientApp that does no work, ``noop``, run before and after the real rounds); the real rounds, the slowest participant's training time
   in each, and the target: round ≤ 1.1 × (floor + slowest training). Ratios come from this run.

Writes ``out/bench/training.json``.
"""

from __future__ import annotations

import argparse
import json
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
from mots.training.deployment import run_app
from mots.training.federation import LocalFederation, free_port_block, ports_needed
from mots.training.inprocess import _loop_rounds, prepare, run_inprocess
from mots.training.local import batch_indices, torch_threads, train_local
from mots.training.models import build_model


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


def deployment(
    cfg: TrainConfig,
    participants: list[int],
    rounds: int,
    nodes: list[int],
    workdir: Path,
    no_trainer: bool = False,
) -> dict[str, Any]:
    """Idle node memory, Flower floor (noop) and real rounds on a 20-node local federation."""
    port = free_port_block(ports_needed(len(nodes)), start=9700)
    c = cfg.model_copy(update={"rounds": rounds})
    out: dict[str, Any] = {"nodes": len(nodes)}
    t0 = time.perf_counter()
    with LocalFederation(
        n_nodes=len(nodes), node_types=nodes, superlink_port=port, workdir=workdir
    ) as fed:
        out["start_s"] = time.perf_counter() - t0
        time.sleep(5.0)
        st = fed.status()["processes"]
        out["idle_node_mb"] = fed.idle_node_memory_mb()
        out["idle_supernode_mb"] = statistics.mean(
            p["rss_mb"] for p in st if p["role"] == "supernode"
        )
        out["idle_trainer_mb"] = statistics.mean(p["rss_mb"] for p in st if p["role"] == "trainer")
        out["superlink_mb"] = sum(p["rss_mb"] for p in st if p["role"] == "superlink")
        # floor, real, floor again: the floor brackets the real run (load drifts on a shared host)
        floor = run_app(fed, tuple(participants), c, noop=True)
        real = run_app(fed, tuple(participants), c)
        floor_after = run_app(fed, tuple(participants), c, noop=True)
        out["floor_round_s"] = floor["round_seconds"]
        out["floor_after_round_s"] = floor_after["round_seconds"]
        out["real_round_s"] = real["round_seconds"]
        out["train_max_s"] = real["train_seconds_max"]
        out["discover_s"] = [floor["discover_seconds"], real["discover_seconds"]]
        out["epsilon"] = real["epsilon"]
        pids = fed.all_pids()
    if no_trainer:
        with LocalFederation(
            n_nodes=len(nodes),
            node_types=nodes,
            superlink_port=port,
            workdir=workdir / "no-trainer",
            trainer=False,
        ) as fed:
            plain = run_app(fed, tuple(participants), c)
            out["no_trainer_round_s"] = plain["round_seconds"]
            out["no_trainer_train_max_s"] = plain["train_seconds_max"]
            pids |= fed.all_pids()
    out["left_running"] = len(
        [
            p
            for p in pids
            if Path(f"/proc/{p}").exists()
            and "Z" not in Path(f"/proc/{p}/stat").read_text().split()[2]
        ]
    )
    return out


def main() -> None:
    """Run the three measurements and print them."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--rounds",
        type=int,
        default=4,
        help="Flower rounds per measurement (first one reported apart)",
    )
    ap.add_argument("--nodes", default="10,5,5", help="SuperNodes per type")
    ap.add_argument(
        "--steps", type=int, default=400, help="SGD steps for the throughput comparison"
    )
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--skip-deployment", action="store_true")
    ap.add_argument(
        "--compare-no-trainer",
        action="store_true",
        help="also run the rounds with torch imported in every ClientApp process (no resident trainer)",
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
        f"{report['inprocess']['loop_round_s']:.3f} s, batched {report['inprocess']['vectorised_round_s']:.3f} s"
    )
    if not args.skip_deployment:
        wd = Path("out/bench/federation")
        d = deployment(cfg, participants, args.rounds, nodes, wd, args.compare_no_trainer)
        steady = slice(1, None) if args.rounds > 1 else slice(0, None)
        floor = statistics.mean(d["floor_round_s"][steady] + d["floor_after_round_s"][steady])
        real = statistics.mean(d["real_round_s"][steady])
        train = statistics.mean(d["train_max_s"][steady])
        d["summary"] = {
            "floor_round_s": floor,
            "real_round_s": real,
            "slowest_train_s": train,
            "target_s": 1.1 * (floor + train),
            "overhead_vs_floor_plus_train": real / (floor + train) - 1.0,
            "meets_target": real <= 1.1 * (floor + train),
            "deployment_over_inprocess": real / report["inprocess"]["loop_round_s"],
            "first_real_round_s": d["real_round_s"][0],
            "first_floor_round_s": d["floor_round_s"][0],
        }
        report["deployment"] = d
        s = d["summary"]
        t = Table(
            title=f"Flower deployment engine, {len(nodes)} SuperNodes, K={participants} (rounds 2..{args.rounds})"
        )
        t.add_column("measure")
        t.add_column("value")
        rows = [
            (
                "idle edge node memory (SuperNode + SuperExec + trainer)",
                f"{d['idle_node_mb']:.0f} MiB",
            ),
            (
                "  of which SuperNode + SuperExec / trainer",
                f"{d['idle_supernode_mb']:.0f} / {d['idle_trainer_mb']:.0f} MiB",
            ),
            ("SuperLink (+ SuperExec)", f"{d['superlink_mb']:.0f} MiB"),
            ("Flower floor: round with a no-work ClientApp (before and after)", f"{floor:.2f} s"),
            (
                "  floor before / after the real rounds",
                f"{statistics.mean(d['floor_round_s'][steady]):.2f} / "
                f"{statistics.mean(d['floor_after_round_s'][steady]):.2f} s",
            ),
            ("slowest participant's training", f"{train:.3f} s"),
            ("real round", f"{real:.2f} s"),
            (
                "target 1.1 × (floor + slowest training)",
                f"{s['target_s']:.2f} s → {'met' if s['meets_target'] else 'MISSED'}",
            ),
            (
                "overhead beyond floor + training",
                f"{100 * s['overhead_vs_floor_plus_train']:+.1f} %",
            ),
            ("deployment / in-process loop round", f"{s['deployment_over_inprocess']:.0f} ×"),
            (
                "first round: floor / real",
                f"{s['first_floor_round_s']:.2f} s / {s['first_real_round_s']:.2f} s",
            ),
            ("processes left after stop", str(d["left_running"])),
        ]
        if "no_trainer_round_s" in d:
            nt = statistics.mean(d["no_trainer_round_s"][steady])
            s["no_trainer_round_s"] = nt
            rows.append(
                ("real round without resident trainers (torch per ClientApp)", f"{nt:.2f} s")
            )
        for a, b in rows:
            t.add_row(a, b)
        console.print(t)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1))
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
