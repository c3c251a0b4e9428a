"""The one shape of every service's FastAPI app: :func:`service_app`.

Each service's ``main.py`` has a ``create_app(settings=None)`` that builds its own parts (database
engines, batchers, the Celery client) and hands them to :func:`service_app`, which adds what every
service has: title, summary and API version, the migrations run at start, the service's own
start/stop work, its routers, errors as RFC 9457 problem details with strict JSON bodies
(:mod:`mots.platform.problems`), HTTP metrics (``/metrics``), the liveness route (``/healthz``) and
the API documentation, Swagger UI at ``/docs`` and ReDoc at ``/redoc``, whose scripts and styles
are served from the assets the ``fastapi-offline`` package ships (``/static-offline-docs``): the
pages load with no internet, on a Pi's network as on a laptop.
uvicorn calls the factory when the process starts::

    uvicorn --factory services.<service>.main:create_app --host 0.0.0.0 --port 8000 --no-proxy-headers

so importing a service module (tests, Celery workers, schema dumps) reads no settings and opens no
database pool.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Literal

from fastapi import APIRouter, FastAPI
from fastapi_offline import FastAPIOffline
from pydantic import BaseModel, Field

from mots.platform.metrics import declare_routes, install_http_metrics, serve_worker_metrics
from mots.platform.problems import (
    PROBLEM_RESPONSES,
    complete_problem_docs,
    install_problem_handlers,
)
from mots.platform.revocation import RevocationList
from mots.platform.settings import PlatformSettings

API_VERSION = "1"
"""The version of every service's HTTP API (its routes live under ``/v1``)."""

Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[None]]
"""A service's own start-up and shut-down work around the time it serves requests."""


class Health(BaseModel):
    """The liveness probe's answer, naming the service that gives it (a launcher checks that the
    port it picked is served by the service it started there, not by another)."""

    status: Literal["ok"] = Field(..., examples=["ok"])
    service: str = Field(..., examples=["market"], description="The service answering.")


def install_healthz(app: FastAPI, service: str) -> None:
    """Add ``GET /healthz``, the liveness probe of Docker's HEALTHCHECK and k8s' probes."""

    @app.get("/healthz", tags=["health"])
    async def healthz() -> Health:
        """Liveness probe (async: answered on the event loop, no thread hop)."""
        return Health(status="ok", service=service)


def install_openapi(app: FastAPI) -> None:
    """Complete the app's OpenAPI document once, when first asked: the refusals every route can
    give, with their problem+json body (:func:`mots.platform.problems.complete_problem_docs`)."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = complete_problem_docs(generate())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def service_app(
    service: str,
    summary: str,
    settings: PlatformSettings,
    routers: Sequence[APIRouter],
    *,
    state: Mapping[str, Any] | None = None,
    migrate: Callable[[], None] | None = None,
    lifespan: Lifespan | None = None,
) -> FastAPI:
    """The FastAPI app of ``service``, every service's common parts around its own.

    At start the app runs ``migrate`` (the service's Alembic upgrade), then enters ``lifespan``
    (the service's own start-up; its exit is the shutdown). ``settings`` and ``state`` become
    ``app.state`` attributes, which the shared dependencies (:mod:`mots.platform.deps`) read.
    Routers are matched in the order given, then ``/metrics`` (unless ``MOTS_METRICS_PORT``
    serves it on a port of its own) and ``/healthz``: put the busiest first.
    """

    @asynccontextmanager
    async def run(app: FastAPI) -> AsyncIterator[None]:
        # every route's series at 0 from the start, by its complete OpenAPI document
        declare_routes(app, service, app.openapi())
        if migrate is not None:
            migrate()
        server = serve_worker_metrics(settings.metrics_port, settings.metrics_host)
        try:
            if lifespan is None:
                yield
                return
            async with lifespan(app):
                yield
        finally:
            if server is not None:
                server.shutdown()
                server.server_close()

    app = FastAPIOffline(
        title=f"MoTS {service}",
        version=API_VERSION,
        summary=summary,
        lifespan=run,
        responses=PROBLEM_RESPONSES,
    )
    app.state.settings = settings
    app.state.revocations = RevocationList(
        settings.redis_url,
        settings.redis_key_prefix,
        settings.revocation_refresh_s,
        settings.revocation_max_stale_s,
    )
    for name, value in (state or {}).items():
        setattr(app.state, name, value)
    for router in routers:
        app.include_router(router)
    install_problem_handlers(app)
    # MOTS_METRICS_PORT set: /metrics on that port only (Prometheus may reach it, the API's
    # clients may not: k3s NetworkPolicy, compose); unset (0): on the API's own port.
    install_http_metrics(app, service, route=not settings.metrics_port, declare=False)
    install_healthz(app, service)
    install_openapi(app)
    return app
