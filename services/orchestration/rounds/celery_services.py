"""The round machine's services port over Celery: each method is one task of
:mod:`mots.platform.contracts`, sent on its service's queue without waiting for it.

A step's call is keyed by its order within the step (:class:`~.ports.StepContext`). The first
time a step reaches a call, the call is claimed in the :class:`~.ports.CallLog`, sent, and the
step stops (:class:`~.ports.Pending`); the call's reply task stores the answer and runs the step
again, which now reads the answer from the log and goes on to its next call. A call past its
timeout with no answer (its task or its reply lost, or the broker away) raises
:class:`~.ports.ServiceUnavailable`, so the step runs again; an error the service answered with
is raised as :class:`ServiceError`. Training is one such call, on the training worker's queue
(:class:`CeleryRoundTrainer`)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import TypeVar

import redis.exceptions
from kombu.exceptions import OperationalError
from pydantic import BaseModel

from mots.platform.api.rounds import SettleResult
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
    CurrentErrorModel,
    DeclarationProgress,
    EvaluationRequest,
    EvaluationResult,
    NoInput,
    OpenRoundPayload,
    Population,
    RoundDecisions,
    RoundRef,
    SettlePayload,
    TaskSpec,
    TrainRequest,
    TrainResult,
)
from services.orchestration.rounds.ports import (
    CURRENT_STEP,
    CallEntry,
    CallLog,
    Pending,
    ServiceUnavailable,
)

LOST = (
    OperationalError,
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    ConnectionError,
    TimeoutError,
)
"""What a send raises when the broker is away."""

In = TypeVar("In", bound=BaseModel)
Out = TypeVar("Out", bound=BaseModel)

Sender = Callable[[TaskSpec[In, Out], In, str], None]
"""Sends a call (spec, payload, call id) and returns: :func:`mots.platform.contracts.send_call`
on the worker's app."""


Notifier = Callable[[TaskSpec[In, Out], In], None]
"""Sends an event (spec, payload) that nobody answers: :func:`mots.platform.contracts.send` on
the worker's app."""


class ServiceError(RuntimeError):
    """Another service answered a call with an error (``task: Type: message``)."""


class CallPort:
    """Sends a step's calls and reads their answers from the call log."""

    def __init__(self, send: Sender[BaseModel, BaseModel], log: CallLog, timeout_s: float) -> None:
        self.send = send
        self.log = log
        self.timeout_s = timeout_s
        self.clock: Callable[[], float] = time.time

    def call(self, spec: TaskSpec[In, Out], payload: In, timeout_s: float | None = None) -> Out:
        """The call's answer if it came back; else send it (the first time) and stop the step."""
        step = CURRENT_STEP.get()
        if step is None:
            raise RuntimeError(f"{spec.name}: a round's call outside a round's step")
        seq = step.next_call()
        entry = self.log.entry(step.round_id, step.state, seq)
        if entry is None:
            call_id = uuid.uuid4().hex
            claimed = CallEntry(call_id, spec.name, self.clock(), timeout_s or self.timeout_s)
            if self.log.claim(step.round_id, step.state, seq, claimed):
                try:
                    self.send(spec, payload, call_id)  # type: ignore[arg-type]
                except LOST as exc:
                    raise ServiceUnavailable(f"{spec.name}: not sent ({exc})") from exc
            raise Pending(spec.name)
        if entry.task != spec.name:
            raise RuntimeError(f"call {seq} of the step was {entry.task}, now {spec.name}")
        if entry.reply is not None:
            return spec.output.model_validate(entry.reply)
        if entry.error is not None:
            raise ServiceError(f"{spec.name}: {entry.error}")
        if self.clock() > entry.sent_at + entry.timeout_s:
            raise ServiceUnavailable(f"{spec.name}: no answer in {entry.timeout_s:.0f}s")
        raise Pending(spec.name)


class CeleryRoundServices:
    """The market, pricing and evaluation services through their Celery queues."""

    def __init__(
        self, port: CallPort, notify: Notifier[BaseModel, BaseModel], evaluate_timeout_s: float
    ) -> None:
        self._call = port.call
        self._notify = notify
        self.evaluate_timeout_s = evaluate_timeout_s

    def error_model(self) -> CurrentErrorModel:
        """The :data:`~mots.platform.contracts.EVALUATION_ERROR_MODEL` task."""
        return self._call(EVALUATION_ERROR_MODEL, NoInput())

    def population(self, round_id: int) -> Population:
        """The :data:`~mots.platform.contracts.MARKET_POPULATION` task."""
        return self._call(MARKET_POPULATION, RoundRef(round_id=round_id))

    def open(self, quote: OpenRoundPayload) -> None:
        """The :data:`~mots.platform.contracts.MARKET_OPEN_ROUND` task."""
        self._call(MARKET_OPEN_ROUND, quote)

    def progress(self, round_id: int) -> DeclarationProgress:
        """The :data:`~mots.platform.contracts.MARKET_DECLARATION_PROGRESS` task."""
        return self._call(MARKET_DECLARATION_PROGRESS, RoundRef(round_id=round_id))

    def close(self, round_id: int) -> RoundDecisions:
        """The :data:`~mots.platform.contracts.MARKET_CLOSE_ROUND` task."""
        return self._call(MARKET_CLOSE_ROUND, RoundRef(round_id=round_id))

    def evaluate(self, request: EvaluationRequest) -> EvaluationResult:
        """The :data:`~mots.platform.contracts.EVALUATION_EVALUATE` task."""
        return self._call(EVALUATION_EVALUATE, request, self.evaluate_timeout_s)

    def settle(self, payload: SettlePayload) -> SettleResult:
        """The :data:`~mots.platform.contracts.MARKET_SETTLE_ROUND` task."""
        return self._call(MARKET_SETTLE_ROUND, payload)

    def measurement_published(self, round_id: int) -> None:
        """The :data:`~mots.platform.contracts.EVALUATION_PUBLISHED` task, as an event."""
        self._notify(EVALUATION_PUBLISHED, RoundRef(round_id=round_id))  # type: ignore[arg-type]


class CeleryRoundTrainer:
    """Training as a call on the training worker's queue (``training.train``): the training
    worker records the progress of each FedAvg round itself."""

    def __init__(self, port: CallPort, timeout_s: float) -> None:
        self._call = port.call
        self.timeout_s = timeout_s

    def train(self, request: TrainRequest) -> TrainResult:
        """The :data:`~mots.platform.contracts.TRAINING_TRAIN` task (its timeout: the training
        state's budget, so a lost training is seen by its deadline)."""
        return self._call(TRAINING_TRAIN, request, self.timeout_s)
