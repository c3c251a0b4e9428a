"""The ServerApp (Flower Message API with a Grid): FedAvg over the market's participants, verified.

Who is who comes from the run config's node map, which the orchestration (or the local
federation) built from the SuperNode public keys it registered with the SuperLink: Flower assigns
each registered key a node id and admits only requests signed by that key, so a node is the
participant whose key it holds, whatever it says about itself. The first K_i mapped nodes of each
type are chosen. Each FedAvg round sends them the global model and waits for their replies until
the round's deadline: a node that does not reply in time (or replies with an error) is dropped
from that round and the rest; every reply is verified (:mod:`mots.training.verification`) and one
that fails is left out and its node recorded as failing verification (also left out of later
rounds). The verified updates are combined (mean, trimmed mean or median), the test loss ε is
measured, the round's artifact saved (finite models only) and a line appended to
``progress.jsonl``. Training stops when fewer than the policy's minimum share of the chosen
participants remain. A final quality gate decides whether the model may be published;
``result.json`` records it with each participant's outcome.

Cross-device sampling (``TrainConfig.fraction_train`` < 1, from ``MOTS_TRAIN_FRACTION`` and
``MOTS_TRAIN_MIN_CLIENTS``): each FedAvg round asks only the participants that
:func:`mots.training.partition.round_sample` draws among those still active, the same draw as
the in-process engines (docs/training.md: what it does to Eq. 3). Every participant is still a
participant of the market's K: it is paid when it stayed active and every update it was asked for
was verified, also when no round drew it.
"""

from __future__ import annotations

import json
import math
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MessageType, RecordDict
from flwr.serverapp import Grid, ServerApp

import mots.training.flower_messages as fm
from mots.training.config import TrainConfig
from mots.training.partition import round_sample
from mots.training.verification import VerificationPolicy

app = ServerApp()

VERIFIED, DROPPED, FAILED = "verified", "dropped", "failed_verification"


