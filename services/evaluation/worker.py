"""The evaluation Celery worker: measure a round's model, learn Eq. 3 from every published
measurement (the Bayesian posterior of :mod:`mots.economics.error_online`, and the least-squares
refit once enough coalitions are measured), and hand out the current estimate for pricing.

Measuring verifies the artifact's SHA-256 against the digest the round published, then takes its
loss on the held-out test set (:func:`mots.training.artifacts.evaluate`). The refit:
ε(K) = ε0 + dγ²·S/K² + σ²·(K−1)/K with S = Σ_i K_i/D_i is linear in (ε0, dγ², σ²) once K is
known; the fit itself is the economics core's :func:`mots.economics.error_fit.fit_error_history`.
Each measurement keeps its own round's types and sizes, so types added, retired or resized
between rounds refit as any other history; a stored measurement Eq. 3 cannot use (K = 0, a
non-finite loss, counts and sizes of different lengths) is left out of both estimates and
logged, so that one odd round never fails the evaluation of the rounds after it.

Run with ``celery -A services.evaluation.worker worker -Q evaluation --pool=solo``.
"""

from __future__ import annotations

import json
import logging
import math
import time
from typing import TYPE_CHECKING

from sqlalchemy import select
from sqlalchemy.orm import Session

from mots.economics.error_fit import fit_error_history
from mots.economics.error_online import PARAMETERS, ErrorPosterior
from mots.economics.scenario import ErrorModel
from mots.platform.api.rounds import ErrorFit
from mots.platform.api.tasks import DEFAULT_TASK
from mots.platform.contracts import (
    EVALUATION_ERROR_MODEL,
    EVALUATION_EVALUATE,
    EVALUATION_PUBLISHED,
    CurrentErrorModel,
    ErrorPosteriorEstimate,
    EvaluationRequest,
    EvaluationResult,
    PublishedRound,
    RoundRef,
    TaskRef,
)
from mots.platform.db import in_transaction, make_engine, make_sessionmaker
from mots.platform.metrics import ERROR_MODEL, EVALUATIONS, GENERALIZATION_ERROR
from mots.platform.worker import service_worker
from services.evaluation.core.config import get_settings
from services.evaluation.migrations import upgrade
from services.evaluation.models import Measurement

if TYPE_CHECKING:
    from mots.tasks.task_file import MarketTask

settings = get_settings()
app = service_worker("evaluation", settings, migrate=lambda: upgrade(settings.database_url))
sessions = make_sessionmaker(make_engine(settings.database_url))
EVALUATIONS.labels(DEFAULT_TASK).inc(0)  # exported at 0 before the first evaluation

log = logging.getLogger(__name__)

Point = tuple[list[int], list[float], float]
"""(K per type, D per type, measured test loss)."""


def unusable(k: list[int], sizes: list[float], loss: float) -> str | None:
    """Why Eq. 3 cannot use the measurement (K, D, ε), or None when it can."""
    if len(k) != len(sizes):
        return f"{len(k)} participant counts but {len(sizes)} data sizes"
    if any(x < 0 for x in k) or sum(k) <= 0:
        return f"participants {k}: a coalition needs K > 0 and no negative count"
    if any(not (math.isfinite(d) and d > 0) for d in sizes):
        return f"sizes {sizes}: every data size must be positive and finite"
    if not math.isfinite(loss):
        return f"the test loss is {loss}, not finite"
    return None


def usable(points: list[Point]) -> list[Point]:
    """The measurements Eq. 3 can use, in order; each one left out is logged."""
    kept = []
    for k, sizes, loss in points:
        why = unusable(k, sizes, loss)
        if why is None:
            kept.append((k, sizes, loss))
        else:
            log.warning("a measurement is left out of the error model: %s", why)
    return kept


def task_definition(task: str, version: int | None = None) -> MarketTask:
    """Task ``task``'s definition at ``version``, the one its round was opened on, as the
    orchestration priced and trained it (:func:`mots.tasks.stored.pinned_task`: its task file
    while it declares that version, else the market's stored version, cached); None: the
    current version (its task file, else the market's latest, ``MOTS_MARKET_INTERNAL_URL``)."""
    from mots.tasks.stored import pinned_task

    token = settings.operator_token.get_secret_value()
    return pinned_task(task, version, settings.market_internal_url, token)


def measure(
    artifact_path: str,
    sha256: str,
    data_dir: str | None,
    test_subset: int | None,
    task: str = DEFAULT_TASK,
    task_version: int | None = None,
) -> tuple[float, float | None]:
    """(test loss, accuracy) of the model artifact on its task's evaluation data (the default
    task: its data set's test split, as before tasks; another: the task file's ``evaluation``);
    refuses an artifact whose digest differs."""
    from mots.training.artifacts import evaluate, verify

    if not verify(artifact_path, sha256):
        raise ValueError(f"artifact_sha256: {artifact_path} does not match its published digest")
    if task != DEFAULT_TASK:
        from mots.tasks.training import evaluate_model_file

        return evaluate_model_file(task_definition(task, task_version), artifact_path)
    loss, accuracy = evaluate(artifact_path, data_dir=data_dir, test_subset=test_subset)
    return float(loss), float(accuracy)


