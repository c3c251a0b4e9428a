"""Fuzzing every operation of the market, pricing and orchestration OpenAPI schemas: no 5xx.

The apps run in process (ASGI) on a fresh SQLite database and the real Redis; requests carry a
registered client's token (the operator's for the orchestration API) so that generated cases
reach the handlers, not only the auth check.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import hypothesis
import pytest
import schemathesis
from schemathesis.checks import not_a_server_error

from mots.platform.settings import DEV_OPERATOR_TOKEN
from services.market.core.config import Settings as MarketSettings
from services.market.main import create_app as market_app
from services.market.migrations import upgrade as market_upgrade
from services.orchestration.core.config import Settings as OrchestrationSettings
from services.orchestration.main import create_app as orchestration_app
from services.orchestration.migrations import upgrade as orchestration_upgrade
from services.pricing.core.config import Settings as PricingSettings
from services.pricing.main import create_app as pricing_app

pytestmark = pytest.mark.integration
_DIR = Path(tempfile.mkdtemp(prefix="mots-fuzz-"))
_PREFIX = "mots-fuzz:"
_MARKET_DB = f"sqlite:///{_DIR / 'market.db'}"
_ORCH_DB = f"sqlite:///{_DIR / 'orchestration.db'}"
market_upgrade(_MARKET_DB)
orchestration_upgrade(_ORCH_DB)

MARKET = market_app(
    MarketSettings(database_url=_MARKET_DB, redis_key_prefix=_PREFIX, artifact_dir=str(_DIR))
)
PRICING = pricing_app(PricingSettings(max_types=8))
ORCHESTRATION = orchestration_app(
    OrchestrationSettings(database_url=_ORCH_DB, redis_key_prefix=_PREFIX)
)
market_schema = schemathesis.openapi.from_asgi("/openapi.json", MARKET)
pricing_schema = schemathesis.openapi.from_asgi("/openapi.json", PRICING)
orchestration_schema = schemathesis.openapi.from_asgi("/openapi.json", ORCHESTRATION)
FUZZ = hypothesis.settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=list(hypothesis.HealthCheck),
    derandomize=True,
)


@pytest.fixture(scope="module")
def client_token() -> str:
    """A registered market client's token."""
    from fastapi.testclient import TestClient

    with TestClient(MARKET) as c:
        r = c.post(
            "/v1/clients",
            json={"name": "fuzzer", "type_name": "t", "data_size": 50, "cost": "1"},
            headers={"Authorization": f"Bearer {DEV_OPERATOR_TOKEN}"},
        )
        token: str = r.json()["token"]
        return token


@market_schema.parametrize()
@FUZZ
def test_market_never_5xx(case: schemathesis.Case, client_token: str) -> None:
    """Generated requests to the market get a 2xx/4xx, never a server error."""
    case.headers = {**(case.headers or {}), "Authorization": f"Bearer {client_token}"}
    case.call_and_validate(checks=[not_a_server_error])


@pricing_schema.parametrize()
@FUZZ
def test_pricing_never_5xx(case: schemathesis.Case) -> None:
    """Generated scenarios and what-if queries get a 2xx/4xx, never a server error."""
    case.headers = {**(case.headers or {}), "Authorization": f"Bearer {DEV_OPERATOR_TOKEN}"}
    case.call_and_validate(checks=[not_a_server_error])


@orchestration_schema.parametrize()
@FUZZ
def test_orchestration_never_5xx(case: schemathesis.Case) -> None:
    """Generated requests to the orchestration API get a 2xx/4xx, never a server error."""
    case.headers = {**(case.headers or {}), "Authorization": f"Bearer {DEV_OPERATOR_TOKEN}"}
    case.call_and_validate(checks=[not_a_server_error])


# ---------------------------------------------- non-finite numbers in generated requests

NON_FINITE = (float("nan"), float("inf"), float("-inf"))


