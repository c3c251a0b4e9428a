"""The evaluation worker's fit counts only rounds that published their model."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from mots.economics.error import generalization_error
from mots.economics.scenario import ErrorModel
from mots.platform.contracts import RoundRef

SIZES = [50.0, 120.0, 300.0]


@pytest.fixture
def worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The worker module on a fresh SQLite database (migrated)."""
    from services.evaluation.core import config
    from services.evaluation.migrations import upgrade

    url = f"sqlite:///{tmp_path / 'evaluation.db'}"
    monkeypatch.setenv("MOTS_DATABASE_URL", url)
    config.get_settings.cache_clear()
    upgrade(url)
    import services.evaluation.worker as module

    module = importlib.reload(module)
    yield module
    config.get_settings.cache_clear()


def _measure(worker: ModuleType, round_id: int, k: list[int], loss: float, published: bool) -> None:
    from services.evaluation.models import Measurement

    with worker.sessions() as session, session.begin():
        session.add(
            Measurement(
                round_id=round_id,
                participants_json=json.dumps(k),
                sizes_json=json.dumps(SIZES),
                test_loss=loss,
                accuracy=None,
                artifact_sha256="ab" * 32,
                seconds=1.0,
                published=published,
            )
        )


def test_unpublished_rounds_do_not_shape_the_error_model(worker: ModuleType) -> None:
    """Four published coalitions give the fit; an unpublished round's wild loss is ignored until
    (and unless) the round publishes."""
    true = ErrorModel(d_gamma2=40.0, sigma2=0.05, eps0=0.6)
    coalitions = [[0, 0, 5], [0, 5, 5], [10, 5, 5], [3, 0, 5]]
    for rid, k in enumerate(coalitions, start=1):
        loss = float(generalization_error(np.array(k), np.array(SIZES), true))
        _measure(worker, rid, k, loss, published=True)
    before = worker._fit_all()
    assert before is not None and before.points == 4
    _measure(worker, 9, [5, 5, 0], 50.0, published=False)  # e.g. a round that later failed
    still = worker._fit_all()
    assert still is not None and still.points == 4 and still.eps0 == pytest.approx(before.eps0)
    assert worker.published(RoundRef(round_id=9)).counted is True
    after = worker._fit_all()
    assert after is not None and after.points == 5 and after.eps0 != pytest.approx(before.eps0)
    assert worker.published(RoundRef(round_id=77)).counted is False


def test_one_published_round_moves_the_posterior_to_its_measurement(worker: ModuleType) -> None:
    """From the first published round the estimate at its coalition moves toward the measured
    loss (the refit still waits for 4 coalitions); a retried publish counts once; unpublished
    rounds do not count."""
    from mots.platform.contracts import NoInput

    k, measured = [0, 5, 5], 0.9
    at_k = lambda m: float(generalization_error(np.array(k), np.array(SIZES), m))  # noqa: E731
    before = worker.error_model(NoInput())
    assert before.fit is None and before.posterior.points == 0
    prior_model = ErrorModel(eps0=0.65, d_gamma2=39.4, sigma2=0.0)
    assert before.posterior.eps0 == pytest.approx(prior_model.eps0)
    _measure(worker, 1, k, measured, published=False)
    assert worker.error_model(NoInput()).posterior.points == 0
    assert worker.published(RoundRef(round_id=1)).counted is True
    assert worker.published(RoundRef(round_id=1)).counted is True  # a retried message
    now = worker.error_model(NoInput())
    assert now.fit is None and now.posterior.points == 1
    est = ErrorModel(eps0=now.posterior.eps0, d_gamma2=now.posterior.d_gamma2, sigma2=0.0)
    assert abs(at_k(est) - measured) < abs(at_k(prior_model) - measured) / 2