def refit(points: list[Point], min_points: int) -> ErrorFit | None:
    """The least-squares fit of ε0, dγ² and σ² over all usable points (each with its own round's
    types and sizes), or None while fewer than ``min_points`` distinct coalitions."""
    points = usable(points)
    distinct = {(tuple(k), tuple(sizes)) for k, sizes, _ in points}
    if len(distinct) < min_points:
        return None
    fit = fit_error_history(points)
    return ErrorFit(
        eps0=float(fit.eps0),
        d_gamma2=float(fit.d_gamma2),
        sigma2=float(fit.sigma2),
        r2=None if fit.r2 is None else float(fit.r2),
        points=len(points),
    )


def _published_points(session: Session, task: str = DEFAULT_TASK) -> list[Point]:
    rows = session.scalars(
        select(Measurement)
        .where(Measurement.published, Measurement.task == task)
        .order_by(Measurement.round_id)
    ).all()
    return [(json.loads(m.participants_json), json.loads(m.sizes_json), m.test_loss) for m in rows]


def _fit_all(task: str = DEFAULT_TASK) -> ErrorFit | None:
    with sessions() as session:
        points = _published_points(session, task)
    return refit(points, settings.min_fit_points)


def prior(task: str = DEFAULT_TASK) -> ErrorPosterior:
    """The prior over Eq. 3's parameters: its mean MOTS_PRIOR_ERROR_MODEL for the default task,
    else the task file's ``economics.scenario.error_model``; its spread MOTS_PRIOR_ERROR_SD,
    MOTS_ERROR_NOISE_SD and MOTS_ERROR_DRIFT_SD."""
    sd = [settings.prior_error_sd[name] for name in PARAMETERS]
    drift = [settings.error_drift_sd[name] for name in PARAMETERS]
    if task == DEFAULT_TASK:
        model = ErrorModel.model_validate(settings.prior_error_model)
    else:
        model = task_definition(task).economics.scenario.error_model
    return ErrorPosterior.prior(model, sd, settings.error_noise_sd, drift)


# The default task's prior until a round of it counts; every other task's gauges appear, labelled
# with its name, when its error model is first read (a round of it opens) or a round publishes.
for _name, _value in zip(PARAMETERS, prior().mean, strict=True):  # the prior until a round counts
    ERROR_MODEL.labels(DEFAULT_TASK, _name).set(float(_value))


def posterior(session: Session, task: str = DEFAULT_TASK) -> ErrorPosterior:
    """The task's prior updated with every published measurement of its rounds in their order,
    each with its own types' data sizes (the round-by-round update); exported as the task's
    gauges."""
    post = prior(task)
    for k, sizes, loss in usable(_published_points(session, task)):
        post = post.update(k, sizes, loss)
    estimate = post.point_estimate()
    for name in PARAMETERS:
        ERROR_MODEL.labels(task, name).set(getattr(estimate, name))
    return post


def _estimate(post: ErrorPosterior) -> ErrorPosteriorEstimate:
    point = post.point_estimate()
    return ErrorPosteriorEstimate(
        eps0=point.eps0,
        d_gamma2=point.d_gamma2,
        sigma2=point.sigma2,
        sd=dict(zip(PARAMETERS, (float(s) for s in post.sd()), strict=True)),
        points=post.points,
    )


@EVALUATION_EVALUATE.handler(app)
def evaluate(request: EvaluationRequest) -> EvaluationResult:
    """Measure a round's model on the held-out test set; the measurement counts in the error
    model's fit once the round publishes (:func:`published`). A coalition Eq. 3 cannot use and a
    non-finite loss are refused (the round settles by rule; the rounds after it are unaffected)."""
    why = unusable(request.participants, request.sizes, 0.0)
    if why is not None:
        raise ValueError(f"round {request.round_id}: {why}")
    start = time.perf_counter()
    loss, accuracy = measure(
        request.artifact_path,
        request.artifact_sha256,
        settings.data_dir,
        settings.eval_test_subset,
        request.task,
        request.task_version,
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
                    task=request.task,
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
    task = request.task  # the round's task
    GENERALIZATION_ERROR.labels(task, "measured").set(loss)
    EVALUATIONS.labels(task).inc()
    return EvaluationResult(
        round_id=request.round_id,
        test_loss=loss,
        accuracy=accuracy,
        seconds=seconds,
        fit=_fit_all(request.task),
    )


@EVALUATION_PUBLISHED.handler(app)
def published(ref: RoundRef) -> PublishedRound:
    """The round published its model: its measurement now counts in the error model (which is
    recomputed from the published measurements when read; idempotent), and the round's task's
    ``mots_error_model_parameter`` gauges show the estimate with it at once."""

    def mark(session: Session) -> str | None:
        found = session.scalar(select(Measurement).where(Measurement.round_id == ref.round_id))
        if found is None:
            return None
        found.published = True
        return found.task

    task = in_transaction(sessions, mark)
    if task is not None:
        try:
            with sessions() as session:
                posterior(session, task)  # exports the task's gauges
        except Exception:  # the gauges are best effort: the measurement counts regardless
            log.warning("task %s: the error model's gauges were not updated", task, exc_info=True)
    return PublishedRound(round_id=ref.round_id, counted=task is not None)


@EVALUATION_ERROR_MODEL.handler(app)
def error_model(ref: TaskRef) -> CurrentErrorModel:
    """The task's error model learned so far from its own published rounds: the posterior (the
    task's prior before any) and the least-squares fit (None below enough distinct coalitions)."""
    with sessions() as session:
        post = posterior(session, ref.task)
    return CurrentErrorModel(fit=_fit_all(ref.task), posterior=_estimate(post))