def _spoil(value: object, bad: float) -> tuple[object, int]:
    """``value`` with every number (not bool) replaced by ``bad``; how many were replaced. A body
    without numbers gets one extra numeric field, so every body carries a non-finite number."""
    if isinstance(value, bool):
        return value, 0
    if isinstance(value, int | float):
        return bad, 1
    if isinstance(value, list):
        parts = [_spoil(v, bad) for v in value]
        return [p for p, _ in parts], sum(n for _, n in parts)
    if isinstance(value, dict):
        items = {k: _spoil(v, bad) for k, v in value.items()}
        return {k: p for k, (p, _) in items.items()}, sum(n for _, n in items.values())
    return value, 0


def _non_finite_call(app: object, case: schemathesis.Case, headers: dict[str, str]) -> None:
    """Send the generated request with each non-finite number in its JSON body (or its numeric
    query values as "NaN"/"Infinity"): a 4xx problem, never a 5xx and never a 2xx."""
    import json

    from fastapi.testclient import TestClient

    body = case.body if isinstance(case.body, dict | list) else None
    query = dict(case.query or {})
    numeric = [
        k for k, v in query.items() if isinstance(v, int | float) and not isinstance(v, bool)
    ]
    if body is None and not numeric:
        return  # nothing numeric to spoil in this request
    with TestClient(app, raise_server_exceptions=False) as client:  # type: ignore[arg-type]
        for bad in NON_FINITE:
            content = None
            if body is not None:
                spoilt, n = _spoil(body, bad)
                if n == 0 and isinstance(spoilt, dict):
                    spoilt = {**spoilt, "spoilt": bad}
                elif n == 0:
                    spoilt = [*spoilt, bad]  # type: ignore[misc]
                content = json.dumps(spoilt, allow_nan=True)
            params = {**query, **{k: str(bad).replace("inf", "Infinity") for k in numeric}}
            r = client.request(
                case.method,
                case.formatted_path,
                params=params,
                content=content,
                headers={**headers, "Content-Type": "application/json"},
            )
            assert r.status_code < 500, (case.method, case.formatted_path, content, r.text)
            if content is not None:  # a JSON body with NaN/Infinity is never accepted
                assert 400 <= r.status_code < 500, (case.method, case.formatted_path, r.text)
                assert r.headers["content-type"].startswith("application/problem+json")


@market_schema.parametrize()
@FUZZ
def test_market_refuses_non_finite_numbers(case: schemathesis.Case, client_token: str) -> None:
    """Every market route with NaN/±Infinity in its generated body or numeric query: 4xx."""
    _non_finite_call(MARKET, case, {"Authorization": f"Bearer {client_token}"})


@pricing_schema.parametrize()
@FUZZ
def test_pricing_refuses_non_finite_numbers(case: schemathesis.Case) -> None:
    """Every pricing route with NaN/±Infinity in its generated body or numeric query: 4xx."""
    _non_finite_call(PRICING, case, {"Authorization": f"Bearer {DEV_OPERATOR_TOKEN}"})


@orchestration_schema.parametrize()
@FUZZ
def test_orchestration_refuses_non_finite_numbers(case: schemathesis.Case) -> None:
    """Every orchestration route with NaN/±Infinity in its generated body or numeric query: 4xx."""
    _non_finite_call(ORCHESTRATION, case, {"Authorization": f"Bearer {DEV_OPERATOR_TOKEN}"})


# ------------------------------- nested, duplicated and oversized bodies on every route (issue 24)


def _operations(app: object) -> list[tuple[str, str]]:
    """(method, path with every id 1) of every operation of an app's OpenAPI document."""
    import re

    from fastapi.testclient import TestClient

    with TestClient(app) as client:  # type: ignore[arg-type]
        doc = client.get("/openapi.json").json()
    return [
        (method.upper(), re.sub(r"\{[^}]+\}", "1", path))
        for path, ops in doc["paths"].items()
        for method in ops
    ]


APPS = {"market": MARKET, "pricing": PRICING, "orchestration": ORCHESTRATION}
EVERY_ROUTE = [(name, m, p) for name, app in APPS.items() for m, p in _operations(app)]


