"""The 401/403 matrix over every route of the market, pricing and orchestration APIs (issue 13);
here, beside the market's fixtures, as the client tokens it checks are the market's.

The routes are read from each app (the same list its OpenAPI document has), so a new route cannot
escape: a route is public only if listed in :data:`PUBLIC`; an operator route (one that depends on
:func:`mots.platform.deps.operator`) answers 403 to a valid client token; every other route
answers a valid client token with anything but 401/403 for lack of credentials. Without a token,
with a malformed, forged or expired token, every non-public route answers 401.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from mots.platform import tokens
from mots.platform.deps import operator
from mots.platform.settings import DEV_TOKEN_SECRET
from services.orchestration.core.config import Settings as OrchestrationSettings
from services.orchestration.main import create_app as orchestration_app
from services.orchestration.migrations import upgrade as orchestration_upgrade
from services.pricing.main import create_app as pricing_app
from tests.services.market.conftest import OPERATOR

PUBLIC = {
    ("GET", "/healthz"),
    ("GET", "/metrics"),
    ("GET", "/docs"),
    ("GET", "/docs/oauth2-redirect"),
    ("GET", "/redoc"),
    ("GET", "/openapi.json"),
    ("POST", "/v1/clients/1/token/challenge"),
    ("GET", "/.well-known/mots-model-key"),
    ("GET", "/v1/platform"),
}
"""Routes anyone may call: liveness, Prometheus' scrape (reachable only by Prometheus in k8s and
compose), the API's own description (no data), a token-renewal challenge (random, bound to the
client id, worth nothing without the client's node key), the public half of the market's
model-signing key (issue 40: buyers check a model's origin with it) and where the round API is
(issue 40: a client holding only the market's URL finds it; the URL is no secret)."""

KEY_PROOF = {("POST", "/v1/clients/1/token/node-key")}
"""Routes a token does not open: only the client's registered node key (its signature over a
renewal challenge) does; without that proof every caller, whatever its token, gets 401."""

BODIES: dict[tuple[str, str], Any] = {
    ("POST", "/v1/clients"): {"name": "x", "type_name": "t", "data_size": 1, "cost": "1"},
    ("POST", "/v1/clients/1/token/node-key"): {"challenge": "nkr.1.1.x.y", "signature": "z"},
}
"""Valid bodies where a route's authorisation depends on what the body says."""

OPERATOR_BY_BODY = {("POST", "/v1/clients")}
"""Operator routes for the body sent (registering without an enrolment code), though anyone
holding a code may call them."""

HEADERS = {"Idempotency-Key": "matrix-key-0001"}


def _needs_operator(route: APIRoute) -> bool:
    stack = list(route.dependant.dependencies)
    while stack:
        d = stack.pop()
        if d.call is operator:
            return True
        stack.extend(d.dependencies)
    return False


def _api_routes(routes: list[Any]) -> Iterator[APIRoute]:
    """Every APIRoute, also inside included routers (FastAPI keeps those as their own nodes)."""
    for route in routes:
        if isinstance(route, APIRoute):
            yield route
        elif hasattr(route, "original_router"):
            yield from _api_routes(route.original_router.routes)


def _routes(app: FastAPI) -> list[tuple[str, str, bool]]:
    """(method, path with ids filled in, operator route?) for every route of the app; every
    operation of its OpenAPI document is among them."""
    out, seen = [], set()
    for route in _api_routes(app.routes):
        path = route.path
        for name in route.param_convertors:
            path = path.replace("{" + name + "}", "1")
        for method in sorted(route.methods - {"HEAD"}):
            out.append((method, path, _needs_operator(route)))
            seen.add((method, route.path))
    documented = {
        (m.upper(), p)
        for p, ops in app.openapi()["paths"].items()
        for m in ops
        if m != "parameters"
    }
    assert documented <= seen, documented - seen
    return out


def _call(client: TestClient, method: str, path: str, auth: dict[str, str]) -> int:
    body = BODIES.get((method, path), {} if method in ("POST", "PUT") else None)
    r = client.request(method, path, json=body, headers={**HEADERS, **auth})
    return r.status_code


def _bad_tokens(client_id: int) -> dict[str, dict[str, str]]:
    now = int(time.time())
    return {
        "none": {},
        "malformed": {"Authorization": "Bearer not-a-token"},
        "other scheme": {"Authorization": f"Basic {OPERATOR['Authorization'][7:]}"},
        "forged": {"Authorization": f"Bearer {tokens.sign(client_id, now + 600, 'guess')}"},
        "expired": {"Authorization": f"Bearer {tokens.sign(client_id, now - 1, DEV_TOKEN_SECRET)}"},
    }


def _check_matrix(
    client: TestClient, app: FastAPI, client_auth: Callable[[], dict[str, str]]
) -> int:
    """Assert the matrix for every route of ``app``; the number of routes checked.
    ``client_auth`` gives a valid client's header (a fresh client per route where routes change
    the caller: leaving, revoking its token)."""
    routes = _routes(app)
    for method, path, needs_operator in routes:
        if (method, path) in PUBLIC:
            assert _call(client, method, path, {}) == 200, (method, path)
            continue
        if (method, path) in KEY_PROOF:
            for what, auth in {**_bad_tokens(1), "client token": client_auth()}.items():
                assert _call(client, method, path, auth) == 401, (method, path, what)
            continue
        for what, auth in _bad_tokens(1).items():
            got = _call(client, method, path, auth)
            assert got == 401, (method, path, what, got)
        got = _call(client, method, path, client_auth())
        if needs_operator or (method, path) in OPERATOR_BY_BODY:
            assert got == 403, (method, path, "client token", got)
        else:
            assert got not in (401, 403), (method, path, "client token", got)
    return len(routes)


@pytest.fixture
def orchestration(tmp_path: Path) -> Iterator[tuple[TestClient, FastAPI]]:
    url = f"sqlite:///{tmp_path / 'orchestration.db'}"
    orchestration_upgrade(url)
    app = orchestration_app(
        OrchestrationSettings(database_url=url, redis_key_prefix=f"matrix-{id(tmp_path)}:")
    )
    with TestClient(app) as c:
        yield c, app


def test_the_market_matrix(market: TestClient, register) -> None:
    """Every market route: 401 without a valid token, 403 for a client on an operator route."""
    names = iter(range(1000))
    checked = _check_matrix(market, market.app, lambda: register(name=f"m{next(names)}")["auth"])
    assert checked >= 20


def test_the_pricing_matrix(market: TestClient, register) -> None:
    """Pricing verifies the market's signed client tokens without a database: quotes are for
    registered clients and the operator, not for anyone."""
    client = register(name="pricing-reader")
    app = pricing_app()
    with TestClient(app) as pricing:
        assert _check_matrix(pricing, app, lambda: client["auth"]) >= 3
        r = pricing.get("/v1/mechanisms", headers=OPERATOR)
        assert r.status_code == 200 and "swan" in r.json()["items"]


def test_the_orchestration_matrix(
    orchestration: tuple[TestClient, FastAPI], market: TestClient, register
) -> None:
    """Orchestration: starting a round is the operator's (403 for a client); reading rounds needs
    a valid token."""
    client = register(name="orchestration-reader")
    http, app = orchestration
    assert _check_matrix(http, app, lambda: client["auth"]) >= 3
