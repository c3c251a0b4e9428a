"""The orchestration Celery worker: drives rounds through their states, one step per task.

Run with ``celery -A services.orchestration.worker worker -Q orchestration --pool=solo``.
On start it migrates its database, re-enqueues every unfinished round (restart safety) and
starts the reconciler, which re-drives every round past its state's deadline or with a call
past its timeout (liveness). No task here waits for another: a step sends its call and returns,
and the call's reply (:data:`~mots.platform.contracts.ORCHESTRATION_REPLY`) runs it again.
Training runs on the training worker (:mod:`services.orchestration.training_worker`).
"""

from __future__ import annotations

import functools
from typing import Any

from mots.platform.api.base import RoundState
from mots.platform.contracts import (
    ORCHESTRATION_ADVANCE,
    ORCHESTRATION_DECISIONS_COMPLETE,
    AdvanceRequest,
    AdvanceResult,
    RoundRef,
    reply_handlers,
    send,
    send_call,
)
from mots.platform.db import make_engine, make_sessionmaker
from mots.platform.worker import service_worker
from services.orchestration.core.config import get_settings
from services.orchestration.migrations import upgrade
from services.orchestration.rounds import prometheus
from services.orchestration.rounds.calls import CallPort
from services.orchestration.rounds.machine import RoundMachine
from services.orchestration.rounds.ports import RoundPorts
from services.orchestration.rounds.reconciler import Reconciler
from services.orchestration.rounds.sql_store import SqlCallLog, SqlRoundStore

settings = get_settings()


def recover() -> list[int]:
    """Re-enqueue the current step of every unfinished round (the worker has just started) and
    start the reconciler."""
    pending = machine.recover()
    reconciler.start()
    return pending


prometheus.declare()
app = service_worker(
    "orchestration",
    settings,
    migrate=lambda: upgrade(settings.database_url),
    on_ready=recover,
    on_shutdown=lambda: stop(),
)


def stop() -> None:
    """Stop the reconciler's thread."""
    reconciler.stop()


sessions = make_sessionmaker(make_engine(settings.database_url))
calls = SqlCallLog(sessions)
port = CallPort(functools.partial(send_call, app), calls, settings.task_timeout_s)
machine = RoundMachine(
    RoundPorts(
        call=port.call,
        notify=functools.partial(send, app),
        store=SqlRoundStore(sessions),
        schedule=functools.partial(send, app, ORCHESTRATION_ADVANCE),
        settings=settings,
        calls=calls,
    )
)
reconciler = Reconciler(machine.ports)


def _advance(round_id: int, state: RoundState) -> AdvanceResult:
    """Run one step of a round; a round that ended wakes the schedule."""
    result = machine.advance(round_id, state)
    if result.next is None and not result.retry and not result.waiting:
        reconciler.wake()
    return result


@ORCHESTRATION_ADVANCE.handler(app)
def advance(request: AdvanceRequest) -> AdvanceResult:
    """Run one step of a round and enqueue the next."""
    return _advance(request.round_id, request.state)


@ORCHESTRATION_DECISIONS_COMPLETE.handler(app)
def decisions_complete(ref: RoundRef) -> AdvanceResult:
    """Event from the market: every client has declared; stop waiting for the poll."""
    return machine.advance(ref.round_id, RoundState.COLLECTING)


def _answered(call_id: str, reply: dict[str, Any] | None, error: str | None) -> None:
    """A call's answer came back: its step runs again (a forgotten call's answer is dropped)."""
    result = machine.answered(call_id, reply, error)
    if result is not None and result.next is None and not result.retry and not result.waiting:
        reconciler.wake()


reply_handlers(
    app,
    on_value=lambda call_id, value: _answered(call_id, value, None),
    on_error=lambda call_id, error: _answered(call_id, None, error),
)
