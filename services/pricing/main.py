"""The pricing service's FastAPI app: read-only computations, no client identity involved.

Run with ``uvicorn services.pricing.main:app``.
"""

from __future__ import annotations

from fastapi import FastAPI

from mots.platform.metrics import install_http_metrics
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

    @app.get("/healthz", tags=["health"])
    async def healthz() -> dict[str, str]:
        """Liveness probe (async: answered on the event loop, no thread hop)."""
        return {"status": "ok"}

    return app


def __getattr__(name: str) -> FastAPI:
    """``services.pricing.main:app`` builds the app on first access (uvicorn's import string)."""
    if name == "app":
        application = create_app()
        globals()["app"] = application
        return application
    raise AttributeError(name)
