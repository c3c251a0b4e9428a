"""Prometheus metrics of the platform (names follow Prometheus conventions: unit suffixes, _total).

One registry per process. The HTTP middleware counts and times every request by route template;
:func:`serve_worker_metrics` exposes a worker's registry on ``MOTS_METRICS_HOST:MOTS_METRICS_PORT``.
Every per-round and per-market figure carries the label ``task`` (issue 36): the market's task of
its round, ``fashion-mnist`` (mots.platform.api.tasks.DEFAULT_TASK) where a round names none, so
rules and panels sum or filter by it.
"""

from __future__ import annotations

import time
from typing import Any
from wsgiref.simple_server import WSGIServer

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    start_http_server,
)
from starlette.responses import Response

HTTP_REQUESTS = Counter(
    "mots_http_requests_total",
    "HTTP requests served, by service, method, route template and status code.",
    ["service", "method", "route", "status"],
)
HTTP_DURATION = Histogram(
    "mots_http_request_duration_seconds",
    "HTTP request latency, by service, method and route template.",
    ["service", "method", "route"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
)
BATCH_SIZE = Histogram(
    "mots_batch_size",
    "Requests handled together in one batch (one database transaction), by batcher.",
    ["batcher"],
    buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256),
)
BATCH_DURATION = Histogram(
    "mots_batch_duration_seconds",
    "Time to handle one batch (its transaction, commit included), by batcher.",
    ["batcher"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0),
)

ROUND_BUCKETS = (
    1, 1.25, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10, 12.5, 15, 20, 25, 30, 40, 50, 60, 75, 90, 120, 150,
    180, 240, 300, 360, 480, 600, 750, 900, 1200, 1500, 1800, 2400, 3000, 3600, 4800, 6000, 7200,
    9000, 10800, 14400, 18000, 21600,
)  # fmt: skip
"""Seconds: rounds last from seconds to hours; each bucket at most 4/3 of the one below, so a
quantile interpolated inside a bucket is off by at most a third (a 64 s round: p95 74 s)."""
PHASE_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, *ROUND_BUCKETS)
"""Seconds in one state: a step runs in milliseconds, collecting or training may take hours."""

# Labelled families export nothing until a label set is used, so every process may define them.
# A process that will increment a counter or observe a histogram declares its label sets
# when it starts, or when a task's first round moves or the task is stored, so that
# Prometheus sees each series at 0 before its first event: increase() and rate() cannot count
# the event that created a series.
REWARD = Gauge(
    "mots_reward", "Participation reward r_i of the task's latest round, by type.", ["task", "type"]
)
PARTICIPANTS = Gauge(
    "mots_participants", "Participants K_i of the task's latest round, by type.", ["task", "type"]
)
BUYERS = Gauge("mots_buyers", "Buyers B_i of the task's latest round, by type.", ["task", "type"])
ROUND_PHASE_DURATION = Histogram(
    "mots_round_phase_duration_seconds",
    "Wall time a round spent in each state, by task.",
    ["task", "state"],
    buckets=PHASE_BUCKETS,
)
GENERALIZATION_ERROR = Gauge(
    "mots_generalization_error",
    "Test loss ε of the task's latest round's model by source: predicted (the quote's ε(K*), "
    "Eq. 3), training (the engine's ε so far, after each FedAvg round), measured (the evaluation "
    "service).",
    ["task", "source"],
)
SUPERNODES = Gauge(
    "mots_supernodes_connected",
    "SuperNodes of the federation per client type of a task, before and after each training of "
    "it: alive processes of the local federation, registered nodes of an external SuperLink.",
    ["task", "type"],
)
ROUNDS = Counter(
    "mots_rounds_total",
    "Rounds that reached a terminal state, by task and state.",
    ["task", "state"],
)
ROUNDS_REDRIVEN = Counter(
    "mots_rounds_redriven_total",
    "Rounds the reconciler re-drove because their state outlived its deadline, by task and state.",
    ["task", "state"],
)
PARTICIPANT_VERIFICATIONS = Counter(
    "mots_participant_verifications_total",
    "Participants of finished rounds by task and training outcome: verified, dropped (left or "
    "went silent) or failed_verification (an update refused by the round's verification).",
    ["task", "outcome"],
)
ROUND_STEP_RETRIES = Counter(
    "mots_round_step_retries_total",
    "Round steps run again because a service call got no answer (a lost task), by task and state.",
    ["task", "state"],
)
ERROR_MODEL = Gauge(
    "mots_error_model_parameter",
    "The evaluation service's current estimate of an Eq. 3 parameter for a task (the "
    "posterior's point estimate).",
    ["task", "parameter"],
)
PRICING_REQUESTS = Counter(
    "mots_pricing_requests_total", "Pricing computations, by kind and outcome.", ["kind", "outcome"]
)
PRICING_DURATION = Histogram(
    "mots_pricing_duration_seconds",
    "Time to compute SWAN's terms for one request.",
    ["kind"],
    buckets=(0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0),
)
TASKS = Counter(
    "mots_tasks_total",
    "Celery tasks run, by service, Celery task (``celery_task``, not a market task) and outcome.",
    ["service", "celery_task", "outcome"],
)

