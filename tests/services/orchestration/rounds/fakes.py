"""In-memory stand-ins for the round machine's ports: a scripted market and evaluation answering
each contract TaskSpec the steps call (:func:`answers`),
a store in a dict, a trainer that trains nobody, a queue in a list and a clock that only moves
when told. The machine's rules run against them in milliseconds."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from mots.economics.scenario import ClientType
from mots.platform.api.base import TERMINAL_STATES, RoundState
from mots.platform.api.pricing import (
    PricingRequest,
)
from mots.platform.api.rounds import ErrorFit, SettleResult, TrainingProgress
from mots.platform.api.tasks import DEFAULT_TASK
from mots.platform.contracts import (
    EVALUATION_ERROR_MODEL,
    EVALUATION_EVALUATE,
    EVALUATION_PUBLISHED,
    MARKET_CLOSE_ROUND,
    MARKET_DECLARATION_PROGRESS,
    MARKET_OPEN_ROUND,
    MARKET_POPULATION,
    MARKET_SETTLE_ROUND,
    TRAINING_TRAIN,
    AdvanceRequest,
    Coalition,
    CurrentErrorModel,
    DeclarationProgress,
    ErrorPosteriorEstimate,
    EvaluationRequest,
    EvaluationResult,
    MarketRoundStatus,
    OpenRoundPayload,
    Population,
    PopulationRequest,
    RoundDecisions,
    RoundRef,
    SettlePayload,
    TaskRef,
    TrainRequest,
    TrainResult,
)
from mots.training.progress import RoundProgress
from services.orchestration.core.config import Settings
from services.orchestration.rounds.machine import RoundMachine
from services.orchestration.rounds.ports import (
    RoundInFlight,
    RoundPorts,
    RoundRecord,
    RoundStore,
    RoundUpdate,
)
from services.orchestration.rounds.prometheus import progress_recorder

SMALL, LARGE = "small", "large"
CLIENTS = {SMALL: [1, 2, 3, 4], LARGE: [5, 6]}
"""Four clients with 50 samples each, two with 300."""


class Clock:
    """Seconds since the epoch, moved by hand."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now

    def datetime(self) -> datetime:
        return datetime.fromtimestamp(self.now, UTC)


class Failing:
    """Raises ``times`` times (forever if None), then lets calls through."""

    def __init__(self, error: Exception, times: int | None = None) -> None:
        self.error, self.times = error, times

    def check(self) -> None:
        if self.times is None or self.times > 0:
            if self.times is not None:
                self.times -= 1
            raise self.error


