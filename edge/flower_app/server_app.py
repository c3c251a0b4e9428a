"""The ServerApp (Flower Message API with a Grid): wiring of :class:`VerifyingFedAvg`.

The run config names the training, the market's coalition K, the node map (Flower node id → the
participant whose registered SuperNode key it holds) and the verification policy
(:func:`mots.training.participants.setup`). The ServerApp chooses the participants
(:func:`mots.training.participants.choose`), waits until their nodes are connected (dropping those
still absent), builds the global model and the server's holdout (the run's task's own model,
evaluation data and holdout when the run config names a task: :mod:`mots.training.task_run`),
and runs Flower's own round loop, ``Strategy.start``, with :class:`mots.training.strategy.VerifyingFedAvg`: a FedAvg that asks the
market's participants, verifies every update before it counts and keeps each participant's
verdict (a participant the launcher records as removed while training, in the run directory's
``removed.json``, is asked no more and its reply ignored: :mod:`mots.training.removal`); its
server-side evaluation writes each round's artifact and ``progress.jsonl`` line. A
final quality gate decides whether the model may be published; ``result.json`` records it with
each participant's outcome, or the error that ended the run.
"""

from __future__ import annotations

import time

LOADING = time.time()  # when this module began to load (before Flower's and MoTS's imports)

import json  # noqa: E402
import os  # noqa: E402
import traceback  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from flwr.app import ArrayRecord, Context  # noqa: E402
from flwr.serverapp import Grid, ServerApp  # noqa: E402

import mots.training.flower_messages as fm  # noqa: E402
from mots.training.participants import DROPPED, Participant, check_share, choose, setup  # noqa: E402
from mots.training.strategy import QuorumGrid, VerifyingFedAvg, build  # noqa: E402
from mots.training.task_run import build_task_model, task_of_run  # noqa: E402

LOADED = time.time()
app = ServerApp()


def _write_json(path: Path | None, data: dict[str, Any]) -> None:
    if path is None:
        return
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    tmp.replace(path)


def wait_connected(grid: Grid, chosen: list[Participant], timeout: float) -> None:
    """Wait until every chosen node is connected; drop those still absent at ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        online = set(grid.get_node_ids())
        absent = [p for p in chosen if p.active and p.node_id not in online]
        if not absent or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    for p in absent:
        p.leave(DROPPED, None, f"not connected within {timeout:.0f}s")


def run(grid: Grid, context: Context) -> dict[str, Any]:
    """Train the run's coalition on Flower's round loop; return what ``result.json`` records."""
    from mots.training.artifacts import ArtifactWriter

    # wall-clock stamps of the run's steps (the launcher logs them, :func:`phase_log`)
    phases = {"process": process_started(), "loading": LOADING, "loaded": LOADED}
    phases["main"] = time.time()
    s = setup(context.run_config)
    t0 = time.perf_counter()
    chosen = choose(s)
    wait_connected(grid, chosen, s.node_timeout)
    check_share(chosen, s.policy, "before round 1")
    discover_s = time.perf_counter() - t0
    phases["connected"] = time.time()
    task = task_of_run(context.run_config)  # issue 36: the run's task, when it names one
    model = build(s) if task is None else build_task_model(s, task)
    writer = ArtifactWriter(s.artifact_dir) if s.artifact_dir is not None else None
    strategy = VerifyingFedAvg(s, chosen, model, writer)
    phases["model_built"] = time.time()
    strategy.start(
        grid=QuorumGrid(grid, strategy.quorum, strategy.on_reply, removed=strategy.removed),
        initial_arrays=ArrayRecord(model.weights),
        num_rounds=s.cfg.rounds,
        timeout=s.policy.round_timeout_s,
        evaluate_fn=strategy.evaluate,
    )
    phases["rounds_done"] = time.time()
    outcome = strategy.outcome(int(context.run_id), discover_s)
    phases["outcome"] = time.time()
    outcome["phases"] = {k: v for k, v in phases.items() if v is not None}
    return outcome


def process_started() -> float | None:
    """When this process started (wall clock, from /proc; None where there is no /proc)."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        boot = next(
            float(line.split()[1])
            for line in Path("/proc/stat").read_text().splitlines()
            if line.startswith("btime ")
        )
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    return boot + ticks / os.sysconf("SC_CLK_TCK")


@app.main()
def main(grid: Grid, context: Context) -> None:
    """Entry point: run, then record the outcome (or the error) in ``result.json``."""
    rc = context.run_config
    out = Path(str(rc[fm.RUN_OUT_DIR])) if rc.get(fm.RUN_OUT_DIR) else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    try:
        result = run(grid, context)
    except Exception as err:
        _write_json(
            out / "result.json" if out else None,
            {
                "error": f"{type(err).__name__}: {err}",
                "traceback": traceback.format_exc(),
                "participant_status": getattr(err, "participants", []),
            },
        )
        raise
    _write_json(out / "result.json" if out else None, result)