# The latest round's figures per task: labelled, so they export nothing until a round of the task
# sets them (a process that never settles a round exports none of them).
SOCIAL_WELFARE = Gauge(
    "mots_social_welfare", "W_MoTS(K, B) of the task's latest round (Eq. 5).", ["task"]
)
INCENTIVE_COST = Gauge(
    "mots_incentive_cost",
    "Platform incentive cost of the task's latest round: the subsidy [Σ K_i r_i − Σ B_i p]⁺ "
    "booked (the additional incentive cost that follows Eq. 4).",
    ["task"],
)
MODEL_PRICE = Gauge("mots_model_price", "Model price p of the task's latest round.", ["task"])
ROUND_DURATION = Histogram(
    "mots_round_duration_seconds",
    "Wall time of a market round from open to its terminal state, by task.",
    ["task"],
    buckets=ROUND_BUCKETS,
)
ROUND_WAITING = Histogram(
    "mots_round_waiting_seconds",
    "Time a round spent waiting for clients (collecting their decisions), per finished round, "
    "by task.",
    ["task"],
    buckets=ROUND_BUCKETS,
)
ROUND_PLATFORM = Histogram(
    "mots_round_platform_seconds",
    "The platform's own time in a round (outside training, evaluation and waiting for "
    "clients), per finished round, by task.",
    ["task"],
    buckets=PHASE_BUCKETS,
)
PLATFORM_OVERHEAD_RATIO = Gauge(
    "mots_platform_overhead_ratio",
    "The task's latest round's platform seconds / (round seconds − seconds waiting for clients).",
    ["task"],
)
TRAINING_FEDAVG_ROUND = Gauge(
    "mots_training_fedavg_round",
    "FedAvg round r the task's latest training has reached (1-based; equal to R once it is done).",
    ["task"],
)
TRAINING_FEDAVG_ROUNDS = Gauge(
    "mots_training_fedavg_rounds", "FedAvg rounds R of the task's latest training.", ["task"]
)
ROUND_SUBSIDY = Counter(
    "mots_round_subsidy",
    "Subsidy the platform paid into settled rounds' pools, in currency units, by task.",
    ["task"],
)
LATEST_ROUND_SUBSIDY = Gauge(
    "mots_latest_round_subsidy",
    "Subsidy of the task's latest settled round, in currency units (at most its budget).",
    ["task"],
)
ROUND_SUBSIDY_BUDGET = Gauge(
    "mots_round_subsidy_budget",
    "Subsidy budget of the task's latest settled round, in currency units "
    "(MOTS_ROUND_SUBSIDY_BUDGET or the round's own).",
    ["task"],
)
ROUND_SUBSIDY_ALERT_SHARE = Gauge(
    "mots_round_subsidy_alert_share",
    "Share of its budget a round's subsidy may use before an alert (MOTS_SUBSIDY_ALERT_SHARE), "
    "beside each task's latest subsidy so that the rule compares the two by task.",
    ["task"],
)
EVALUATIONS = Counter("mots_evaluations_total", "Models evaluated, by task.", ["task"])