class FakeServices:
    """The market, pricing and evaluation services, scripted: who joins, who buys and pays, who
    has declared; ``failing[name]`` makes a call raise."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.clients = {k: list(v) for k, v in CLIENTS.items()}
        self.joined: dict[str, list[int]] = {LARGE: [5, 6]}
        self.bought: dict[str, list[int]] = {SMALL: [1, 2, 3, 4]}
        self.paid: dict[str, list[int]] = {SMALL: [1, 2, 3, 4]}
        self.declared: int | None = None  # None: every client has declared
        self.fit: ErrorFit | None = None
        self.posterior: ErrorPosteriorEstimate | None = None
        self.failing: dict[str, Failing] = {}
        self.calls: list[str] = []
        self.opened: list[OpenRoundPayload] = []
        self.settled: list[SettlePayload] = []
        self.quoted: list[PricingRequest] = []
        self.keys: dict[int, str] = {}
        self.counted: list[int] = []

    def _enter(self, name: str) -> None:
        self.calls.append(name)
        if name in self.failing:
            self.failing[name].check()

    def error_model(self, _: TaskRef) -> CurrentErrorModel:
        self._enter("error_model")
        return CurrentErrorModel(fit=self.fit, posterior=self.posterior)

    def population(self, ref: PopulationRequest) -> Population:
        self._enter("population")
        sizes = {SMALL: 50, LARGE: 300}
        return Population(
            types=[
                ClientType(name=n, data_size=sizes[n], cost=sizes[n] / 100, count=len(ids))
                for n, ids in self.clients.items()
                if ids
            ]
        )

    def open(self, quote: OpenRoundPayload) -> MarketRoundStatus:
        self._enter("open")
        self.opened.append(quote)
        return MarketRoundStatus(round_id=quote.round_id, state="collecting")

    def measurement_published(self, ref: RoundRef) -> None:
        self._enter("measurement_published")
        self.counted.append(ref.round_id)

    def _decisions(self, round_id: int) -> RoundDecisions:
        registered = sum(len(v) for v in self.clients.values())
        return RoundDecisions(
            round_id=round_id,
            registered=registered,
            declared=registered if self.declared is None else self.declared,
            participants=self.joined,
            buyers=self.bought,
            paid_buyers=self.paid,
        )

    def _members(self, decisions: RoundDecisions) -> RoundDecisions:
        """The round's members (the fake market's clients) and their keys, as close answers."""
        members = {n: sorted(ids) for n, ids in self.clients.items() if ids}
        joined = (c for ids in decisions.participants.values() for c in ids)
        everyone = {*joined, *(c for ids in members.values() for c in ids)}
        keys = {c: self.keys[c] for c in everyone if c in self.keys}
        return decisions.model_copy(update={"members": members, "node_keys": keys})

    def progress(self, ref: RoundRef) -> DeclarationProgress:
        self._enter("progress")
        seen = self._decisions(ref.round_id)
        return DeclarationProgress(
            round_id=ref.round_id,
            state="collecting",
            registered=seen.registered,
            declared=seen.declared,
        )

    def close(self, ref: RoundRef) -> RoundDecisions:
        self._enter("close")
        return self._members(self._decisions(ref.round_id))

    def evaluate(self, request: EvaluationRequest) -> EvaluationResult:
        self._enter("evaluate")
        return EvaluationResult(
            round_id=request.round_id, test_loss=0.68, accuracy=0.7, seconds=1.0, fit=None
        )

    def settle(self, payload: SettlePayload) -> SettleResult:
        self._enter("settle")
        self.settled.append(payload)
        paid = Decimal(sum(len(v) for v in self.paid.values()))
        rewards = sum(
            (payload.rewards.get(n, Decimal(0)) for n, ids in self.joined.items() for c in ids
             if not payload.refund_buyers and c not in payload.dropped),
            Decimal(0),
        )  # fmt: skip
        zero = Decimal(0)
        return SettleResult(
            round_id=payload.round_id,
            payments=paid,
            rewards_paid=zero if payload.refund_buyers else rewards,
            charges=zero,
            subsidy=zero if payload.refund_buyers else max(zero, rewards - paid),
            surplus=zero if payload.refund_buyers else max(zero, paid - rewards),
            refunds=paid if payload.refund_buyers else zero,
            captured_price=None if payload.refund_buyers else payload.price,
            captured_rewards={} if payload.refund_buyers else dict(payload.rewards),
        )


def answers(services: FakeServices, trainer: FakeTrainer) -> dict[str, Callable[[Any], Any]]:
    """Each contract task the round calls, answered by the fakes (by its TaskSpec's name)."""
    return {
        EVALUATION_ERROR_MODEL.name: services.error_model,
        MARKET_POPULATION.name: services.population,
        MARKET_OPEN_ROUND.name: services.open,
        MARKET_DECLARATION_PROGRESS.name: services.progress,
        MARKET_CLOSE_ROUND.name: services.close,
        TRAINING_TRAIN.name: trainer.train,
        EVALUATION_EVALUATE.name: services.evaluate,
        MARKET_SETTLE_ROUND.name: services.settle,
        EVALUATION_PUBLISHED.name: services.measurement_published,
    }


class MemoryStore:
    """Rounds in a dict; a move is a compare-and-set on the state, as in SQL."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.rounds: dict[int, RoundRecord] = {}
        self.transitions: list[tuple[int, RoundState, RoundState, float, str]] = []
        self.progress_fails = False

    def create(
        self,
        subsidy_budget_micros: int | None = None,
        collect_seconds: float | None = None,
        task: str = DEFAULT_TASK,
        task_version: int | None = None,
    ) -> int:
        for rnd in self.rounds.values():
            if rnd.state not in TERMINAL_STATES and rnd.task == task:
                raise RoundInFlight(f"round {rnd.id} is still {rnd.state}; one round per task")
        round_id = len(self.rounds) + 1
        now = self.clock.datetime()
        self.rounds[round_id] = RoundRecord(
            id=round_id,
            state=RoundState.OPEN,
            created_at=now,
            state_entered_at=now,
            subsidy_budget_micros=subsidy_budget_micros,
            collect_seconds=collect_seconds,
            task=task,
            task_version=task_version,
        )
        return round_id

    def load(self, round_id: int) -> RoundRecord | None:
        return self.rounds.get(round_id)

    def latest(self, limit: int) -> list[RoundRecord]:
        return [self.rounds[i] for i in sorted(self.rounds, reverse=True)[:limit]]

    def move(
        self, round_id: int, src: RoundState, dst: RoundState, note: str, update: RoundUpdate
    ) -> float | None:
        rnd = self.rounds.get(round_id)
        if rnd is None or rnd.state != src:
            return None
        now = self.clock.datetime()
        seconds = (now - rnd.state_entered_at).total_seconds()
        self.rounds[round_id] = dataclasses.replace(
            rnd,
            state=dst,
            state_entered_at=now,
            **update.values(),
        )
        self.transitions.append((round_id, src, dst, seconds, note))
        return seconds

    def record_progress(self, round_id: int, progress: TrainingProgress) -> None:
        if self.progress_fails:
            raise ConnectionError("the database is away")
        rnd = self.rounds[round_id]
        if rnd.state == RoundState.TRAINING:
            self.rounds[round_id] = dataclasses.replace(rnd, training_progress=progress)

    def phase_seconds(self, round_id: int) -> dict[str, float]:
        phases: dict[str, float] = {}
        for rid, src, _, seconds, _ in self.transitions:
            if rid == round_id:
                phases[src.value] = phases.get(src.value, 0.0) + seconds
        return phases

    def unfinished(self) -> list[tuple[int, RoundState]]:
        return [(r.id, r.state) for r in self.rounds.values() if r.state not in TERMINAL_STATES]

    def mark_expired(self, round_id: int) -> None:
        rnd = self.rounds[round_id]
        self.rounds[round_id] = dataclasses.replace(rnd, artifact_expired_at=self.clock.datetime())

    def path(self, round_id: int) -> list[str]:
        """The states the round entered, in order."""
        return [dst.value for rid, _, dst, _, _ in self.transitions if rid == round_id]


class FakeTrainer:
    """Trains nobody: reports each FedAvg round, then the ``completed`` participants (all of K
    unless set); ``error`` makes it fail; every FedAvg round takes ``seconds`` on the clock;
    ``statuses`` (client id → status) makes it report each participant's outcome as the Flower
    engine does."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.completed: Callable[[list[int]], list[int]] = list
        self.error: Exception | None = None
        self.calls: list[list[int]] = []
        self.seen_progress: list[RoundProgress] = []
        self.coalitions: list[Coalition | None] = []
        self.statuses: dict[int, str] | None = None
        self.artifact_root: Path | None = None  # set: write a real artifact directory there
        self.store: RoundStore | None = (
            None  # set: each FedAvg round noted there, as the worker does
        )

    def train(self, request: TrainRequest) -> TrainResult:
        participants, round_id, coalition = request.participants, request.round_id, request
        self.calls.append(list(participants))
        self.coalitions.append(coalition)
        if self.error is not None:
            raise self.error
        progress = None if self.store is None else progress_recorder(self.store, round_id)
        for r in range(2):
            self.clock.now += 3.0
            report = RoundProgress(r, 2, sum(participants), sum(participants), 0.9 - 0.1 * r, 3.0)
            self.seen_progress.append(report)
            if progress is not None:
                progress(report)
        artifact = f"/artifacts/round-{round_id}/model.pt"
        if self.artifact_root is not None:
            path = self.artifact_root / f"round-{round_id}" / "model.pt"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"model")
            artifact = str(path)
        return TrainResult(
            epsilon=0.8,
            losses=[0.9, 0.8],
            round_seconds=[3.0, 3.0],
            artifact_path=artifact,
            artifact_sha256="ab" * 32,
            completed=self._completed(list(participants), coalition),
            seconds=6.0,
            participants=self._rows(coalition),
        )

    def _rows(self, coalition: Coalition | None) -> list[dict[str, object]]:
        if self.statuses is None or coalition is None:
            return []
        return [
            {
                "client_id": c,
                "type_index": i,
                "client_index": j,
                "status": self.statuses.get(c, "verified"),
            }
            for i, ids in enumerate(coalition.clients)
            for j, c in enumerate(ids)
        ]

    def _completed(self, participants: list[int], coalition: Coalition | None) -> list[int]:
        if self.statuses is None or coalition is None:
            return self.completed(participants)
        return [
            sum(self.statuses.get(c, "verified") == "verified" for c in ids)
            for ids in coalition.clients
        ]


