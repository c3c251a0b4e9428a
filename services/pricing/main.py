"""The pricing service's FastAPI app: read-only computations, no client identity involved.

Run with ``uvicorn --factory services.pricing.main:create_app``.
"""

from __future__ import annotations

from fastapi import FastAPI

from mots.platform.metrics import PRICING_DURATION, PRICING_REQUESTS
from mots.platform.web import service_app
from services.pricing.api.routes import quotes
from services.pricing.core.config import Settings, get_settings


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the pricing app for ``settings`` (the environment's by default)."""
    for kind in ("quote", "what_if"):  # exported at 0 before the first request
        PRICING_DURATION.labels(kind)
        for outcome in ("ok", "invalid"):
            PRICING_REQUESTS.labels(kind, outcome)
    return service_app(
        "pricing",
        "SWAN's price and rewards for a scenario, and what-if queries.",
        settings or get_settings(),
        [quotes.router],
    )
