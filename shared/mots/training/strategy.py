"""FedAvg on Flower's Strategy, every update verified: :class:`VerifyingFedAvg`.

A subclass of Flower's ``flwr.serverapp.strategy.FedAvg`` whose round loop is Flower's own
``Strategy.start``; it overrides only what the market's participants and verification need:

- :meth:`VerifyingFedAvg.configure_train` asks the market's participants still active (or the
  in-process engines' draw among them, :func:`mots.training.participants.sampled`), not Flower's
  random sample of connected nodes; one revoked or departed while training (the launcher's
  ``removed.json``, :mod:`mots.training.removal`) is active no more, and its reply to the round
  it was removed in is ignored;
- :meth:`VerifyingFedAvg.aggregate_train` records each participant's verdict: a node without a
  reply by the round's deadline, or with an error reply, is dropped; every reply is verified
  (:func:`mots.training.verification.verify_round`, with the server's own references of
  :mod:`mots.training.anchored`) and one that fails is left out and its participant recorded as
  failing verification (left out of later rounds too); the run fails when fewer than the policy's
  minimum share remain; the verified updates are combined
  (:class:`mots.training.fedavg.RoundAggregate`: mean, trimmed mean or median; the in-process
  engine combines its rounds with the same code);
- :meth:`VerifyingFedAvg.evaluate` is ``Strategy.start``'s ``evaluate_fn`` (the server-side
  evaluation): it measures the test loss ε, saves the round's artifact (finite models only) and
  appends the round's line to ``progress.jsonl``.

Federated evaluation is off (``fraction_evaluate=0``: FedAvg's own ``configure_evaluate`` sends
nothing). :class:`QuorumGrid` wraps the run's Grid for ``Strategy.start``: its
``send_and_receive`` pulls replies every 0.1 s (Flower's sleeps 3 s between pulls), reports each
reply (the partial progress lines) and ends the wait for stragglers once a quorum replied.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord, RecordDict
from flwr.serverapp import Grid
from flwr.serverapp.strategy import FedAvg
from flwr.supercore.run import Run

import mots.training.flower_messages as fm
from mots.training.participants import (
    DROPPED,
    FAILED,
    Participant,
    RunSetup,
    check_share,
    completed_per_type,
    num,
    participant_rows,
    sampled,
)
from mots.training.removal import REMOVED_REASON, RemovedNodes
from mots.training.verification import VerificationPolicy

REPLAY_ROUNDS = 10
"""Rounds of replies the stale check remembers (memory: K × 2 × the model, per round)."""


def append_line(path: Path | None, line: dict[str, Any]) -> None:
    """One JSON line onto ``progress.jsonl`` (the launcher follows it)."""
    if path is not None:
        with path.open("a") as f:
            f.write(json.dumps(line) + "\n")


def finite(weights: list[Any]) -> bool:
    """True when every array is finite."""
    return all(bool(np.all(np.isfinite(w))) for w in weights)


class QuorumGrid(Grid):
    """The run's Grid, with the round's wait of :meth:`send_and_receive`; the rest delegated.

    ``quorum(n)`` gives, for n messages, (q, factor, grace): once q replies are in after t s the
    wait ends at max(factor·t, t + grace) s if that is sooner than the timeout (stragglers wait for
    no one for long); ``on_reply(n)`` hears of every reply while others are pending; no reply is
    awaited from a node ``removed()`` names (revoked or departed: its key is being unregistered)
    nor from one the SuperLink took no message for (an unregistered node).
    """

    def __init__(
        self,
        grid: Grid,
        quorum: Callable[[int], tuple[int, float, float]] | None = None,
        on_reply: Callable[[int], None] | None = None,
        interval: float = 0.1,
        removed: Callable[[], Collection[int]] | None = None,
    ) -> None:
        self.grid = grid
        self.quorum = quorum
        self.on_reply = on_reply
        self.interval = interval
        self.removed = removed

    def set_run(self, run: Run) -> None:
        """Delegated."""
        self.grid.set_run(run)

    @property
    def run(self) -> Run:
        """Delegated."""
        return self.grid.run

    def create_message(
        self,
        content: RecordDict,
        message_type: str,
        dst_node_id: int,
        group_id: str,
        ttl: float | None = None,
    ) -> Message:
        """Delegated."""
        return self.grid.create_message(content, message_type, dst_node_id, group_id, ttl)

    def get_node_ids(self) -> Iterable[int]:
        """Delegated."""
        return self.grid.get_node_ids()

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        """Delegated."""
        return self.grid.push_messages(messages)

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        """Delegated."""
        return self.grid.pull_messages(message_ids)

    def send_and_receive(
        self, messages: Iterable[Message], *, timeout: float | None = None
    ) -> Iterable[Message]:
        """Push ``messages`` and pull their replies every ``interval`` s until all are in or the
        deadline (``timeout``, shortened by the quorum). Replies still missing then are absent."""
        messages = list(messages)
        if not messages:
            return []
        ids = list(self.grid.push_messages(messages))
        pending = {i: m.metadata.dst_node_id for i, m in zip(ids, messages, strict=False) if i}
        quorum = self.quorum(len(messages)) if self.quorum is not None else None
        replies: list[Message] = []
        start = time.monotonic()
        deadline = start + (timeout if timeout is not None else math.inf)
        while pending and time.monotonic() < deadline:
            got = list(self.grid.pull_messages(list(pending)))
            replies.extend(got)
            for m in got:
                pending.pop(m.metadata.reply_to_message_id, None)
            if self.removed is not None and pending:
                gone = self.removed()
                pending = {i: n for i, n in pending.items() if n not in gone}
            if got and pending and self.on_reply is not None:
                self.on_reply(len(replies))
            if got and quorum is not None and len(replies) >= quorum[0]:
                t = time.monotonic() - start
                deadline = min(deadline, start + max(quorum[1] * t, t + quorum[2]))
            if pending:
                time.sleep(self.interval)
        return replies


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
    input_shape: tuple[int, ...]
    history: list[list[tuple[Any, Any]]] = field(default_factory=list)
    """The last :data:`REPLAY_ROUNDS` rounds' (model, update) pairs, flattened float32: the
    stale check's memory."""
    task: Any = None
    """The run's task (:class:`mots.tasks.task_file.MarketTask`) when it is not the training
    config's data set: its model file's metadata (:mod:`mots.training.task_run`)."""


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
        net, weight_names(net), get_weights(net), x_test, y_test, holdout, initial, ds.input_shape
    )


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


