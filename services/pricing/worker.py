"""The pricing Celery worker: the quote and the equilibrium check the orchestrator asks for.

Run with ``celery -A services.pricing.worker worker -Q pricing --pool=solo``.
"""

from __future__ import annotations

import time

from mots.platform import quotes as engine
from mots.platform.api.pricing import (
    EquilibriumRequest,
    EquilibriumResult,
    PricingRequest,
    PricingResult,
)
from mots.platform.contracts import PRICING_EQUILIBRIUM, PRICING_QUOTE
from mots.platform.metrics import PRICING_DURATION, PRICING_REQUESTS
from mots.platform.worker import service_worker
from services.pricing.core.config import get_settings

settings = get_settings()
app = service_worker("pricing", settings)
for _kind in ("quote", "equilibrium"):  # exported at 0 before the first request
    PRICING_DURATION.labels(_kind)
    PRICING_REQUESTS.labels(_kind, "ok")


@PRICING_QUOTE.handler(app)
def quote(request: PricingRequest) -> PricingResult:
    """SWAN's terms at K* or at a realised state (see :class:`PricingRequest`)."""
    start = time.perf_counter()
    try:
        sc = engine.scenario_from(request.scenario, settings.max_types)
        result = engine.price(sc, request.mechanism or settings.default_mechanism, request)
    except Exception:
        PRICING_REQUESTS.labels("quote", "error").inc()
        raise
    PRICING_REQUESTS.labels("quote", "ok").inc()
    PRICING_DURATION.labels("quote").observe(time.perf_counter() - start)
    return result


@PRICING_EQUILIBRIUM.handler(app)
def equilibrium(request: EquilibriumRequest) -> EquilibriumResult:
    """Whether a declared state (K, B) is an equilibrium of the mechanism's schedule."""
    start = time.perf_counter()
    sc = engine.scenario_from(request.scenario, settings.max_types)
    out = engine.equilibrium(
        sc, request.mechanism or settings.default_mechanism, request.participants, request.buyers
    )
    PRICING_REQUESTS.labels("equilibrium", "ok").inc()
    PRICING_DURATION.labels("equilibrium").observe(time.perf_counter() - start)
    return EquilibriumResult.model_validate(out)
