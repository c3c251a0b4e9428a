"""The HTTP metrics middleware: one count and one latency sample per request, by route template."""

from __future__ import annotations

import itertools

from fastapi import FastAPI, HTTPException
from fastapi.testclient import TestClient
from prometheus_client import REGISTRY

from mots.platform.metrics import install_http_metrics

SERVICE = "metrics-test"


def _count(method: str, route: str, status: str) -> float:
    value = REGISTRY.get_sample_value(
        "mots_http_requests_total",
        {"service": SERVICE, "method": method, "route": route, "status": status},
    )
    return value or 0.0


def _observations(method: str, route: str) -> float:
    value = REGISTRY.get_sample_value(
        "mots_http_request_duration_seconds_count",
        {"service": SERVICE, "method": method, "route": route},
    )
    return value or 0.0


def _app() -> FastAPI:
    app = FastAPI()

    @app.get("/items/{item_id}", responses={404: {"description": "no such item"}})
    async def item(item_id: int) -> dict[str, int]:
        if item_id == 0:
            raise HTTPException(404, "item_id: no item 0")
        return {"item_id": item_id}

    @app.post("/boom")
    async def boom() -> None:
        raise RuntimeError("a bug")

    install_http_metrics(app, SERVICE)
    return app


def test_requests_are_counted_by_template_and_status() -> None:
    """Path parameters collapse into the template; the status is the one sent."""
    before_ok = _count("GET", "/items/{item_id}", "200")
    before_missing = _count("GET", "/items/{item_id}", "404")
    before_seen = _observations("GET", "/items/{item_id}")
    with TestClient(_app()) as client:
        assert client.get("/items/1").status_code == 200
        assert client.get("/items/2").status_code == 200
        assert client.get("/items/0").status_code == 404
    assert _count("GET", "/items/{item_id}", "200") == before_ok + 2
    assert _count("GET", "/items/{item_id}", "404") == before_missing + 1
    assert _observations("GET", "/items/{item_id}") == before_seen + 3


def test_unmatched_paths_and_crashes_are_counted() -> None:
    """A path no route matches is ``unmatched``; an unhandled error counts as a 500."""
    before_unmatched = _count("GET", "unmatched", "404")
    before_crash = _count("POST", "/boom", "500")
    with TestClient(_app(), raise_server_exceptions=False) as client:
        assert client.get("/nowhere").status_code == 404
        assert client.post("/boom").status_code == 500
    assert _count("GET", "unmatched", "404") == before_unmatched + 1
    assert _count("POST", "/boom", "500") == before_crash + 1


def test_every_documented_status_is_exported_at_zero_before_any_request() -> None:
    """Each route's counter exists at 0 for its success, the refusals its OpenAPI document lists
    (404 named, 422 for its parameter) and 500, before any request: ``rate()`` cannot count the
    request that creates a series, so a route's first 404 or 500 would otherwise go unseen."""
    service = "metrics-test-fresh"
    app = FastAPI()

    @app.get("/things/{thing_id}", responses={404: {"description": "no such thing"}})
    async def thing(thing_id: int) -> dict[str, int]:
        return {"thing_id": thing_id}

    install_http_metrics(app, service)
    for status in ("200", "404", "422", "500"):
        labels = {"service": service, "method": "GET", "route": "/things/{thing_id}"}
        assert (
            REGISTRY.get_sample_value("mots_http_requests_total", {**labels, "status": status})
            == 0.0
        ), status
    assert (
        REGISTRY.get_sample_value("mots_http_requests_total", {**labels, "status": "409"}) is None
    )

    @app.get("/later")
    async def later() -> None:
        """Added after the metrics: still in the app's document (none was cached early)."""

    assert "/later" in app.openapi()["paths"]


def test_metrics_route_serves_the_registry() -> None:
    """``/metrics`` is Prometheus text with the request counter in it."""
    with TestClient(_app()) as client:
        client.get("/items/5")
        body = client.get("/metrics")
    assert body.status_code == 200
    assert body.headers["content-type"].startswith("text/plain")
    assert "mots_http_requests_total" in body.text


def test_round_buckets_fit_rounds_from_seconds_to_hours() -> None:
    """From 1 s to 6 h, each bucket at most 4/3 of the one below: a quantile interpolated inside a
    bucket is off by at most a third (the old 60 → 120 s bucket put a 64 s round's p95 at 117 s)."""
    from mots.platform.metrics import PHASE_BUCKETS, ROUND_BUCKETS

    for buckets in (ROUND_BUCKETS, PHASE_BUCKETS):
        assert buckets[0] <= 1 and buckets[-1] >= 6 * 3600
        from_1s = [b for b in buckets if b >= 1]
        assert all(b / a <= 4 / 3 + 1e-12 for a, b in itertools.pairwise(from_1s))
    lo, hi = max(b for b in ROUND_BUCKETS if b < 64), min(b for b in ROUND_BUCKETS if b >= 64)
    assert lo + 0.95 * (hi - lo) < 75  # one 64 s round's interpolated p95
