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
    MarketSettings(database_url=_MARKET_DB, redis_key_prefix=_PREFIX, artifact_root=str(_DIR))
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
