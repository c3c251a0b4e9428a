"""The ServerApp (Flower Message API with a Grid): FedAvg over exactly the market's participants.

A query round asks every connected node for its type and index (a ServerApp cannot read node
config); the first K_i nodes of each type are chosen. Each round sends them the global model,
aggregates the replies (uniform or data-size weighted, Eq. 2/3), evaluates the test loss ε, saves
the round's artifact and appends a line to ``progress.jsonl``; ``result.json`` ends the run.
"""

from __future__ import annotations

import json
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MessageType, RecordDict
from flwr.serverapp import Grid, ServerApp

import mots.training.flower_messages as fm


def _num(value: Any) -> float:
    """A scalar record value as a number (records are typed as unions of scalars and lists)."""
    if isinstance(value, list | bytes | str):
        raise TypeError(f"expected a number in the record, got {value!r}")
    return float(value)


app = ServerApp()


class RunFailedError(RuntimeError):
    """The run cannot go on (missing nodes, a client error, a timeout)."""


def _write_json(path: Path | None, data: dict[str, Any]) -> None:
    if path is None:
        return
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    tmp.replace(path)


def _append(path: Path | None, line: dict[str, Any]) -> None:
    """One JSON line onto ``progress.jsonl`` (the launcher follows it)."""
    if path is not None:
        with path.open("a") as f:
            f.write(json.dumps(line) + "\n")


def send_and_receive(
    grid: Grid,
    messages: list[Message],
    timeout: float,
    interval: float = 0.1,
    on_reply: Callable[[int], None] | None = None,
) -> list[Message]:
    """Push ``messages`` and pull their replies every ``interval`` s until all are in or ``timeout``.

    Grid.send_and_receive sleeps 3 s between pulls, which would add up to 3 s to every round on top
    of the SuperNodes' own 3 s polling; pulling often costs one small HTTP request each time.
    """
    pending = set(grid.push_messages(messages))
    replies: list[Message] = []
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        got = list(grid.pull_messages(pending))
        replies.extend(got)
        pending -= {m.metadata.reply_to_message_id for m in got}
        if got and pending and on_reply is not None:
            on_reply(len(replies))
        if pending:
            time.sleep(interval)
    return replies


def discover(grid: Grid, participants: list[int], timeout: float) -> list[tuple[int, int, int]]:
    """(node id, type, index) of the chosen nodes: the first K_i nodes of each type i."""
    identities: dict[int, tuple[int, int]] = {}
    deadline = time.monotonic() + timeout
    wanted = {(i, j) for i, k in enumerate(participants) for j in range(k)}
    while True:
        new = [n for n in grid.get_node_ids() if n not in identities]
        if new:
            msgs = [
                Message(
                    RecordDict({"q": ConfigRecord({"ask": "identity"})}),
                    dst_node_id=n,
                    message_type=MessageType.QUERY,
                )
                for n in new
            ]
            for reply in send_and_receive(grid, msgs, max(5.0, deadline - time.monotonic())):
                if reply.has_error():
                    continue
                rec = reply.content.config_records["identity"]
                identities[reply.metadata.src_node_id] = (
                    int(_num(rec[fm.NODE_TYPE_INDEX])),
                    int(_num(rec[fm.NODE_CLIENT_INDEX])),
                )
        have = {v: n for n, v in sorted(identities.items(), reverse=True)}
        if wanted <= set(have):
            return sorted(((have[w], w[0], w[1]) for w in wanted), key=lambda t: (t[1], t[2]))
        if time.monotonic() > deadline:
            missing = sorted(wanted - set(have))
            raise RunFailedError(
                f"nodes: no SuperNode reported (type, index) {missing} within {timeout:.0f}s; "
                f"connected: {sorted(identities.values())}"
            )
        time.sleep(1.0)


