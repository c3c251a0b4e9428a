"""The pricing Celery worker: ``pricing.quote`` and ``pricing.equilibrium`` for the orchestrator.

Run with ``celery -A services.pricing.worker worker -Q pricing --pool=solo``.
"""

from __future__ import annotations

import time
from typing import Any

from celery import signals

from mots.platform.celery_app import make_celery, task
from mots.platform.metrics import PRICING_DURATION, PRICING_REQUESTS, serve_worker_metrics
from mots.platform.schemas import PricingRequest
from services.pricing import engine
from services.pricing.core.config import get_settings

settings = get_settings()
app = make_celery("pricing", settings.redis_url, settings.redis_key_prefix)


def _on_ready(**_: Any) -> None:
    serve_worker_metrics(settings.metrics_port, settings.metrics_host)


signals.worker_ready.connect(_on_ready, weak=False)


@task(app, "pricing.quote")
def quote(payload: dict[str, Any]) -> dict[str, Any]:
    """SWAN's terms at K* or at a realised state (see :class:`PricingRequest`)."""
    start = time.perf_counter()
    try:
        request = PricingRequest.model_validate(payload)
        sc = engine.scenario_from(request.scenario, settings.max_states)
        result = engine.price(sc, request.mechanism or settings.mechanism, request)
    except Exception:
        PRICING_REQUESTS.labels("quote", "error").inc()
        raise
    PRICING_REQUESTS.labels("quote", "ok").inc()
    PRICING_DURATION.labels("quote").observe(time.perf_counter() - start)
    return result.model_dump(mode="json")


@task(app, "pricing.equilibrium")
def equilibrium(payload: dict[str, Any]) -> dict[str, Any]:
    """Whether a declared state (K, B) is an equilibrium of the mechanism's schedule."""
    start = time.perf_counter()
    sc = engine.scenario_from(payload["scenario"], settings.max_states)
    out = engine.equilibrium(
        sc,
        payload.get("mechanism") or settings.mechanism,
        payload["participants"],
        payload["buyers"],
    )
    PRICING_REQUESTS.labels("equilibrium", "ok").inc()
    PRICING_DURATION.labels("equilibrium").observe(time.perf_counter() - start)
    return out
