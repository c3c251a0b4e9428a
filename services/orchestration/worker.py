"""The orchestration Celery worker: drives rounds through their states, one step per task.

Run with ``celery -A services.orchestration.worker worker -Q orchestration --pool=solo``.
On start it migrates its database, re-enqueues every unfinished round (restart safety) and
starts the reconciler, which re-drives every round past its state's deadline (liveness).
"""

from __future__ import annotations

from mots.platform.contracts import ORCHESTRATION_ADVANCE, ORCHESTRATION_DECISIONS_COMPLETE, send
from mots.platform.db import make_engine, make_sessionmaker
from mots.platform.schemas import AdvanceRequest, AdvanceResult, RoundRef, RoundState
from mots.platform.worker import service_worker
from services.orchestration.core.config import get_settings
from services.orchestration.migrations import upgrade
from services.orchestration.rounds import prometheus
from services.orchestration.rounds.celery_services import CeleryRoundServices
from services.orchestration.rounds.machine import RoundMachine
from services.orchestration.rounds.ports import RoundPorts
from services.orchestration.rounds.reconciler import Reconciler
from services.orchestration.rounds.sql_store import SqlRoundStore
from services.orchestration.trainer import Trainer

settings = get_settings()
trainer = Trainer(settings)


def recover() -> list[int]:
    """Re-enqueue the current step of every unfinished round (the worker has just started) and
    start the reconciler."""
    pending = machine.recover()
    reconciler.start()
    return pending


def shutdown() -> None:
    """Stop the reconciler and the trainer."""
    reconciler.stop()
    trainer.stop()


prometheus.declare()
app = service_worker(
    "orchestration",
    settings,
    migrate=lambda: upgrade(settings.database_url),
    on_ready=recover,
    on_shutdown=shutdown,
)


def schedule(round_id: int, state: RoundState, countdown: float = 0.0) -> None:
    """Enqueue the step of ``state`` for a round on this service's queue."""
    send(app, ORCHESTRATION_ADVANCE, AdvanceRequest(round_id=round_id, state=state), countdown)


machine = RoundMachine(
    RoundPorts(
        services=CeleryRoundServices(app, settings.task_timeout_s, settings.evaluate_timeout_s),
        store=SqlRoundStore(make_sessionmaker(make_engine(settings.database_url))),
        trainer=trainer,
        schedule=schedule,
        settings=settings,
    )
)
reconciler = Reconciler(machine.ports)


@ORCHESTRATION_ADVANCE.handler(app)
def advance(request: AdvanceRequest) -> AdvanceResult:
    """Run one step of a round and enqueue the next; a round that ended wakes the schedule."""
    result = machine.advance(request.round_id, request.state)
    if result.next is None and not result.retry:
        reconciler.wake()
    return result


@ORCHESTRATION_DECISIONS_COMPLETE.handler(app)
def decisions_complete(ref: RoundRef) -> AdvanceResult:
    """Event from the market: every client has declared; stop waiting for the poll."""
    return machine.advance(ref.round_id, RoundState.COLLECTING)