class RunFailedError(RuntimeError):
    """The run cannot go on (too few participants left, no mapped node, a bad run config)."""

    def __init__(self, message: str, participants: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.participants = participants or []


def _num(value: Any) -> float:
    """A scalar record value as a number (records are typed as unions of scalars and lists)."""
    if isinstance(value, list | bytes | str):
        raise TypeError(f"expected a number in the record, got {value!r}")
    return float(value)


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


@dataclass
class Participant:
    """A chosen node, the market participant its key belongs to, and how it fared."""

    node_id: int
    type_index: int
    client_index: int
    status: str = VERIFIED
    rounds_asked: int = 0
    rounds_verified: int = 0
    left_in_round: int | None = None
    reason: str = ""
    checks: list[dict[str, Any]] = field(default_factory=list)

    @property
    def active(self) -> bool:
        """Still asked to train (not dropped, not failed)."""
        return self.status == VERIFIED

    def leave(self, status: str, round_index: int | None, reason: str) -> None:
        """Drop the participant from this round and the rest."""
        self.status, self.left_in_round, self.reason = status, round_index, reason


@dataclass
class RunSetup:
    """What the run config says: the training, the coalition, the node map and the rules."""

    cfg: TrainConfig
    participants: list[int]
    node_map: dict[int, tuple[int, int]]
    policy: VerificationPolicy
    quoted_epsilon: float | None
    node_timeout: float
    noop: bool
    out: Path | None
    artifact_dir: Path | None

    @property
    def progress(self) -> Path | None:
        """The progress file the launcher follows."""
        return self.out / "progress.jsonl" if self.out is not None else None


def setup(context: Context) -> RunSetup:
    """Parse the run config (ValueError naming the key on bad input)."""
    rc = context.run_config
    cfg = fm.train_config_from_run(rc)
    quoted = _num(rc.get(fm.RUN_QUOTED_EPSILON, 0.0))
    return RunSetup(
        cfg=cfg,
        participants=list(cfg.check_participants(fm.participants_from_run(rc))),
        node_map=fm.node_map_from_run(rc),
        policy=fm.policy_from_run(rc),
        quoted_epsilon=quoted if quoted > 0.0 else None,
        node_timeout=_num(rc.get(fm.RUN_NODE_TIMEOUT, 180.0)),
        noop=bool(rc.get(fm.RUN_NOOP, False)),
        out=Path(str(rc[fm.RUN_OUT_DIR])) if rc.get(fm.RUN_OUT_DIR) else None,
        artifact_dir=Path(str(rc[fm.RUN_ARTIFACT_DIR])) if rc.get(fm.RUN_ARTIFACT_DIR) else None,
    )


def send_and_receive(
    grid: Grid,
    messages: list[Message],
    timeout: float,
    interval: float = 0.1,
    on_reply: Callable[[int], None] | None = None,
    quorum: tuple[int, float, float] | None = None,
) -> list[Message]:
    """Push ``messages`` and pull their replies every ``interval`` s until all are in or the
    deadline: ``timeout`` s, or, with ``quorum`` = (q, factor, grace), once q replies are in after
    t s, max(factor·t, t + grace) s if that is sooner (stragglers wait for no one for long).

    Grid.send_and_receive sleeps 3 s between pulls, which would add up to 3 s to every round on top
    of the SuperNodes' own 3 s polling; pulling often costs one small HTTP request each time.
    Replies still missing at the deadline are simply absent (the caller drops their nodes).
    """
    pending = set(grid.push_messages(messages))
    replies: list[Message] = []
    start = time.monotonic()
    deadline = start + timeout
    while pending and time.monotonic() < deadline:
        got = list(grid.pull_messages(pending))
        replies.extend(got)
        pending -= {m.metadata.reply_to_message_id for m in got}
        if got and pending and on_reply is not None:
            on_reply(len(replies))
        if got and quorum is not None and len(replies) >= quorum[0]:
            t = time.monotonic() - start
            deadline = min(deadline, start + max(quorum[1] * t, t + quorum[2]))
        if pending:
            time.sleep(interval)
    return replies


def choose(setup: RunSetup) -> list[Participant]:
    """The participants: for each type i, the mapped nodes of indices 0..K_i−1 (the orchestration
    maps the round's participants there; a local federation's nodes by their client index). A
    participant without a registered node is recorded as dropped (node id 0)."""
    by_key = {(i, j): node for node, (i, j) in setup.node_map.items()}
    chosen: list[Participant] = []
    for i, k in enumerate(setup.participants):
        for j in range(k):
            node = by_key.get((i, j))
            if node is None:
                missing = Participant(0, i, j)
                missing.leave(DROPPED, None, "no registered SuperNode key")
                chosen.append(missing)
            else:
                chosen.append(Participant(node, i, j))
    return chosen


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


def check_share(chosen: list[Participant], policy: VerificationPolicy, when: str) -> None:
    """Fail the run when fewer than ``min_share`` of the chosen participants remain."""
    active = sum(p.active for p in chosen)
    need = max(1, math.ceil(policy.min_share * len(chosen)))
    if active < need:
        left = {p.node_id: f"{p.status}: {p.reason}" for p in chosen if not p.active}
        raise RunFailedError(
            f"{when}: {active} of {len(chosen)} participants remain, the policy needs {need} "
            f"(min_share {policy.min_share}); left: {left}",
            participant_rows(chosen),
        )


def train_round(
    grid: Grid,
    r: int,
    weights: list[Any],
    active: list[Participant],
    setup: RunSetup,
    on_reply: Callable[[int], None],
) -> dict[int, Message]:
    """Send the global model to the active participants; their good replies by node id. A node
    without a reply by the deadline, or with an error reply, is dropped."""
    msgs = [
        Message(
            RecordDict({"arrays": ArrayRecord(weights), "config": ConfigRecord({"round": r})}),
            dst_node_id=p.node_id,
            message_type=MessageType.TRAIN,
            group_id=str(r),
        )
        for p in active
    ]
    pol = setup.policy
    need = max(math.ceil(pol.min_share * len(active)), math.ceil(len(active) / 2), 1)
    quorum = (need, pol.straggler_factor, pol.straggler_grace_s)
    got = send_and_receive(grid, msgs, pol.round_timeout_s, on_reply=on_reply, quorum=quorum)
    replies = {m.metadata.src_node_id: m for m in got}
    good: dict[int, Message] = {}
    for p in active:
        p.rounds_asked += 1
        reply = replies.get(p.node_id)
        if reply is None:
            p.leave(DROPPED, r, "no reply by the round's deadline")
        elif reply.has_error():
            p.leave(DROPPED, r, f"error reply: {reply.error.reason}")
        elif "arrays" not in reply.content.array_records:
            p.leave(FAILED, r, "reply without arrays")
        else:
            good[p.node_id] = reply
    return good


def participant_rows(chosen: list[Participant]) -> list[dict[str, Any]]:
    """Each participant's outcome as plain JSON values."""
    return [asdict(p) for p in chosen]


def sampled(chosen: list[Participant], cfg: TrainConfig, r: int) -> list[Participant]:
    """The participants asked to train in FedAvg round ``r``: all the active ones, or with
    cross-device sampling max(⌊A·fraction_train⌋, min_train_clients) of the A active ones
    drawn by ``round_sample`` (the in-process engines' draw over the coalition, in the same
    type-major order, while nobody has left)."""
    active = [p for p in chosen if p.active]
    return [active[int(i)] for i in round_sample(len(active), cfg, r)]


def completed_per_type(chosen: list[Participant], n_types: int) -> list[int]:
    """Per type, the participants still active whose updates were verified in every round they
    were asked (with sampling, one that no round drew counts: it stood ready throughout; without
    it every active participant is asked every round)."""
    out = [0] * n_types
    for p in chosen:
        if p.status == VERIFIED and p.rounds_verified == p.rounds_asked:
            out[p.type_index] += 1
    return out


def finite(weights: list[Any]) -> bool:
    """True when every array is finite."""
    return all(bool(np.all(np.isfinite(w))) for w in weights)


@dataclass
class Model:
    """The global model, the data to evaluate it and the server's holdout for verification."""

    net: Any
    names: list[str]
    weights: list[Any]
    x_test: Any
    y_test: Any
    holdout: Any
    initial_epsilon: float
    input_shape: tuple[int, int, int]
    history: list[list[tuple[Any, Any]]] = field(default_factory=list)
    """The last :data:`REPLAY_ROUNDS` rounds' (model, update) pairs, flattened float32: the
    stale check's memory."""


def build(setup: RunSetup) -> Model:
    """The initial global model, the test subset (ε) and the holdout (verification)."""
    import torch

    from mots.training.datasets import load_dataset, to_float
    from mots.training.holdout import Holdout
    from mots.training.local import evaluate, torch_threads
    from mots.training.models import build_model, get_weights, weight_names
    from mots.training.partition import evaluation_indices

    cfg = setup.cfg
    ds = load_dataset(cfg.dataset, cfg.data_dir)
    t = evaluation_indices(len(ds.y_test), cfg.test_subset)
    x_test, y_test = torch.from_numpy(to_float(ds.x_test[t])), torch.from_numpy(ds.y_test[t])
    net = build_model(
        cfg.model, ds.input_shape, ds.num_classes, zero_init=cfg.zero_init, seed=cfg.seed
    )
    with torch_threads(1):
        initial = float("nan") if setup.noop else evaluate(net, x_test, y_test)[0]
    use_holdout = setup.policy.verify and not setup.noop
    holdout = Holdout.build(cfg, ds, setup.policy.holdout) if use_holdout else None
    return Model(
        net,
        weight_names(net),
        get_weights(net),
        x_test,
        y_test,
        holdout,
        initial,
        ds.input_shape,
    )


REPLAY_ROUNDS = 10
"""Rounds of replies the stale check remembers (memory: K × 2 × the model, per round)."""


def anchored_references(
    ho: Any, weights: list[Any], r: int, cands: list[Any], policy: VerificationPolicy
) -> dict[int, Any]:
    """The server's own references per declared size among ``cands`` (none without a holdout)."""
    if ho is None or policy.anchor_draws <= 0:
        return {}
    sizes = sorted({c.declared_size for c in cands})
    return {d: ho.anchored_references(weights, r, d, policy.anchor_draws) for d in sizes}


def remember(model: Model, cands: list[Any]) -> None:
    """Add the round's replies (model and update, flattened) to the stale check's memory."""
    from mots.training.verification import flatten, shape_problem

    g = flatten(model.weights)
    pairs = []
    for c in cands:
        if shape_problem(c.weights, model.weights) is None:
            w = flatten(c.weights)
            if np.all(np.isfinite(w)):
                pairs.append((w.astype(np.float32), (w - g).astype(np.float32)))
    model.history = [*model.history, pairs][-REPLAY_ROUNDS:]


def verify(
    r: int, replies: dict[int, Message], active: list[Participant], setup: RunSetup, model: Model
) -> list[Participant]:
    """Verify the round's replies; fail the participants whose update does not count and return
    those whose update does."""
    from mots.training.verification import Candidate, accept_all, verify_round

    cfg, policy = setup.cfg, setup.policy
    cands = []
    for p in active:
        if p.node_id in replies:
            content = replies[p.node_id].content
            metrics: Any = content.metric_records.get("metrics", {})
            cands.append(
                Candidate(
                    p.node_id,
                    content.array_records["arrays"].to_numpy_ndarrays(),
                    _num(metrics.get("num_examples", -1)),
                    _num(metrics.get("samples", -1)),
                    int(cfg.sizes[p.type_index]),
                )
            )
    if not policy.verify or setup.noop:
        result = accept_all(cands)
    else:
        ho = model.holdout
        result = verify_round(
            model.weights,
            cands,
            policy,
            reference_update=ho.reference_update(model.weights, r) if ho is not None else None,
            validation_loss=ho.loss if ho is not None else None,
            aggregation_weights={p.node_id: float(cfg.sizes[p.type_index]) for p in active}
            if cfg.aggregation == "weighted"
            else None,
            expected_samples=cfg.local_steps * cfg.batch_size,
            reference_losses=ho.reference_losses(model.weights, r, policy.reference_draws)
            if ho is not None and policy.harm_check == "reference"
            else (),
            anchored=anchored_references(ho, model.weights, r, cands, policy),
            history=[
                (w.astype(np.float64), d.astype(np.float64)) for h in model.history for w, d in h
            ],
        )
        remember(model, cands)
    verdicts = {v.key: v for v in result.verdicts}
    accepted = []
    for p in active:
        v = verdicts.get(p.node_id)
        if v is None:
            continue
        p.checks.append({"round": r, "check": v.check, "stats": v.stats})
        if v.accepted:
            p.rounds_verified += 1
            accepted.append(p)
        else:
            p.leave(FAILED, r, f"{v.check}: {v.detail}")
    return accepted


def advance(
    r: int, replies: dict[int, Message], accepted: list[Participant], setup: RunSetup, model: Model
) -> tuple[float, float]:
    """Combine the accepted updates into the next global model and measure (ε, accuracy)."""
    from mots.training.fedavg import aggregation_weights, combine
    from mots.training.local import evaluate, torch_threads
    from mots.training.models import set_weights

    cfg, policy = setup.cfg, setup.policy
    models = [
        replies[p.node_id].content.array_records["arrays"].to_numpy_ndarrays() for p in accepted
    ]
    weights = aggregation_weights([cfg.sizes[p.type_index] for p in accepted], cfg.aggregation)
    model.weights = combine(models, weights, policy.aggregator, policy.trim_fraction)
    if setup.noop:
        return float("nan"), float("nan")
    with torch_threads(1):
        set_weights(model.net, model.weights)
        return evaluate(model.net, model.x_test, model.y_test)


def record(
    r: int,
    setup: RunSetup,
    model: Model,
    eps: float,
    accuracy: float,
    replies: dict[int, Message],
    chosen: list[Participant],
    seconds: float,
    writer: Any,
) -> tuple[str, str] | None:
    """Save the round's artifact (finite models only) and append its progress line."""
    from mots.training.result import round_metadata

    saved = None
    if writer is not None and not setup.noop and math.isfinite(eps) and finite(model.weights):
        meta = round_metadata(
            setup.cfg, setup.participants, r, eps, accuracy, model.input_shape, "deployment"
        )
        path, digest = writer.write(model.names, model.weights, meta)
        saved = (str(path), digest)
    metrics = [m.content.metric_records["metrics"] for m in replies.values()]
    _append(
        setup.progress,
        {
            "round": r,
            "rounds": setup.cfg.rounds,
            "epsilon": eps,
            "accuracy": accuracy,
            "seconds": seconds,
            "clients_done": len(replies),
            "clients": len(chosen),
            "verified": sum(p.active for p in chosen),
            "dropped": sum(p.status == DROPPED for p in chosen),
            "failed_verification": sum(p.status == FAILED for p in chosen),
            "train_seconds": [_num(m["train_seconds"]) for m in metrics],
            "client_seconds": [_num(m["client_seconds"]) for m in metrics],
        },
    )
    return saved


def run(grid: Grid, context: Context) -> dict[str, Any]:
    """Train the run's coalition round by round; return the result ``result.json`` records."""
    from mots.training.result import ArtifactWriter
    from mots.training.verification import quality_gate

    s = setup(context)
    t0 = time.perf_counter()
    chosen = choose(s)
    wait_connected(grid, chosen, s.node_timeout)
    check_share(chosen, s.policy, "before round 1")
    discover_s = time.perf_counter() - t0
    model = build(s)
    writer = ArtifactWriter(s.artifact_dir) if s.artifact_dir is not None else None
    losses: list[float] = []
    round_seconds: list[float] = []
    train_max: list[float] = []
    last: tuple[str, str] | None = None
    accuracy = float("nan")
    asked: list[list[int]] = []
    for r in range(s.cfg.rounds):
        start = time.perf_counter()
        active = sampled(chosen, s.cfg, r)
        asked.append([p.node_id for p in active])
        head: dict[str, Any] = {
            "round": r,
            "rounds": s.cfg.rounds,
            "clients": len(chosen),
            "partial": True,
            "epsilon": losses[-1] if losses else float("nan"),
        }

        def on_reply(n: int, head: dict[str, Any] = head, t: float = start) -> None:
            _append(s.progress, {**head, "clients_done": n, "seconds": time.perf_counter() - t})

        replies = train_round(grid, r, model.weights, active, s, on_reply)
        accepted = verify(r, replies, active, s, model)
        check_share(chosen, s.policy, f"round {r + 1}")
        eps, accuracy = advance(r, replies, accepted, s, model)
        seconds = time.perf_counter() - start
        losses.append(eps)
        round_seconds.append(seconds)
        train_max.append(
            max(
                (
                    _num(m.content.metric_records["metrics"]["train_seconds"])
                    for m in replies.values()
                ),
                default=0.0,
            )
        )
        last = record(r, s, model, eps, accuracy, replies, chosen, seconds, writer) or last
    gate = quality_gate(
        losses[-1],
        initial_epsilon=model.initial_epsilon,
        quoted_epsilon=s.quoted_epsilon,
        policy=s.policy,
        finite_weights=finite(model.weights),
    )
    published = gate.passed or s.noop
    return {
        "epsilon": losses[-1],
        "accuracy": accuracy,
        "losses": losses,
        "round_seconds": round_seconds,
        "train_seconds_max": train_max,
        "discover_seconds": discover_s,
        "artifact_path": last[0] if last is not None and published else None,
        "artifact_sha256": last[1] if last is not None and published else None,
        "participants": s.participants,
        "completed_participants": completed_per_type(chosen, len(s.participants)),
        "participant_status": participant_rows(chosen),
        "asked_per_round": asked,
        "quality_gate": asdict(gate),
        "published": published,
        "policy": s.policy.model_dump(mode="json"),
        "nodes": [
            {"node_id": p.node_id, "type_index": p.type_index, "client_index": p.client_index}
            for p in chosen
        ],
        "noop": s.noop,
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
            {
                "error": f"{type(err).__name__}: {err}",
                "traceback": traceback.format_exc(),
                "participant_status": getattr(err, "participants", []),
            },
        )
        raise
    _write_json(out / "result.json" if out else None, result)
