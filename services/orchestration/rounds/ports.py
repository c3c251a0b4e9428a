"""The seams of the round machine: what it reads a round as, what a step decides, and the ports
it works through (the other services, the round store, the trainer, the scheduler, the clock).

A step calls another service (training included) by the contract's
:class:`~mots.platform.contracts.TaskSpec` through one :class:`Call`: production wires it to
Celery and the call log (:class:`.calls.CallPort`), the store to SQL (:mod:`.sql_store`) and the
schedule to the orchestration queue (:mod:`services.orchestration.worker`); the unit tests wire
in-memory fakes that answer each TaskSpec at once.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel

from mots.economics.scenario import Scenario
from mots.platform.api.base import RoundState
from mots.platform.api.pricing import PricingResult
from mots.platform.api.rounds import RoundSummary, TrainingProgress
from mots.platform.api.tasks import DEFAULT_TASK
from mots.platform.contracts import AdvanceRequest, EvaluationResult, RoundDecisions, TaskSpec
from services.orchestration.core.config import Settings
from services.orchestration.products import Deadlines, RoundTerms, TrainingRecord

In = TypeVar("In", bound=BaseModel)
Out = TypeVar("Out", bound=BaseModel)


@dataclass(frozen=True, kw_only=True)
class RoundUpdate:
    """The products a move sets on the round alongside its new state (None: left as it is);
    :class:`RoundRecord` extends it, so a product has one name and one type in both."""

    mechanism: str | None = None
    scenario: Scenario | None = None
    quote: PricingResult | None = None
    decisions: RoundDecisions | None = None
    terms: RoundTerms | None = None
    training: TrainingRecord | None = None
    evaluation: EvaluationResult | None = None
    summary: RoundSummary | None = None
    rule: str | None = None
    collect_deadline: float | None = None
    deadlines: Deadlines | None = None

    def values(self) -> dict[str, Any]:
        """The products this move sets (those not None), by name: the store's column values."""
        named = ((f.name, getattr(self, f.name)) for f in fields(RoundUpdate))
        return {name: value for name, value in named if value is not None}


@dataclass(frozen=True, kw_only=True)
class RoundRecord(RoundUpdate):
    """A round as the machine reads it (a row of the ``rounds`` table, read as it is): its state,
    its clock, and the products of the states it has passed (the :class:`RoundUpdate` fields,
    None until that state has run); timestamps are timezone-aware (UTC)."""

    id: int
    state: RoundState
    created_at: datetime
    state_entered_at: datetime
    training_progress: TrainingProgress | None = None
    subsidy_budget_micros: int | None = None
    """The round's own subsidy budget in micro-units (None: the settings' budget)."""
    collect_seconds: float | None = None
    """The round's own collection window in seconds (None: MOTS_COLLECT_TIMEOUT_S)."""
    artifact_expired_at: datetime | None = None
    """When retention removed the round's model artifact (None: it is kept)."""
    task: str = DEFAULT_TASK
    """The task the round trains (issue 36)."""
    task_version: int | None = None
    """The task's version pinned when the round opened: every step reads exactly that version
    (None: a round opened before versions were pinned, which reads the latest)."""

    def deadline(self) -> float | None:
        """The deadline of the state the round is in (epoch seconds), if one was recorded."""
        return (self.deadlines or {}).get(self.state.value)


@dataclass(frozen=True)
class Move:
    """A step's decision: move the round to ``to``, recording ``note`` and setting ``update``."""

    to: RoundState
    note: str = ""
    update: RoundUpdate = field(default_factory=RoundUpdate)


@dataclass(frozen=True)
class Wait:
    """A step's decision: nothing to do yet; run the same step again after ``seconds``."""

    seconds: float


class RoundFailure(RuntimeError):
    """A step that cannot complete; the round goes to ``failed`` with this message as its rule."""


class ServiceUnavailable(RuntimeError):
    """A call to another service got no answer (its task or its reply was lost, or the broker
    is away): the step may run again, unlike one the service refused."""


class Pending(BaseException):
    """A step sent a service call (or finds one in flight) and returns at once; the call's reply
    runs the step again from the top, its answered calls read back from the :class:`CallLog`.
    Not an ``Exception``, so a step's ``except Exception`` never takes it for a failure."""


@dataclass
class StepContext:
    """The step running now: its round and state, and how many calls it has made so far (a
    call's order within its step is its key in the :class:`CallLog`)."""

    round_id: int
    state: RoundState
    calls: int = 0

    def next_call(self) -> int:
        """The order of the step's next call (0, 1, ...)."""
        self.calls += 1
        return self.calls - 1


