"""The orchestration Celery worker: drives rounds through their states, one step per task.

Run with ``celery -A services.orchestration.worker worker -Q orchestration --pool=solo``.
On start it migrates its database and re-enqueues every unfinished round (restart safety).
"""

from __future__ import annotations

import logging
from typing import Any

from celery import signals

from mots.platform.celery_app import make_celery, send, task
from mots.platform.db import make_engine, make_sessionmaker
from mots.platform.metrics import TASKS, serve_worker_metrics
from mots.platform.schemas import TERMINAL_STATES, RoundState
from services.orchestration.core.config import get_settings
from services.orchestration.machine import RoundMachine
from services.orchestration.migrations import upgrade
from services.orchestration.models import Round
from services.orchestration.trainer import Trainer

log = logging.getLogger(__name__)
settings = get_settings()
app = make_celery("orchestration", settings.redis_url, settings.redis_key_prefix)
sessions = make_sessionmaker(make_engine(settings.database_url))
trainer = Trainer(settings)
machine = RoundMachine(settings, sessions, app, trainer)
RETRY_SETTLEMENT_S = 5.0


def _enqueue(round_id: int, state: RoundState, countdown: float = 0.0) -> None:
    send(app, "orchestration.advance", {"round_id": round_id, "state": state.value}, countdown)


def recover() -> list[int]:
    """Re-enqueue the current step of every round not in a terminal state."""
    with sessions() as session:
        pending = [
            (r.id, RoundState(r.state))
            for r in session.query(Round).filter(
                Round.state.notin_([s.value for s in TERMINAL_STATES])
            )
        ]
    for round_id, state in pending:
        log.info("recovering round %s in %s", round_id, state.value)
        _enqueue(round_id, state)
    return [r for r, _ in pending]


def _on_ready(**_: Any) -> None:
    upgrade(settings.database_url)
    serve_worker_metrics(settings.metrics_port, settings.metrics_host)
    recover()


signals.worker_ready.connect(_on_ready, weak=False)


def _on_shutdown(**_: Any) -> None:
    trainer.stop()


signals.worker_shutdown.connect(_on_shutdown, weak=False)


@task(app, "orchestration.start_round")
def start_round(_: dict[str, Any] | None = None) -> dict[str, Any]:
    """Create a round and start its machine."""
    round_id = machine.create()
    _enqueue(round_id, RoundState.OPEN)
    TASKS.labels("orchestration", "start_round", "ok").inc()
    return {"round_id": round_id}


@task(app, "orchestration.advance")
def advance(payload: dict[str, Any]) -> dict[str, Any]:
    """Run one step of a round and enqueue the next."""
    round_id, state = int(payload["round_id"]), RoundState(payload["state"])
    try:
        step = machine.step(round_id, state)
    except Exception:
        TASKS.labels("orchestration", "advance", "error").inc()
        if state == RoundState.FAILED:  # settle-by-rule must happen: retry until the market answers
            _enqueue(round_id, state, RETRY_SETTLEMENT_S)
            return {"round_id": round_id, "retry": True}
        raise
    TASKS.labels("orchestration", "advance", "ok").inc()
    if step.state is not None:
        _enqueue(round_id, step.state, step.countdown)
    return {"round_id": round_id, "next": step.state.value if step.state else None}


@task(app, "orchestration.decisions_complete")
def decisions_complete(payload: dict[str, Any]) -> dict[str, Any]:
    """Event from the market: every client has declared; stop waiting for the poll."""
    return advance({"round_id": payload["round_id"], "state": RoundState.COLLECTING.value})
