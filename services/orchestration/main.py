"""The orchestration service's FastAPI app: start rounds and read their persisted state.

Run with ``uvicorn --factory services.orchestration.main:create_app``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial

from fastapi import FastAPI

from mots.platform.celery_app import make_celery
from mots.platform.db import make_engine, make_sessionmaker
from mots.platform.web import service_app
from services.orchestration.api.routes import rounds
from services.orchestration.core.config import Settings, get_settings
from services.orchestration.migrations import upgrade


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the orchestration app for ``settings`` (the environment's by default)."""
    settings = settings or get_settings()
    engine = make_engine(settings.database_url)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            engine.dispose()

    return service_app(
        "orchestration",
        "Market rounds as a persisted state machine: open, collect, train, evaluate, settle.",
        settings,
        [rounds.router],
        state={
            "sessions": make_sessionmaker(engine),
            "celery": make_celery("orchestration", settings.redis_url, settings.redis_key_prefix),
        },
        migrate=partial(upgrade, settings.database_url),
        lifespan=lifespan,
    )
