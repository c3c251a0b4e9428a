"""The pricing service's FastAPI app: read-only computations, no client identity involved.

Run with ``uvicorn services.pricing.main:app``.
"""

from __future__ import annotations

from fastapi import FastAPI

from mots.platform.metrics import install_http_metrics
from mots.platform.web import install_healthz, lazy_app
from services.pricing.api.routes import quotes
from services.pricing.core.config import Settings, get_settings


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the pricing app."""
    app = FastAPI(
        title="MoTS pricing",
        version="1",
        summary="SWAN's price and rewards for a scenario, and what-if queries.",
    )
    app.state.settings = settings or get_settings()
    app.include_router(quotes.router)
    install_http_metrics(app, "pricing")
    install_healthz(app)
    return app


# uvicorn's import string ``services.pricing.main:app`` builds the app on first access.
__getattr__ = lazy_app(globals(), create_app)
