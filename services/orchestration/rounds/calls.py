"""A round step's calls over Celery: a step calls a task of :mod:`mots.platform.contracts` by its
:class:`~mots.platform.contracts.TaskSpec` (``ports.call(MARKET_CLOSE_ROUND, RoundRef(...))``),
sent on its service's queue without waiting for it.

A step's call is keyed by its order within the step (:class:`~.ports.StepContext`). The first
time a step reaches a call, the call is claimed in the :class:`~.ports.CallLog`, sent, and the
step stops (:class:`~.ports.Pending`); the call's reply task stores the answer and runs the step
again, which now reads the answer from the log and goes on to its next call. A call past its
timeout with no answer (its task or its reply lost, or the broker away) raises
:class:`~.ports.ServiceUnavailable`, so the step runs again; an error the service answered with
is raised as :class:`ServiceError`. Training is one such call, on the training worker's queue."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import TypeVar

import redis.exceptions
from kombu.exceptions import OperationalError
from pydantic import BaseModel

from mots.platform.contracts import TaskSpec
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

DATABASE_AWAY = ("OperationalError:", "InterfaceError:", "DisconnectionError:")
"""A called service's answer that its database was out of reach (its own retries spent: a
connection dropped again and again, the server restarting; SQLAlchemy's error names, as
``reply_error`` writes them): the call is lost, not refused, so the step runs again (within its
deadline) instead of failing the round. Every round call is safe to repeat (issue 37)."""

In = TypeVar("In", bound=BaseModel)
Out = TypeVar("Out", bound=BaseModel)

Sender = Callable[[TaskSpec[In, Out], In, str], None]
"""Sends a call (spec, payload, call id) and returns: :func:`mots.platform.contracts.send_call`
on the worker's app."""


class ServiceError(RuntimeError):
    """Another service answered a call with an error (``task: Type: message``)."""


class CallPort:
    """Sends a step's calls and reads their answers from the call log: its :meth:`call` is the
    production :class:`~.ports.Call`."""

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
        if entry.error is not None and entry.error.startswith(DATABASE_AWAY):
            raise ServiceUnavailable(f"{spec.name}: {entry.error}")
        if entry.error is not None:
            raise ServiceError(f"{spec.name}: {entry.error}")
        if self.clock() > entry.sent_at + entry.timeout_s:
            raise ServiceUnavailable(f"{spec.name}: no answer in {entry.timeout_s:.0f}s")
        raise Pending(spec.name)
