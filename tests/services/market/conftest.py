"""Fixtures of the market's tests: an in-process app on a real database, clients and a round."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from mots.platform.contracts import OpenRoundPayload
from mots.platform.db import in_transaction
from services.market import rounds
from services.market.core.config import Settings
from services.market.main import create_app

OPERATOR = {"Authorization": "Bearer dev-operator-token"}


def open_round_payload(
    round_id: int = 1,
    price: str = "2.5",
    rewards: dict[str, str] | None = None,
    subsidy_budget: str | None = None,
    bonds: dict[str, str] | None = None,
) -> OpenRoundPayload:
    """A quote as the orchestration service would publish it."""
    rewards = rewards or {"small": "-1.25", "large": "4.0"}
    return OpenRoundPayload(
        round_id=round_id,
        mechanism="swan_robust",
        price=Decimal(price),
        rewards={k: Decimal(v) for k, v in rewards.items()},
        target_participants={k: 1 for k in rewards},
        target_buyers={k: 1 for k in rewards},
        epsilon=0.6,
        welfare=10.0,
        incentive_cost=Decimal(0),
        subsidy_budget=None if subsidy_budget is None else Decimal(subsidy_budget),
        bonds={k: Decimal(v) for k, v in (bonds or {}).items()},
    )


_PRICINGS = itertools.count(1_000_000)
"""Round ids no test opens, one per :func:`priced_population` call."""


def priced_population(market: TestClient) -> dict[str, list[int]]:
    """The clients a round priced now would have as members, per type: the market's population
    snapshot (``market.population``) for a fresh round id, read back."""
    rid = next(_PRICINGS)
    in_transaction(market.app.state.sessions, lambda s: rounds.population(s, rid))
    with market.app.state.sessions() as session:
        return rounds.members_of(session, rid)


@pytest.fixture
def market(database_url: str, redis_url: str, tmp_path: Any) -> Iterator[TestClient]:
    """The market app (lifespan run: migrations applied) on a fresh database."""
    settings = Settings(
        database_url=database_url,
        redis_url=redis_url,
        redis_key_prefix=f"test-{id(tmp_path)}:",
        artifact_dir=str(tmp_path),
    )
    with TestClient(create_app(settings)) as client:
        yield client

    r = redis.Redis.from_url(redis_url)
    for key in r.scan_iter(f"{settings.redis_key_prefix}*"):
        r.delete(key)


@pytest.fixture
def register(market: TestClient) -> Callable[..., dict[str, Any]]:
    """Register a client as the operator (who attests its type) and return its record with an
    ``auth`` header dict."""

    def _register(
        name: str = "c", type_name: str = "small", data_size: int = 50, cost: str = "0.5"
    ) -> dict[str, Any]:
        r = market.post(
            "/v1/clients",
            json={"name": name, "type_name": type_name, "data_size": data_size, "cost": cost},
            headers=OPERATOR,  # the operator attests the type (tests/services/market/test_attested)
        )
        assert r.status_code == 201, r.text
        body: dict[str, Any] = r.json()
        body["auth"] = {"Authorization": f"Bearer {body['token']}"}
        return body

    return _register


@pytest.fixture
def fund(market: TestClient) -> Callable[[int, str], None]:
    """Deposit money into a client's wallet (as the operator)."""
    counter = iter(range(1_000_000))

    def _fund(client_id: int, amount: str) -> None:
        r = market.post(
            "/v1/deposits",
            json={"client_id": client_id, "amount": amount},
            headers={**OPERATOR, "Idempotency-Key": f"fund-{client_id}-{next(counter)}"},
        )
        assert r.status_code == 201, r.text

    return _fund


@pytest.fixture
def open_round(market: TestClient) -> Callable[..., None]:
    """Open a round at the market the way the market worker's task does."""

    def _open(**kwargs: Any) -> None:
        payload = open_round_payload(**kwargs)
        in_transaction(market.app.state.sessions, lambda s: rounds.open_round(s, payload))

    return _open


@pytest.fixture
def make_market(database_url: str, redis_url: str, tmp_path: Any) -> Iterator[Callable[..., Any]]:
    """A factory of market apps with chosen settings (each on the test's fresh database)."""
    prefixes: list[str] = []

    @contextmanager
    def _make(**overrides: Any) -> Iterator[TestClient]:
        prefix = f"test-attested-{id(tmp_path)}-{len(prefixes)}:"
        prefixes.append(prefix)
        settings = Settings(
            database_url=database_url,
            redis_url=redis_url,
            redis_key_prefix=prefix,
            artifact_dir=str(tmp_path),
            **overrides,
        )
        with TestClient(create_app(settings)) as client:
            yield client

    yield _make
    r = redis.Redis.from_url(redis_url)
    for prefix in prefixes:
        for key in r.scan_iter(f"{prefix}*"):
            r.delete(key)


def node_key_body(
    market: TestClient, auth: dict[str, str], private_key: Path, public_key: str
) -> dict[str, str]:
    """A PUT /v1/me/node-key body: the key with its proof of possession (the caller's challenge
    signed with ``private_key``)."""
    from mots.platform.node_proof import sign_challenge

    r = market.post("/v1/me/node-key/challenge", headers=auth)
    assert r.status_code == 200, r.text
    challenge = r.json()["challenge"]
    return {
        "public_key": public_key,
        "challenge": challenge,
        "signature": sign_challenge(private_key, challenge),
    }
