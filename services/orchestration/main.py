"""The orchestration service's FastAPI app: start rounds and read their persisted state.

Run with ``uvicorn services.orchestration.main:app``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from mots.platform.celery_app import make_celery
from mots.platform.db import make_engine, make_sessionmaker
from mots.platform.metrics import install_http_metrics
from mots.platform.web import install_healthz, lazy_app
from services.orchestration.api.routes import rounds
from services.orchestration.core.config import Settings, get_settings
from services.orchestration.migrations import upgrade


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the orchestration app."""
    settings = settings or get_settings()
    engine = make_engine(settings.database_url)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        upgrade(settings.database_url)
        try:
            yield
        finally:
            engine.dispose()

    app = FastAPI(
        title="MoTS orchestration",
        version="1",
        summary="Market rounds as a persisted state machine: open, collect, train, evaluate, settle.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.sessions = make_sessionmaker(engine)
    app.state.celery = make_celery("orchestration", settings.redis_url, settings.redis_key_prefix)
    app.include_router(rounds.router)
    install_http_metrics(app, "orchestration")
    install_healthz(app)
    return app


# uvicorn's import string ``services.orchestration.main:app`` builds the app on first access.
__getattr__ = lazy_app(globals(), create_app)
