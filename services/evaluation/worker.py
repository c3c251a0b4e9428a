"""The evaluation Celery worker: ``evaluation.evaluate`` (measure a round's model, refit Eq. 3)
and ``evaluation.error_model`` (the current fit, for pricing the next round).

Run with ``celery -A services.evaluation.worker worker -Q evaluation --pool=solo``.
"""

from __future__ import annotations

import json
import time
from typing import Any

from celery import signals
from sqlalchemy import select

from mots.platform.celery_app import make_celery, task
from mots.platform.db import make_engine, make_sessionmaker
from mots.platform.metrics import (
    ERROR_MODEL,
    EVALUATIONS,
    GENERALIZATION_ERROR,
    TASKS,
    serve_worker_metrics,
)
from mots.platform.schemas import EvaluationRequest, EvaluationResult
from mots.platform.transactions import in_transaction
from services.evaluation.core.config import get_settings
from services.evaluation.measure import test_loss
from services.evaluation.migrations import upgrade
from services.evaluation.models import Measurement
from services.evaluation.refit import refit

settings = get_settings()
app = make_celery("evaluation", settings.redis_url, settings.redis_key_prefix)
sessions = make_sessionmaker(make_engine(settings.database_url))


def _on_ready(**_: Any) -> None:
    upgrade(settings.database_url)
    serve_worker_metrics(settings.metrics_port, settings.metrics_host)


signals.worker_ready.connect(_on_ready, weak=False)


def _fit_all() -> dict[str, Any] | None:
    with sessions() as session:
        rows = session.scalars(select(Measurement).order_by(Measurement.id)).all()
        points = [
            (json.loads(m.participants_json), json.loads(m.sizes_json), m.test_loss) for m in rows
        ]
    fit = refit(points, settings.min_fit_points)
    if fit is not None:
        for name in ("eps0", "d_gamma2", "sigma2"):
            ERROR_MODEL.labels(name).set(getattr(fit, name))
    return fit.model_dump(mode="json") if fit is not None else None


@task(app, "evaluation.evaluate")
def evaluate(payload: dict[str, Any]) -> dict[str, Any]:
    """Measure a round's model on the held-out test set and refit the error model."""
    request = EvaluationRequest.model_validate(payload)
    start = time.perf_counter()
    loss, accuracy = test_loss(
        request.artifact_path, request.artifact_sha256, settings.data_dir, settings.eval_test_subset
    )
    seconds = time.perf_counter() - start

    def store(session: Any) -> None:
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
    TASKS.labels("evaluation", "evaluate", "ok").inc()
    fit = _fit_all()
    return EvaluationResult(
        round_id=request.round_id, test_loss=loss, accuracy=accuracy, seconds=seconds, fit=fit
    ).model_dump(mode="json")


@task(app, "evaluation.error_model")
def error_model(_: dict[str, Any] | None = None) -> dict[str, Any]:
    """The error model fitted to every measurement so far (``fit`` is None below enough points)."""
    TASKS.labels("evaluation", "error_model", "ok").inc()
    return {"fit": _fit_all()}