def _auth(service: str, client_token: str) -> dict[str, str]:
    token = client_token if service == "market" else DEV_OPERATOR_TOKEN
    return {"Authorization": f"Bearer {token}"}


def _hostile_bodies(depth: int) -> list[bytes]:
    return [
        b"[" * depth + b"]" * depth,
        b'{"a":' * depth + b"1" + b"}" * depth,
        b'{"client_id": 1, "amount": "1", "amount": "1000"}',
        b'{"name": "a", "name": "b", "nested": {"k": 1, "k": 2}}',
    ]


@pytest.mark.parametrize(("service", "method", "path"), EVERY_ROUTE)
@FUZZ
@hypothesis.given(depth=hypothesis.strategies.integers(33, 20_000))
def test_nested_and_duplicated_bodies_never_5xx(
    service: str, method: str, path: str, depth: int, client_token: str
) -> None:
    """Every route of every service, with bodies nested beyond the limit (to 20,000 levels) and
    with keys given twice: never a 5xx; a route that takes a body answers 422 problem+json."""
    from fastapi.testclient import TestClient

    headers = {**_auth(service, client_token), "Content-Type": "application/json"}
    with TestClient(APPS[service], raise_server_exceptions=False) as client:  # type: ignore[arg-type]
        for body in _hostile_bodies(depth):
            r = client.request(method, path, content=body, headers=headers)
            assert r.status_code < 500, (service, method, path, body[:60], r.text)
            if method in ("POST", "PUT", "PATCH"):
                assert r.status_code == 422, (service, method, path, body[:60], r.text)
                assert r.headers["content-type"].startswith("application/problem+json")


def _asgi_call(
    app: object, method: str, path: str, headers: list[tuple[bytes, bytes]]
) -> tuple[int, int]:
    """Call ``app`` with a body of 64 KiB chunks that never ends: (status, bytes it took)."""
    import asyncio

    taken = [0]
    status: list[int] = []

    async def receive() -> dict[str, object]:
        taken[0] += 65536
        return {"type": "http.request", "body": b"x" * 65536, "more_body": True}

    async def send(message: dict[str, object]) -> None:
        if message["type"] == "http.response.start":
            status.append(int(message["status"]))  # type: ignore[call-overload]

    scope = {"type": "http", "method": method, "path": path, "raw_path": path.encode(),
             "headers": headers, "query_string": b"", "http_version": "1.1", "scheme": "http",
             "root_path": "", "server": ("test", 80), "client": ("fuzz", 1)}  # fmt: skip
    asyncio.run(asyncio.wait_for(app(scope, receive, send), 10))  # type: ignore[operator]
    return status[0], taken[0]


@pytest.mark.parametrize(("service", "method", "path"), EVERY_ROUTE)
@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "application/octet-stream"]
)
def test_oversized_bodies_of_every_type_are_413_in_bounded_memory(
    service: str, method: str, path: str, content_type: str, client_token: str
) -> None:
    """50 MB announced (Content-Length): 413 before a byte is read; a chunked body that never
    ends (on the routes that take one): 413 once past the cap, the service having taken at most
    the cap and one chunk, and its memory peak bounded (tracemalloc, under 8 MiB)."""
    import tracemalloc

    from mots.platform.problems import MAX_BODY_BYTES

    auth = [(b"authorization", _auth(service, client_token)["Authorization"].encode())]
    typed = [*auth, (b"content-type", content_type.encode())]
    status, taken = _asgi_call(APPS[service], method, path, [*typed, (b"content-length", b"5e7")])
    assert status < 500
    status, taken = _asgi_call(
        APPS[service], method, path, [*typed, (b"content-length", b"50000000")]
    )
    assert (status, taken) == (413, 0), (service, method, path)
    if method not in ("POST", "PUT", "PATCH", "DELETE"):
        return
    tracemalloc.start()
    try:
        status, taken = _asgi_call(APPS[service], method, path, typed)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert status == 413, (service, method, path, status)
    assert taken <= MAX_BODY_BYTES + 65536 and peak < 8 << 20, (taken, peak)