CURRENT_STEP: ContextVar[StepContext | None] = ContextVar("CURRENT_STEP", default=None)
"""Set by the machine while a step runs; :class:`.calls.CallPort` keys its calls by it."""


@dataclass(frozen=True)
class CallEntry:
    """One call a step sent: its task, when, how long it may take, and its answer (``reply``, the
    task's JSON result, or ``error``) once it came back."""

    call_id: str
    task: str
    sent_at: float
    timeout_s: float
    reply: dict[str, object] | None = None
    error: str | None = None

    @property
    def answered(self) -> bool:
        """The call's result or failure has come back."""
        return self.reply is not None or self.error is not None


class CallLog(Protocol):
    """The calls each round's current step sent, by (round, state, order), and their replies:
    what lets a step send, return, and be replayed from the top when a reply arrives."""

    def entry(self, round_id: int, state: RoundState, seq: int) -> CallEntry | None:
        """The step's call of that order, if it was sent."""

    def claim(self, round_id: int, state: RoundState, seq: int, entry: CallEntry) -> bool:
        """Record a call about to be sent; False if that order was claimed already."""

    def answer(
        self, call_id: str, reply: dict[str, object] | None = None, error: str | None = None
    ) -> tuple[int, RoundState] | None:
        """Store a call's answer (the first one); the step to run again, or None if the call is
        no longer in the log (its step has finished or run again)."""

    def first_sent(self, round_id: int, state: RoundState) -> float | None:
        """When the step's first call was sent (the time a replayed step reads)."""

    def clear(self, round_id: int, state: RoundState) -> None:
        """Forget the step's calls (it has decided: its next run starts afresh)."""

    def overdue(self, now: float) -> list[tuple[int, RoundState, str]]:
        """Unanswered calls past their timeout: (round, state, call id)."""

    def pending(self, call_id: str) -> bool:
        """The call is in the log and unanswered (its step still waits for it)."""


class RoundInFlight(RuntimeError):
    """A new round was asked for while another one of its task is not finished (one round per
    task at a time; rounds of different tasks run side by side)."""


class RoundStore(Protocol):
    """Where rounds persist; every move is a compare-and-set on the round's state."""

    def create(
        self,
        subsidy_budget_micros: int | None = None,
        collect_seconds: float | None = None,
        task: str = DEFAULT_TASK,
        task_version: int | None = None,
    ) -> int:
        """A new round of ``task`` in ``open``, pinned to its ``task_version`` (with its own
        subsidy budget and collection window, if given); raises :class:`RoundInFlight` while another of that task is
        unfinished."""

    def load(self, round_id: int) -> RoundRecord | None:
        """The round, or None if there is none with that id."""

    def latest(self, limit: int) -> list[RoundRecord]:
        """The newest ``limit`` rounds, newest first."""

    def move(
        self, round_id: int, src: RoundState, dst: RoundState, note: str, update: RoundUpdate
    ) -> float | None:
        """Move the round from ``src`` to ``dst`` with ``update`` and record the transition; the
        seconds it spent in ``src``, or None (nothing written) if it is no longer in ``src``."""

    def record_progress(self, round_id: int, progress: TrainingProgress) -> None:
        """Note the latest FedAvg round on a round that is training."""

    def phase_seconds(self, round_id: int) -> dict[str, float]:
        """Seconds spent in each state the round has left, in the order it left them."""

    def unfinished(self) -> list[tuple[int, RoundState]]:
        """Every round not in a terminal state, with its state."""

    def mark_expired(self, round_id: int) -> None:
        """Note that retention removed the round's model artifact."""


class Call(Protocol):
    """Calls a task of :mod:`mots.platform.contracts` by its spec and returns its answer (the
    spec's output model); ``timeout_s``: how long its answer may take (None: the settings'
    ``task_timeout_s``)."""

    def __call__(
        self, spec: TaskSpec[In, Out], payload: In, timeout_s: float | None = None
    ) -> Out: ...


Notify = Callable[[TaskSpec[Any, Any], Any], None]
"""Sends an event (spec, payload) that nobody answers: :func:`mots.platform.contracts.send` on
the worker's app."""


Schedule = Callable[[AdvanceRequest, float], None]
"""Run the step of a state for a round after some seconds: the
:data:`~mots.platform.contracts.ORCHESTRATION_ADVANCE` task on the orchestration queue."""


@dataclass(frozen=True)
class RoundPorts:
    """Everything a step works through."""

    call: Call
    notify: Notify
    store: RoundStore
    schedule: Schedule
    settings: Settings
    clock: Callable[[], float] = time.time
    artifact_exists: Callable[[str], bool] = os.path.exists
    calls: CallLog | None = None
    """Where sent calls and their replies wait (None: the calls are answered synchronously, as
    the in-memory fakes do)."""