@dataclass
class RoundLog:
    """What the rounds measured, for ``result.json``."""

    losses: list[float] = field(default_factory=list)
    round_seconds: list[float] = field(default_factory=list)
    train_max: list[float] = field(default_factory=list)
    asked: list[list[int]] = field(default_factory=list)
    accuracy: float = float("nan")
    last: tuple[str, str] | None = None
    """The last artifact saved: (path, sha256)."""


class VerifyingFedAvg(FedAvg):
    """Flower's FedAvg over the market's chosen participants, each update verified first.

    ``chosen`` are the run's participants (:func:`mots.training.participants.choose`), whose
    verdicts this strategy keeps; ``model`` the global model, its test data and the holdout;
    ``writer`` saves each round's artifact (None: none).
    """

    def __init__(
        self, setup: RunSetup, chosen: list[Participant], model: Model, writer: Any = None
    ) -> None:
        super().__init__(
            fraction_train=setup.cfg.fraction_train,
            fraction_evaluate=0.0,
            min_train_nodes=setup.cfg.min_train_clients,
            min_available_nodes=1,
        )
        self.setup = setup
        self.chosen = chosen
        self.model = model
        self.writer = writer
        self.log = RoundLog()
        self._start = time.perf_counter()
        self._head: dict[str, Any] = {}
        self._good: dict[int, Message] = {}
        self._asked: list[Participant] = []
        self.removed = RemovedNodes(setup.out)

    # -- what QuorumGrid asks ----------------------------------------------------------------
    def quorum(self, n: int) -> tuple[int, float, float]:
        """(replies that end the wait for stragglers, factor, grace) for a round of ``n``."""
        pol = self.setup.policy
        need = max(math.ceil(pol.min_share * n), math.ceil(n / 2), 1)
        return need, pol.straggler_factor, pol.straggler_grace_s

    def on_reply(self, n: int) -> None:
        """A partial progress line: ``n`` replies are in."""
        line = {**self._head, "clients_done": n, "seconds": time.perf_counter() - self._start}
        append_line(self.setup.progress, line)

    # -- Strategy ------------------------------------------------------------------------------
    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        """The global model to each participant asked in this round (round r = server_round − 1
        in the message's config, as the ClientApp reads it)."""
        r = server_round - 1
        self._start = time.perf_counter()
        self.drop_removed(r)
        self._asked = sampled(self.chosen, self.setup.cfg, r)
        self.log.asked.append([p.node_id for p in self._asked])
        self._head = {
            "round": r,
            "rounds": self.setup.cfg.rounds,
            "clients": len(self.chosen),
            "partial": True,
            "epsilon": self.log.losses[-1] if self.log.losses else float("nan"),
        }
        return [
            Message(
                RecordDict({"arrays": arrays, "config": self._train_config(r, p)}),
                dst_node_id=p.node_id,
                message_type=MessageType.TRAIN,
                group_id=str(r),
            )
            for p in self._asked
        ]

    @staticmethod
    def _train_config(r: int, p: Participant) -> ConfigRecord:
        """A train message's config: the round, and who the node is in this run's task (its
        node map's type and index: the ClientApp checks its data against that type's D)."""
        return ConfigRecord(
            {"round": r, fm.MSG_TYPE_INDEX: p.type_index, fm.MSG_CLIENT_INDEX: p.client_index}
        )

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """Each asked participant's verdict, then the verified updates combined."""
        from mots.training.fedavg import RoundAggregate

        r = server_round - 1
        self._good = self.collect(r, replies)
        accepted = self.verify(r, self._good)
        check_share(self.chosen, self.setup.policy, f"round {r + 1}")
        cfg, policy = self.setup.cfg, self.setup.policy
        sizes = [cfg.sizes[p.type_index] for p in accepted]
        combined = RoundAggregate(sizes, cfg.aggregation, policy.aggregator, policy.trim_fraction)
        for p in accepted:
            combined.add(self._good[p.node_id].content.array_records["arrays"].to_numpy_ndarrays())
        self.model.weights = combined.result()
        train = [
            num(m.content.metric_records["metrics"]["train_seconds"]) for m in self._good.values()
        ]
        self.log.train_max.append(max(train, default=0.0))
        metrics = MetricRecord({"replies": len(self._good), "verified": len(accepted)})
        return ArrayRecord(self.model.weights), metrics

    def collect(self, r: int, replies: Iterable[Message]) -> dict[int, Message]:
        """The good replies of round ``r`` by node id. An asked participant without a reply (by
        the round's deadline) or with an error reply is dropped; one without arrays fails."""
        by_node = {m.metadata.src_node_id: m for m in replies}
        good: dict[int, Message] = {}
        self.drop_removed(r)
        for p in self._asked:
            p.rounds_asked += 1
            reply = by_node.get(p.node_id)
            if p.status == DROPPED and p.left_in_round == r:
                continue  # removed while this round trained: its reply is ignored
            if reply is None:
                p.leave(DROPPED, r, "no reply by the round's deadline")
            elif reply.has_error():
                p.leave(DROPPED, r, f"error reply: {reply.error.reason}")
            elif "arrays" not in reply.content.array_records:
                p.leave(FAILED, r, "reply without arrays")
            else:
                good[p.node_id] = reply
        return good

    def drop_removed(self, r: int) -> None:
        """Participants the launcher recorded as removed (revoked or departed: their keys are
        being unregistered) leave in round ``r``: not asked again, their reply not used."""
        gone = self.removed()
        for p in self.chosen:
            if p.active and p.node_id in gone:
                p.leave(DROPPED, r, REMOVED_REASON)

    def verify(self, r: int, replies: dict[int, Message]) -> list[Participant]:
        """Verify the round's replies; fail the participants whose update does not count and
        return those whose update does."""
        from mots.training.verification import Candidate, accept_all

        cfg = self.setup.cfg
        cands = []
        for p in self._asked:
            if p.node_id in replies:
                content = replies[p.node_id].content
                metrics: Any = content.metric_records.get("metrics", {})
                cands.append(
                    Candidate(
                        p.node_id,
                        content.array_records["arrays"].to_numpy_ndarrays(),
                        num(metrics.get("num_examples", -1)),
                        num(metrics.get("samples", -1)),
                        int(cfg.sizes[p.type_index]),
                    )
                )
        checked = self.setup.policy.verify and not self.setup.noop
        result = self._verify_round(r, cands) if checked else accept_all(cands)
        verdicts = {v.key: v for v in result.verdicts}
        accepted = []
        for p in self._asked:
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

    def _verify_round(self, r: int, cands: list[Any]) -> Any:
        """:func:`mots.training.verification.verify_round` against the server's references."""
        from mots.training.verification import verify_round

        cfg, policy, model = self.setup.cfg, self.setup.policy, self.model
        ho = model.holdout
        result = verify_round(
            model.weights,
            cands,
            policy,
            reference_update=ho.reference_update(model.weights, r) if ho is not None else None,
            validation_loss=ho.loss if ho is not None else None,
            validation_accuracy=ho.accuracy if ho is not None else None,
            aggregation_weights={p.node_id: float(cfg.sizes[p.type_index]) for p in self._asked}
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
        return result

    # -- server-side evaluation (Strategy.start's evaluate_fn) -----------------------------------
    def evaluate(self, server_round: int, arrays: ArrayRecord) -> MetricRecord | None:
        """Round 0: the initial model's ε. After a round: ε and accuracy of the new global model,
        the round's artifact and its progress line."""
        if server_round == 0:
            return MetricRecord({"epsilon": self.model.initial_epsilon})
        eps, accuracy = self.measure()
        seconds = time.perf_counter() - self._start
        self.log.losses.append(eps)
        self.log.round_seconds.append(seconds)
        self.log.accuracy = accuracy
        self.log.last = self.record(server_round - 1, eps, accuracy, seconds) or self.log.last
        return MetricRecord({"epsilon": eps, "accuracy": accuracy})

    def measure(self) -> tuple[float, float]:
        """(ε, accuracy) of the global model on the test subset (NaN for a no-op run)."""
        from mots.training.local import evaluate, torch_threads
        from mots.training.models import set_weights

        if self.setup.noop:
            return float("nan"), float("nan")
        with torch_threads(1):
            set_weights(self.model.net, self.model.weights)
            return evaluate(self.model.net, self.model.x_test, self.model.y_test)

    def record(self, r: int, eps: float, accuracy: float, seconds: float) -> tuple[str, str] | None:
        """Save the round's artifact (finite models only) and append its progress line."""
        from mots.training.artifacts import round_metadata

        s, model, chosen = self.setup, self.model, self.chosen
        saved = None
        if self.writer is not None and not s.noop and math.isfinite(eps) and finite(model.weights):
            if model.task is not None:  # the task's own mots-model/2 (issue 36)
                from mots.tasks.training import task_round_metadata

                meta = task_round_metadata(
                    model.task, s.participants, r, eps, accuracy, len(model.y_test), s.cfg
                )
            else:
                meta = round_metadata(
                    s.cfg, s.participants, r, eps, accuracy, model.input_shape, "deployment"
                )
            path, digest = self.writer.write(model.names, model.weights, meta)
            saved = (str(path), digest)
        metrics = [m.content.metric_records["metrics"] for m in self._good.values()]
        line = {
            "round": r,
            "rounds": s.cfg.rounds,
            "epsilon": eps,
            "accuracy": accuracy,
            "seconds": seconds,
            "clients_done": len(self._good),
            "clients": len(chosen),
            "verified": sum(p.active for p in chosen),
            "dropped": sum(p.status == DROPPED for p in chosen),
            "failed_verification": sum(p.status == FAILED for p in chosen),
            "train_seconds": [num(m["train_seconds"]) for m in metrics],
            "client_seconds": [num(m["client_seconds"]) for m in metrics],
        }
        append_line(s.progress, line)
        return saved

    # -- the outcome ---------------------------------------------------------------------------
    def outcome(self, run_id: int, discover_seconds: float) -> dict[str, Any]:
        """What ``result.json`` records: the losses, each participant's verdict, the quality
        gate (whether the model may be published) and the last artifact."""
        from mots.training.quality_gate import quality_gate

        s, log, chosen = self.setup, self.log, self.chosen
        gate = quality_gate(
            log.losses[-1],
            initial_epsilon=self.model.initial_epsilon,
            quoted_epsilon=s.quoted_epsilon,
            policy=s.policy,
            finite_weights=finite(self.model.weights),
        )
        published = gate.passed or s.noop
        return {
            "epsilon": log.losses[-1],
            "accuracy": log.accuracy,
            "losses": log.losses,
            "round_seconds": log.round_seconds,
            "train_seconds_max": log.train_max,
            "discover_seconds": discover_seconds,
            "artifact_path": log.last[0] if log.last is not None and published else None,
            "artifact_sha256": log.last[1] if log.last is not None and published else None,
            "participants": s.participants,
            "completed_participants": completed_per_type(chosen, len(s.participants)),
            "participant_status": participant_rows(chosen),
            "asked_per_round": log.asked,
            "quality_gate": asdict(gate),
            "published": published,
            "policy": s.policy.model_dump(mode="json"),
            "nodes": [
                {"node_id": p.node_id, "type_index": p.type_index, "client_index": p.client_index}
                for p in chosen
            ],
            "noop": s.noop,
            "run_id": run_id,
        }