@dataclasses.dataclass
class Rig:
    """A machine on fakes, with the queue its steps fill."""

    clock: Clock
    services: FakeServices
    store: MemoryStore
    trainer: FakeTrainer
    settings: Settings
    queue: list[tuple[int, RoundState, float]]
    machine: RoundMachine
    missing_artifacts: set[str] = dataclasses.field(default_factory=set)

    def start(
        self, subsidy_budget_micros: int | None = None, collect_seconds: float | None = None
    ) -> int:
        """Create a round and enqueue its first step, as ``POST /v1/rounds`` does."""
        round_id = self.store.create(subsidy_budget_micros, collect_seconds)
        self.queue.append((round_id, RoundState.OPEN, 0.0))
        return round_id

    def run(self, max_steps: int = 100) -> None:
        """Deliver the queued steps in order, moving the clock by each one's countdown."""
        for _ in range(max_steps):
            if not self.queue:
                return
            round_id, state, countdown = self.queue.pop(0)
            self.clock.now += countdown + 0.25
            self.machine.advance(round_id, state)
        raise AssertionError(f"the queue did not drain in {max_steps} steps: {self.queue}")


def rig(services_for: Callable[[Clock], FakeServices] = FakeServices, **settings: object) -> Rig:
    """A fresh machine on fakes; ``settings`` override the orchestration settings and
    ``services_for`` makes the scripted services (a subclass of :class:`FakeServices`)."""
    clock = Clock()
    services, store, trainer = services_for(clock), MemoryStore(clock), FakeTrainer(clock)
    trainer.store = store
    config = Settings(
        **{"collect_timeout_s": 10.0, "poll_interval_s": 0.5, **settings}  # type: ignore[arg-type]
    )
    queue: list[tuple[int, RoundState, float]] = []
    missing: set[str] = set()

    def schedule(request: AdvanceRequest, countdown: float) -> None:
        queue.append((request.round_id, request.state, countdown))

    answer = answers(services, trainer)
    ports = RoundPorts(
        call=lambda spec, payload, timeout_s=None: answer[spec.name](payload),
        notify=lambda spec, payload: answer[spec.name](payload),
        store=store,
        schedule=schedule,
        settings=config,
        clock=clock,
        artifact_exists=lambda path: path not in missing,
    )
    return Rig(clock, services, store, trainer, config, queue, RoundMachine(ports), missing)
