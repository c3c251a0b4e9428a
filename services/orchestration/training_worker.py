"""The training worker: trains a round's coalition with Flower, on its own queue.

Run with ``celery -A services.orchestration.training_worker worker -Q training --pool=threads
--concurrency=3``: three trainings at once (issue 36: a round of each shipped task; the
:class:`~services.orchestration.trainer.Trainer` trains each task on its own local federation,
one round per task at a time), each a Flower run whose work is in its own processes.
Every task trains on Flower (the deployment engine); with ``MOTS_TRAINER=inprocess`` the default
task trains in process and another task in process too
(:func:`services.orchestration.task_trainer.train_task_round`, the fallback).
The round's train step sends :data:`~mots.platform.contracts.TRAINING_TRAIN` and returns; this
worker trains (minutes), records each FedAvg round's progress on the round, and its result goes
back to the orchestration worker as the call's reply. A long training therefore never holds the
worker that answers the round's next step, and a killed training worker is a lost call: the
round's reconciler sees it past its timeout (the training state's budget) and the round is
settled by rule. A training whose call the round has given up (a redelivered task) is skipped.
"""

from __future__ import annotations

import logging

from celery import current_task
from celery.result import AsyncResult

from mots.platform.api.tasks import DEFAULT_TASK
from mots.platform.contracts import (
    MARKET_NODE_KEYS,
    TRAINING_TRAIN,
    NodeKeys,
    NodeKeysRequest,
    TrainRequest,
    TrainResult,
    ask,
)
from mots.platform.db import make_engine, make_sessionmaker
from mots.platform.worker import service_worker
from services.orchestration.core.config import get_settings
from services.orchestration.rounds import prometheus
from services.orchestration.rounds.sql_store import SqlCallLog, SqlRoundStore
from services.orchestration.task_trainer import train_task_round
from services.orchestration.trainer import MarketRemovals, Trainer

log = logging.getLogger(__name__)
settings = get_settings()
trainer = Trainer(settings)
app = service_worker("training", settings, on_shutdown=trainer.stop)
sessions = make_sessionmaker(make_engine(settings.database_url))
store, calls = SqlRoundStore(sessions), SqlCallLog(sessions)


class StaleTraining(RuntimeError):
    """The round no longer waits for this training (its call was given up or answered)."""


class MarketKeysAsk:
    """The market's current SuperNode keys of a round's participants, asked without waiting: each
    call returns the answer of the ask sent before it if that has come (None otherwise) and sends
    the next ask. No task waits on another's result (issue 25, item 2), so a removal is seen
    from the FedAvg round after the market's answer arrives."""

    def __init__(self) -> None:
        self._out: AsyncResult | None = None

    def __call__(self, client_ids: list[int]) -> dict[int, str] | None:
        answer = None
        if self._out is not None and self._out.ready():
            done, self._out = self._out, None
            if not done.successful():
                raise RuntimeError(f"market.node_keys failed: {done.result!r}")
            answer = NodeKeys.model_validate(done.result).keys
        if self._out is None:
            self._out = ask(app, MARKET_NODE_KEYS, NodeKeysRequest(client_ids=client_ids))
        return answer


@TRAINING_TRAIN.handler(app)
def train(request: TrainRequest) -> TrainResult:
    """Train the coalition; each FedAvg round's progress is recorded on the round (best effort)."""
    call_id = current_task.request.id
    if call_id is not None and not calls.pending(call_id):
        raise StaleTraining(f"round {request.round_id}: call {call_id} is no longer awaited")

    if request.task != DEFAULT_TASK and settings.trainer != "deployment":
        return train_task_round(settings, request)  # the in-process fallback (MOTS_TRAINER)
    joined = {c for ids in request.clients for c in ids}
    removed = MarketRemovals(
        {c: k for c, k in request.node_keys.items() if c in joined}, MarketKeysAsk()
    )
    return trainer.train(
        request.participants,
        request.sizes,
        request.node_types,
        request.round_id,
        progress=prometheus.progress_recorder(store, request.round_id),
        coalition=request,  # a TrainRequest is the Coalition it names
        removed=removed,
        task=request.task,  # every task on Flower: its own model, on its devices' folders
        task_version=request.task_version,  # exactly the version the round was opened on
    )