PURCHASES = Counter(
    "mots_purchases_total",
    "Model purchases booked, by task (the round's; one batch may book several tasks').",
    ["task"],
)


class HttpMetricsMiddleware:
    """Plain ASGI middleware counting and timing each HTTP request by route template.

    Not Starlette's ``BaseHTTPMiddleware``: that one runs the app in a task group and re-streams
    the response, which cost as much as a whole request of the market's hot path.
    """

    def __init__(self, app: Any, service: str) -> None:
        self.app = app
        self.service = service

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def send_and_note(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_and_note)
        finally:
            template = getattr(scope.get("route"), "path", "unmatched")
            method = scope.get("method", "")
            HTTP_REQUESTS.labels(self.service, method, template, str(status)).inc()
            HTTP_DURATION.labels(self.service, method, template).observe(
                time.perf_counter() - start
            )


def declare_routes(app: Any, service: str, document: dict[str, Any] | None = None) -> None:
    """Export each route's request counter at 0, for every status its OpenAPI document says it
    answers (its success, the refusals it documents or implies) and 500 (any route can fail),
    and its latency histogram, before its first request: ``rate()`` and ``increase()`` count
    only what moves after a series exists, so a route's first 404 or 500 would go unseen.

    The routes come from ``document``, the app's completed OpenAPI document (FastAPI 0.138
    keeps an included router's routes out of ``app.routes``), then the plain routes it leaves
    out; None builds one now (not ``app.openapi()``, which would cache a document that lacks
    routes added later).
    """
    from fastapi.openapi.utils import get_openapi
    from fastapi.routing import APIRoute

    from mots.platform.problems import complete_problem_docs

    if document is None:
        document = complete_problem_docs(
            get_openapi(title=app.title, version=app.version, routes=app.routes)
        )
    paths: dict[str, Any] = document.get("paths", {})
    declared: list[tuple[str, str, set[str]]] = []
    for path, item in paths.items():  # included routers' routes too (not all in app.routes)
        for method, operation in item.items():
            if isinstance(operation, dict) and "responses" in operation:
                codes = {code for code in operation["responses"] if code.isdigit()}
                declared.append((method.upper(), path, codes))
    for route in app.routes:  # routes left out of the document (/metrics, /docs)
        if isinstance(route, APIRoute) and route.path_format not in paths:
            for method in route.methods or ():
                declared.append((method, route.path, {str(route.status_code or 200)}))
    for method, path, codes in declared:
        for status in sorted(codes | {"500"}):
            HTTP_REQUESTS.labels(service, method, path, status)
        HTTP_DURATION.labels(service, method, path)


def install_http_metrics(
    app: object, service: str, route: bool = True, declare: bool = True
) -> None:
    """Add request counting and timing middleware to a FastAPI app and, with ``route``, a
    ``/metrics`` route on its own port (without: the registry is served on MOTS_METRICS_PORT).
    With ``declare``, export its routes' series now (:func:`declare_routes`); without, the
    caller declares them once its routes and OpenAPI document are complete."""
    from fastapi import FastAPI

    assert isinstance(app, FastAPI)
    app.add_middleware(HttpMetricsMiddleware, service=service)
    if not route:
        if declare:
            declare_routes(app, service)
        return

    @app.get("/metrics", include_in_schema=False)
    def metrics() -> Response:
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    if declare:
        declare_routes(app, service)


def serve_worker_metrics(port: int, host: str | None = None) -> WSGIServer | None:
    """Expose this process's registry on ``host:port`` (port 0: do nothing); the server started.

    ``host`` None reads ``MOTS_METRICS_HOST`` through :class:`PlatformSettings` (default 127.0.0.1);
    a deployment sets 0.0.0.0 so that Prometheus can scrape the worker from another container.
    """
    if not port:
        return None
    if host is None:
        from mots.platform.settings import PlatformSettings

        host = PlatformSettings().metrics_host
    server, _ = start_http_server(port, addr=host)
    return server