def run(grid: Grid, context: Context) -> dict[str, Any]:
    """Train the run's coalition; return the result that ``result.json`` records."""
    import torch

    from mots.training.datasets import load_dataset, to_float
    from mots.training.fedavg import aggregate, aggregation_weights
    from mots.training.local import evaluate, torch_threads
    from mots.training.models import build_model, get_weights, set_weights, weight_names
    from mots.training.partition import evaluation_indices
    from mots.training.result import ArtifactWriter, round_metadata

    rc = context.run_config
    cfg = fm.train_config_from_run(rc)
    k = list(cfg.check_participants(fm.participants_from_run(rc)))
    out = Path(str(rc.get(fm.RUN_OUT_DIR, ""))) if rc.get(fm.RUN_OUT_DIR) else None
    art = str(rc.get(fm.RUN_ARTIFACT_DIR, ""))
    writer = ArtifactWriter(Path(art)) if art else None
    noop = bool(rc.get(fm.RUN_NOOP, False))
    progress = out / "progress.jsonl" if out is not None else None

    t0 = time.perf_counter()
    chosen = discover(grid, k, float(rc.get(fm.RUN_NODE_TIMEOUT, 180.0)))
    discover_s = time.perf_counter() - t0

    ds = load_dataset(cfg.dataset, cfg.data_dir)
    t = evaluation_indices(len(ds.y_test), cfg.test_subset)
    x_test, y_test = torch.from_numpy(to_float(ds.x_test[t])), torch.from_numpy(ds.y_test[t])
    model = build_model(
        cfg.model, ds.input_shape, ds.num_classes, zero_init=cfg.zero_init, seed=cfg.seed
    )
    names = weight_names(model)
    weights = get_weights(model)
    sizes = [cfg.sizes[i] for _, i, _ in chosen]
    agg = aggregation_weights(sizes, cfg.aggregation)
    losses: list[float] = []
    round_seconds: list[float] = []
    train_max: list[float] = []
    last: tuple[str, str] | None = None
    accuracy = float("nan")
    for r in range(cfg.rounds):
        start = time.perf_counter()
        partial: dict[str, Any] = {
            "round": r,
            "rounds": cfg.rounds,
            "clients": len(chosen),
            "partial": True,
        }
        partial["epsilon"] = losses[-1] if losses else float("nan")

        def on_reply(n: int, head: dict[str, Any] = partial, t0: float = start) -> None:
            _append(progress, {**head, "clients_done": n, "seconds": time.perf_counter() - t0})

        msgs = [
            Message(
                RecordDict({"arrays": ArrayRecord(weights), "config": ConfigRecord({"round": r})}),
                dst_node_id=node,
                message_type=MessageType.TRAIN,
                group_id=str(r),
            )
            for node, _, _ in chosen
        ]
        replies = {
            m.metadata.src_node_id: m
            for m in send_and_receive(
                grid,
                msgs,
                _num(rc.get(fm.RUN_ROUND_TIMEOUT, 900.0)),
                on_reply=on_reply,
            )
        }
        missing = [node for node, _, _ in chosen if node not in replies]
        if missing:
            raise RunFailedError(
                f"round {r + 1}: no reply from nodes {missing} within the round timeout"
            )
        errors = [f"{n}: {m.error.reason}" for n, m in replies.items() if m.has_error()]
        if errors:
            raise RunFailedError(f"round {r + 1}: ClientApp errors: {errors}")
        updates = [
            replies[node].content.array_records["arrays"].to_numpy_ndarrays()
            for node, _, _ in chosen
        ]
        metrics = [replies[node].content.metric_records["metrics"] for node, _, _ in chosen]
        weights = aggregate(updates, agg)
        if noop:
            eps, accuracy = float("nan"), float("nan")
        else:
            with torch_threads(1):
                set_weights(model, weights)
                eps, accuracy = evaluate(model, x_test, y_test)
        seconds = time.perf_counter() - start
        losses.append(eps)
        round_seconds.append(seconds)
        train_max.append(max(_num(m["train_seconds"]) for m in metrics))
        if writer is not None and not noop:
            meta = round_metadata(cfg, k, r, eps, accuracy, ds.input_shape, "deployment")
            path, digest = writer.write(names, weights, meta)
            last = (str(path), digest)
        if progress is not None:
            line = {
                "round": r,
                "rounds": cfg.rounds,
                "epsilon": eps,
                "accuracy": accuracy,
                "seconds": seconds,
                "clients_done": len(metrics),
                "clients": len(chosen),
                "train_seconds": [_num(m["train_seconds"]) for m in metrics],
                "client_seconds": [_num(m["client_seconds"]) for m in metrics],
            }
            _append(progress, line)
    return {
        "epsilon": losses[-1],
        "accuracy": accuracy,
        "losses": losses,
        "round_seconds": round_seconds,
        "train_seconds_max": train_max,
        "discover_seconds": discover_s,
        "artifact_path": None if last is None else last[0],
        "artifact_sha256": None if last is None else last[1],
        "participants": k,
        "nodes": [{"node_id": n, "type_index": i, "client_index": j} for n, i, j in chosen],
        "noop": noop,
        "run_id": int(context.run_id),
    }


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
            {"error": f"{type(err).__name__}: {err}", "traceback": traceback.format_exc()},
        )
        raise
    _write_json(out / "result.json" if out else None, result)
