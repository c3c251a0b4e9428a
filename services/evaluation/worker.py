"""The evaluation Celery worker: measure a round's model and refit Eq. 3, and hand out the current
fit for pricing the next round.

Run with ``celery -A services.evaluation.worker worker -Q evaluation --pool=solo``.
"""

from __future__ import annotations

import json
import time

from sqlalchemy import select
from sqlalchemy.orm import Session

from mots.platform.contracts import EVALUATION_ERROR_MODEL, EVALUATION_EVALUATE
from mots.platform.db import make_engine, make_sessionmaker
from mots.platform.metrics import ERROR_MODEL, EVALUATIONS, GENERALIZATION_ERROR
from mots.platform.schemas import (
    CurrentErrorModel,
    ErrorFit,
    EvaluationRequest,
    EvaluationResult,
    NoInput,
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


def _fit_all() -> ErrorFit | None:
    with sessions() as session:
        rows = session.scalars(select(Measurement).order_by(Measurement.id)).all()
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
    """Measure a round's model on the held-out test set and refit the error model."""
    start = time.perf_counter()
    loss, accuracy = test_loss(
        request.artifact_path, request.artifact_sha256, settings.data_dir, settings.eval_test_subset
    )
    seconds = time.perf_counter() - start

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


@EVALUATION_ERROR_MODEL.handler(app)
def error_model(_: NoInput) -> CurrentErrorModel:
    """The error model fitted to every measurement so far (``fit`` is None below enough points)."""
    return CurrentErrorModel(fit=_fit_all())
