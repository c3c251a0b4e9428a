"""The training worker: trains a round's coalition with Flower, on its own queue.

Run with ``celery -A services.orchestration.training_worker worker -Q training --pool=solo``.
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

from mots.platform.contracts import (
    MARKET_NODE_KEYS,
    TRAINING_TRAIN,
    NodeKeys,
    NodeKeysRequest,
    TrainRequest,
    TrainResult,
)
from mots.platform.db import make_engine, make_sessionmaker
from mots.platform.worker import service_worker
from mots.training.progress import RoundProgress
from services.orchestration.core.config import get_settings
from services.orchestration.products import TrainingProgress
from services.orchestration.removals import MarketRemovals
from services.orchestration.rounds import prometheus
from services.orchestration.rounds.call_log import SqlCallLog
from services.orchestration.rounds.sql_store import SqlRoundStore
from services.orchestration.trainer import Coalition, Trainer

log = logging.getLogger(__name__)
settings = get_settings()
trainer = Trainer(settings)
app = service_worker("training", settings, on_shutdown=trainer.stop)
sessions = make_sessionmaker(make_engine(settings.database_url))
store, calls = SqlRoundStore(sessions), SqlCallLog(sessions)


class StaleTraining(RuntimeError):
    """The round no longer waits for this training (its call was given up or answered)."""


def market_keys(client_ids: list[int]) -> dict[int, str]:
    """The market's current SuperNode keys of ``client_ids`` (revoked or departed ones absent)."""
    body = MARKET_NODE_KEYS.body(NodeKeysRequest(client_ids=client_ids))
    res = app.send_task(MARKET_NODE_KEYS.name, args=[body], queue=MARKET_NODE_KEYS.queue)
    return NodeKeys.model_validate(res.get(timeout=10, disable_sync_subtasks=False)).keys


@TRAINING_TRAIN.handler(app)
def train(request: TrainRequest) -> TrainResult:
    """Train the coalition; each FedAvg round's progress is recorded on the round (best effort)."""
    call_id = current_task.request.id
    if call_id is not None and not calls.pending(call_id):
        raise StaleTraining(f"round {request.round_id}: call {call_id} is no longer awaited")

    def progress(p: RoundProgress) -> None:  # a failed write must not stop training
        try:
            prometheus.training_progress(TrainingProgress.of(p))
            store.record_progress(request.round_id, TrainingProgress.of(p))
        except Exception:
            log.warning("round %s: training progress not recorded", request.round_id, exc_info=True)

    coalition = Coalition(
        clients=request.clients,
        enrolled=request.enrolled,
        node_keys=request.node_keys,
        quoted_epsilon=request.quoted_epsilon,
        type_names=request.type_names,
    )
    joined = {c for ids in request.clients for c in ids}
    removed = MarketRemovals(
        {c: k for c, k in request.node_keys.items() if c in joined}, market_keys
    )
    outcome = trainer.train(
        request.participants,
        request.sizes,
        request.node_types,
        request.round_id,
        progress=progress,
        coalition=coalition,
        removed=removed,
    )
    return TrainResult.model_validate(outcome.as_dict())
