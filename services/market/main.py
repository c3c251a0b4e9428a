"""The market's FastAPI app: registration, quotes, decisions, purchases, models and the ledger.

Run with ``uvicorn --factory services.market.main:create_app``; ``MOTS_DATABASE_URL`` picks the
ledger database.
"""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial

import anyio.to_thread
from celery import Celery
from fastapi import FastAPI
from sqlalchemy.engine import Engine
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.orm import Session, sessionmaker

from mots.platform import metrics
from mots.platform.batching import MicroBatcher
from mots.platform.celery_app import make_celery
from mots.platform.contracts import ORCHESTRATION_DECISIONS_COMPLETE, RoundRef, send
from mots.platform.db import (
    make_async_engine,
    make_async_sessionmaker,
    make_engine,
    make_read_sessionmaker,
    make_sessionmaker,
)
from mots.platform.web import Lifespan, service_app
from services.market.api.errors import install_refusal_handler
from services.market.api.routes import (
    clients,
    decisions,
    enrolments,
    ledger,
    models,
    operator_ledger,
    platform,
    purchases,
    quotes,
    tasks,
    tokens,
)
from services.market.auth import client_lookup, issue_token, republish_dead
from services.market.booking import (
    DecisionBatcher,
    PurchaseBatcher,
    RegistrationBatcher,
    decision_batcher,
    purchase_batcher,
    registration_batcher,
)
from services.market.core.config import Settings, get_settings
from services.market.metrics import unwatch_ledger, watch_ledger
from services.market.migrations import upgrade
from services.market.models import DEFAULT_TASK, Client
from services.market.purchases_pg import PgPurchaseBook

GC_YOUNG_THRESHOLD = 20_000
"""Net allocations between two collections of the youngest generation (CPython's default: 700)."""


ROUTERS = (
    purchases,
    decisions,
    clients,
    tokens,
    enrolments,
    quotes,
    ledger,
    operator_ledger,
    models,
    tasks,
    platform,
)
"""The market's route modules, the busiest first: routes match in order (matching was 11% of a
declaration's time)."""


@dataclass
class MarketParts:
    """What one market API process builds at start: its engines, Celery and the three batchers
    of the write path (:mod:`services.market.booking`), which the routes reach in ``app.state``."""

    engine: Engine
    async_engine: AsyncEngine | None
    sessions: sessionmaker[Session]
    celery: Celery
    pipelined: PgPurchaseBook | None
    batcher: PurchaseBatcher
    declarations: DecisionBatcher
    registrations: RegistrationBatcher
    lookup: MicroBatcher[str, Client | None]

    def state(self) -> dict[str, object]:
        """The ``app.state`` attributes the routes and dependencies read."""
        return {
            "sessions": self.sessions,
            "clients_by_token": {},  # token verifier → client, see auth.any_client
            "clients_cached_at": 0.0,
            "celery": self.celery,
            "purchases": self.batcher,
            "declarations": self.declarations,
            "registrations": self.registrations,
            "client_lookup": self.lookup,
        }

    async def close(self) -> None:
        """Stop the batchers and the lookup, then close the pools."""
        for closing in (self.batcher, self.declarations, self.registrations, self.lookup):
            closing.close()
        if self.pipelined is not None:
            await self.pipelined.close()
        self.engine.dispose()
        if self.async_engine is not None:
            await self.async_engine.dispose()


def build_parts(settings: Settings) -> MarketParts:
    """The engines, Celery and batchers of a market API process configured by ``settings``."""
    engine = make_engine(settings.database_url, settings.db_pool_size)
    sessions = make_sessionmaker(engine)
    celery = make_celery("market", settings.redis_url, settings.redis_key_prefix)

    def complete(round_id: int) -> None:
        """Every client declared (the last by buying): tell orchestration to close the round."""
        send(celery, ORCHESTRATION_DECISIONS_COMPLETE, RoundRef(round_id=round_id))

    async_engine = make_async_engine(settings.database_url, settings.db_pool_size)
    async_sessions = make_async_sessionmaker(async_engine) if async_engine is not None else None
    pipelined = (
        PgPurchaseBook(settings.database_url, settings.purchase_writer_count)
        if async_engine is not None
        else None
    )
    max_batch, writers = settings.purchase_max_batch, settings.purchase_writer_count
    return MarketParts(
        engine=engine,
        async_engine=async_engine,
        sessions=sessions,
        celery=celery,
        pipelined=pipelined,
        batcher=purchase_batcher(
            sessions,
            async_sessions,
            on_complete=complete,
            max_batch=max_batch,
            writers=writers,
            pipelined=pipelined,
        ),
        declarations=decision_batcher(
            sessions, async_sessions, on_complete=complete, max_batch=max_batch, writers=writers
        ),
        registrations=registration_batcher(
            sessions,
            async_sessions,
            settings.max_types,
            lambda cid: issue_token(cid, settings),
            max_batch=max_batch,
            writers=writers,
        ),
        lookup=client_lookup(make_read_sessionmaker(engine), async_sessions),
    )


def market_lifespan(parts: MarketParts) -> Lifespan:
    """Start-up (the durable revocation list published to this start's Redis prefix, the ledger
    gauge, the collector tuned for requests) and shutdown of the app."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await anyio.to_thread.run_sync(republish_dead, parts.sessions, app.state.settings)
        watch_ledger(parts.sessions)
        # Start-up objects (modules, app, compiled statements) never die: keep them out of the
        # collector's way, so a request does not pay for scanning them (p99 latency).
        gc.collect()
        gc.freeze()
        # A request allocates hundreds of short-lived objects: collect the young generation
        # every 20,000 net allocations instead of 700 (about 7% more purchases per second).
        thresholds = gc.get_threshold()
        gc.set_threshold(GC_YOUNG_THRESHOLD, *thresholds[1:])
        try:
            yield
        finally:
            gc.set_threshold(*thresholds)
            unwatch_ledger(parts.sessions)
            await parts.close()

    return lifespan


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the market app for ``settings`` (the environment's by default)."""
    settings = settings or get_settings()
    metrics.PURCHASES.labels(DEFAULT_TASK).inc(0)  # at 0 before the first purchase (others: the
    # ledger gauge's refresh declares each stored task's, services.market.metrics)
    parts = build_parts(settings)
    app = service_app(
        "market",
        "Register, read SWAN's quote, declare a strategy, buy and download the model.",
        settings,
        [m.router for m in ROUTERS],
        state=parts.state(),
        migrate=partial(upgrade, settings.database_url),
        lifespan=market_lifespan(parts),
    )
    install_refusal_handler(app)
    return app
