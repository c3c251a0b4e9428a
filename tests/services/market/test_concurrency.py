"""Real concurrent requests against a running market server (uvicorn) on SQLite and PostgreSQL."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from typing import Any

import httpx
import pytest

from mots.local.launcher import Stack
from mots.platform.db import in_transaction, make_engine, make_sessionmaker
from services.market import rounds
from tests.services.conftest import _create_pg_database, _drop_pg_database
from tests.services.market.conftest import OPERATOR, open_round_payload

pytestmark = pytest.mark.integration
THREADS = 32


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def server(
    request: pytest.FixtureRequest, redis_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Any]]:
    """A market API process (and its worker) on each database, shared by this module's tests."""
    tmp_path = tmp_path_factory.mktemp("market-server")
    pg_name = None
    if request.param == "sqlite":
        database_url = f"sqlite:///{tmp_path / 'market.db'}"
    else:
        pg_name = _create_pg_database()
        database_url = f"postgresql+psycopg://postgres@127.0.0.1:5432/{pg_name}"
    stack = Stack(
        workdir=tmp_path / "stack", redis_url=redis_url, database_urls={"market": database_url}
    )
    stack.start(services=("market",), timeout_s=90)
    engine = make_engine(database_url)
    try:
        yield stack.url("market"), make_sessionmaker(engine)
    finally:
        stack.stop()
        engine.dispose()
        if pg_name is not None:
            _drop_pg_database(pg_name)


def _register(http: httpx.Client, n: int) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        r = http.post(
            "/v1/clients",
            json={"name": f"c{i}", "type_name": "small", "data_size": 50, "cost": "0.5"},
            headers=OPERATOR,
        )
        assert r.status_code == 201, r.text
        out.append(r.json())
    return out


def _fund(http: httpx.Client, client_id: int, amount: str, key: str) -> httpx.Response:
    return http.post(
        "/v1/deposits",
        json={"client_id": client_id, "amount": amount},
        headers={**OPERATOR, "Idempotency-Key": key},
    )


def _parallel(
    url: str, calls: list[tuple[str, dict[str, Any], dict[str, str]]]
) -> list[httpx.Response]:
    def one(call: tuple[str, dict[str, Any], dict[str, str]]) -> httpx.Response:
        path, body, headers = call
        with httpx.Client(base_url=url, timeout=60) as http:
            return http.post(path, json=body, headers=headers)

    with ThreadPoolExecutor(THREADS) as pool:
        return list(pool.map(one, calls))


def _check(http: httpx.Client) -> dict[str, Any]:
    check: dict[str, Any] = http.get("/v1/ledger/check", headers=OPERATOR).json()
    assert check["unbalanced_transactions"] == 0
    assert check["mismatched_accounts"] == 0
    assert Decimal(check["total"]) == 0
    return check


def test_concurrent_purchases_never_double_spend(server: tuple[str, Any]) -> None:
    """32 buyers at once all succeed; one buyer racing itself pays once; one key books once."""
    url, sessions = server
    with httpx.Client(base_url=url, timeout=60) as http:
        clients = _register(http, THREADS + 2)
        for c in clients:
            assert _fund(http, c["id"], "2.5", f"fund-{c['id']:06d}").status_code == 201
        in_transaction(sessions, lambda s: rounds.open_round(s, open_round_payload(price="2.5")))
        buyers, racer, keyed = clients[:THREADS], clients[THREADS], clients[THREADS + 1]

        many = _parallel(
            url,
            [
                (
                    "/v1/purchases",
                    {"round_id": 1},
                    {
                        "Authorization": f"Bearer {c['token']}",
                        "Idempotency-Key": f"buy-{c['id']:06d}",
                    },
                )
                for c in buyers
            ],
        )
        assert Counter(r.status_code for r in many) == {201: THREADS}

        auth = {"Authorization": f"Bearer {racer['token']}"}
        race = _parallel(
            url,
            [
                ("/v1/purchases", {"round_id": 1}, {**auth, "Idempotency-Key": f"race-{i:04d}"})
                for i in range(16)
            ],
        )
        codes = Counter(r.status_code for r in race)
        assert codes[201] == 1 and codes[409] == 15, codes

        auth = {"Authorization": f"Bearer {keyed['token']}"}
        same = _parallel(
            url,
            [
                ("/v1/purchases", {"round_id": 1}, {**auth, "Idempotency-Key": "one-key-0001"})
                for _ in range(16)
            ],
        )
        assert {r.status_code for r in same} == {201}, [
            r.text for r in same if r.status_code != 201
        ]
        assert len({r.text for r in same}) == 1

        check = _check(http)
        assert Decimal(check["accounts"]["round_pools"]) == Decimal("2.5") * (THREADS + 2)
        assert Decimal(check["accounts"]["wallets"]) == 0
        assert check["transactions"] == 2 * (THREADS + 2)


def test_concurrent_deposits_lose_no_update(server: tuple[str, Any]) -> None:
    """32 deposits into one wallet at once: the balance is their exact sum."""
    url, _ = server
    with httpx.Client(base_url=url, timeout=60) as http:
        (c,) = _register(http, 1)
        calls = [
            (
                "/v1/deposits",
                {"client_id": c["id"], "amount": "0.000001"},
                {**OPERATOR, "Idempotency-Key": f"dep-{i:05d}"},
            )
            for i in range(THREADS * 2)
        ]
        assert {r.status_code for r in _parallel(url, calls)} == {201}
        bal = http.get("/v1/me/balance", headers={"Authorization": f"Bearer {c['token']}"}).json()
        assert Decimal(bal["balance"]) == Decimal("0.000064")
        _check(http)
