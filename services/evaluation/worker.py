"""The evaluation Celery worker: measure a round's model and refit Eq. 3, and hand out the current
fit for pricing the next round.

Run with ``celery -A services.evaluation.worker worker -Q evaluation --pool=solo``.
"""

from __future__ import annotations

import json
import math
import time

from sqlalchemy import select
from sqlalchemy.orm import Session

from mots.platform.contracts import (
    EVALUATION_ERROR_MODEL,
    EVALUATION_EVALUATE,
    EVALUATION_PUBLISHED,
)
from mots.platform.db import make_engine, make_sessionmaker
from mots.platform.metrics import ERROR_MODEL, EVALUATIONS, GENERALIZATION_ERROR
from mots.platform.schemas import (
    CurrentErrorModel,
    ErrorFit,
    EvaluationRequest,
    EvaluationResult,
    NoInput,
    PublishedRound,
    RoundRef,
)
from mots.platform.transactions import in_transaction
from mots.platform.worker import service_worker
from services.evaluation.core.config import get_settings
from services.evaluation.measure import test_loss
from services.evaluation.migrations import upgrade
from services.evaluation.models import Measurement
from services.evaluation.refit import refit

settings = get_settings()
app = service_worker("evaluation", settings, migrate=lambda: upgrade(settings.database_url))
sessions = make_sessionmaker(make_engine(settings.database_url))
EVALUATIONS.inc(0)  # exported at 0 before the first evaluation


def _fit_all() -> ErrorFit | None:
    with sessions() as session:
        rows = session.scalars(
            select(Measurement).where(Measurement.published).order_by(Measurement.id)
        ).all()
        points = [
            (json.loads(m.participants_json), json.loads(m.sizes_json), m.test_loss) for m in rows
        ]
    fit = refit(points, settings.min_fit_points)
    if fit is not None:
        for name in ("eps0", "d_gamma2", "sigma2"):
            ERROR_MODEL.labels(name).set(getattr(fit, name))
    return fit


@EVALUATION_EVALUATE.handler(app)
def evaluate(request: EvaluationRequest) -> EvaluationResult:
    """Measure a round's model on the held-out test set; the measurement counts in the error
    model's fit once the round publishes (:func:`published`). A non-finite loss is refused."""
    start = time.perf_counter()
    loss, accuracy = test_loss(
        request.artifact_path, request.artifact_sha256, settings.data_dir, settings.eval_test_subset
    )
    seconds = time.perf_counter() - start
    if not math.isfinite(loss):
        raise ValueError(f"round {request.round_id}: the model's test loss is {loss}, not finite")

    def store(session: Session) -> None:
        found = session.scalar(select(Measurement).where(Measurement.round_id == request.round_id))
        if found is None:
            session.add(
                Measurement(
                    round_id=request.round_id,
                    participants_json=json.dumps(request.participants),
                    sizes_json=json.dumps(request.sizes),
                    test_loss=loss,
                    accuracy=accuracy,
                    artifact_sha256=request.artifact_sha256,
                    seconds=seconds,
                    published=False,
                )
            )

    in_transaction(sessions, store)
    GENERALIZATION_ERROR.set(loss)
    EVALUATIONS.inc()
    return EvaluationResult(
        round_id=request.round_id,
        test_loss=loss,
        accuracy=accuracy,
        seconds=seconds,
        fit=_fit_all(),
    )


@EVALUATION_PUBLISHED.handler(app)
def published(ref: RoundRef) -> PublishedRound:
    """The round published its model: its measurement now counts in the fit (idempotent)."""

    def mark(session: Session) -> bool:
        found = session.scalar(select(Measurement).where(Measurement.round_id == ref.round_id))
        if found is None:
            return False
        found.published = True
        return True

    counted = in_transaction(sessions, mark)
    _fit_all()
    return PublishedRound(round_id=ref.round_id, counted=counted)


@EVALUATION_ERROR_MODEL.handler(app)
def error_model(_: NoInput) -> CurrentErrorModel:
    """The error model fitted to every measurement so far (``fit`` is None below enough points)."""
    return CurrentErrorModel(fit=_fit_all())
