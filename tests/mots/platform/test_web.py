"""Every service's app has one shape: title, version, routers, metrics, liveness, start-up order."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
from fastapi import APIRouter, FastAPI
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from mots.local.launcher import free_port
from mots.platform.deps import OperatorDep
from mots.platform.problems import problems
from mots.platform.settings import PlatformSettings
from mots.platform.web import API_VERSION, install_healthz, service_app

ROOT = Path(__file__).resolve().parents[3]


def test_healthz_answers_ok_and_is_documented() -> None:
    app = FastAPI()
    install_healthz(app, "demo")
    with TestClient(app) as client:
        response = client.get("/healthz")
        assert response.status_code == 200
        assert response.json() == {"status": "ok", "service": "demo"}
        assert "/healthz" in client.get("/openapi.json").json()["paths"]


def _router(path: str) -> APIRouter:
    router = APIRouter()

    @router.get(path)
    def answer() -> dict[str, str]:
        return {"path": path}

    return router


def test_service_app_has_every_common_part() -> None:
    """Title, summary, API version, settings and state, the routers in order, metrics, healthz."""
    settings = PlatformSettings()
    app = service_app(
        "demo", "A demonstration.", settings, [_router("/v1/a"), _router("/v1/b")], state={"x": 7}
    )
    assert (app.title, app.summary, app.version) == ("MoTS demo", "A demonstration.", API_VERSION)
    assert app.state.settings is settings and app.state.x == 7
    assert list(app.openapi()["paths"]) == ["/v1/a", "/v1/b", "/healthz"]  # service's first
    with TestClient(app) as client:
        assert client.get("/v1/b").json() == {"path": "/v1/b"}
        assert client.get("/healthz").json() == {"status": "ok", "service": "demo"}
        metrics = client.get("/metrics").text
        assert 'service="demo"' in metrics and "/v1/b" in metrics


def test_a_started_service_exports_every_documented_status_at_zero() -> None:
    """At start-up each route's counter exists at 0 for every status of the service's completed
    OpenAPI document (a token route's 401 and 403, a parameter's 422, a named 404) and 500, so
    the dashboard's ``rate()`` counts a route's first refusal or failure."""
    router = APIRouter()

    @router.get("/v1/things/{thing_id}", responses=problems(404))
    def thing(thing_id: int, operator: OperatorDep) -> dict[str, int]:
        return {"thing_id": thing_id}

    app = service_app("fresh-demo", "A demonstration.", PlatformSettings(), [router])
    with TestClient(app) as client:
        metrics = client.get("/metrics").text
    zeros = {
        (s.labels["route"], s.labels["status"])
        for family in text_string_to_metric_families(metrics)
        for s in family.samples
        if s.name == "mots_http_requests_total" and s.labels["service"] == "fresh-demo"
        and s.value == 0
    }  # fmt: skip
    for status in ("200", "401", "403", "404", "422", "500"):
        assert ("/v1/things/{thing_id}", status) in zeros, status
    assert ("/healthz", "200") in zeros  # added after the metrics: declared too


def test_start_up_migrates_before_the_services_own_work_and_stops_it_after() -> None:
    """``migrate`` runs first, then the service's lifespan; its exit is the shutdown."""
    events: list[str] = []

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        events.append("start")
        yield
        events.append("stop")

    app = service_app(
        "demo",
        "A demonstration.",
        PlatformSettings(),
        [],
        migrate=lambda: events.append("migrate"),
        lifespan=lifespan,
    )
    assert events == []  # building the app does nothing yet
    with TestClient(app) as client:
        assert events == ["migrate", "start"]
        client.get("/healthz")
    assert events == ["migrate", "start", "stop"]


def test_a_failed_migration_stops_the_start_before_the_services_work() -> None:
    """A service whose schema cannot be brought up does not start serving."""
    events: list[str] = []

    def migrate() -> None:
        raise RuntimeError("no database")

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        events.append("start")
        yield

    app = service_app(
        "demo", "A demonstration.", PlatformSettings(), [], migrate=migrate, lifespan=lifespan
    )
    with pytest.raises(RuntimeError, match="no database"), TestClient(app):
        pass
    assert events == []


@pytest.mark.integration
def test_uvicorn_serves_a_service_through_its_factory(tmp_path: Path) -> None:
    """``uvicorn --factory services.pricing.main:create_app`` builds the app and serves it."""
    port = free_port()
    log = (tmp_path / "uvicorn.log").open("wb")
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'shared'}{os.pathsep}{ROOT}"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "--factory", "services.pricing.main:create_app",
         "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
                break
            except httpx.TransportError:
                assert proc.poll() is None, (tmp_path / "uvicorn.log").read_text()
                assert time.monotonic() < deadline, "uvicorn did not answer within 60 s"
                time.sleep(0.2)
        assert health.json() == {"status": "ok", "service": "pricing"}
        openapi = httpx.get(f"http://127.0.0.1:{port}/openapi.json", timeout=5).json()
        assert openapi["info"]["title"] == "MoTS pricing"
        assert "/v1/quote" in openapi["paths"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def test_importing_a_service_builds_no_app() -> None:
    """A service module holds only its factory: importing it (workers, tests) reads no settings."""
    import services.market.main as market_main
    import services.orchestration.main as orchestration_main
    import services.pricing.main as pricing_main

    for module in (market_main, orchestration_main, pricing_main):
        assert callable(module.create_app)
        assert not hasattr(module, "app"), module.__name__


def test_docs_pages_load_their_assets_from_the_service_itself() -> None:
    """Swagger UI and ReDoc reference no other host: their scripts and styles are served from the
    assets fastapi-offline ships (the browser test renders them with the network cut off)."""
    app = service_app("demo", "A demonstration.", PlatformSettings(), [_router("/v1/a")])
    with TestClient(app) as client:
        for page in ("/docs", "/redoc"):
            html = client.get(page).text
            assert "http://" not in html and "https://" not in html, page
            assets = re.findall(r'(?:src|href)="(/static-offline-docs/[^"]+)"', html)
            assert assets, page
            for asset in assets:
                got = client.get(asset)
                assert got.status_code == 200 and len(got.content) > 100, asset
        assert "/docs" not in app.openapi()["paths"]
