"""Issue 37's rows of ``make bench-integrity`` on the market's money and the evaluation service's
error model, each tried twice on SQLite and twice on PostgreSQL (a fresh database per try), in
process against the real apps: the market's FastAPI app through Starlette's test client on real
Redis, the evaluation worker's Celery handlers on their own database.

- ``type_added_between_rounds``: eight rounds, a client type added before each (its own D), each
  measured by the evaluation worker (the loss of Eq. 3 at the round's coalition: no model is
  trained here) and published. Caught when every round is evaluated and counted (the refit and
  the posterior over histories of 3 to 10 types never fail).
- ``money_overflow``: 999 bulk wallets of 10^9, then one more deposit of 10^9 (it would take
  ``external:deposits`` to 10^12, past ``MAX_BALANCE_MICROS``) and a bulk of 10,000 × 10^9.
  Caught when both are refused with a 422 that names the limit and the ledger check and the
  accounts still answer 200 with the ledger balanced; ``paid`` is what an accepted one moved.
- ``id_overflow``: ids past int32 and int64 in queries and paths (``round_id=2147483648`` of the
  transactions, a client, a round's model). Caught when each is a 422.
- ``debt_model``: six clients with empty wallets, their type quoted a fee of 0.25, try to join,
  then to download the model the round publishes. Caught per client when the join is a 402, the
  download a 403 and the wallet ends at 0; ``paid`` sums any debt.

Every row counts the server errors (5xx) it met in ``server_errors``; the target is 0.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.bench_scale import databases
from benchmarks.integrity.suite import SuiteResult

KINDS = ("sqlite", "postgresql")
TRIES = 2
REDIS_URL = os.environ.get("MOTS_BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
BILLION = "1000000000"


class Row:
    """One attack's counts over its tries."""

    def __init__(self) -> None:
        self.tried = self.caught = self.server_errors = 0
        self.paid = Decimal(0)

    def record(self, caught: bool, paid: Decimal = Decimal(0)) -> None:
        """One try: caught or not, and money moved that should not have been."""
        self.tried += 1
        self.caught += int(caught)
        self.paid += paid

    def seen(self, status: int) -> int:
        """Count a 5xx answer; the status, for chaining."""
        self.server_errors += int(status >= 500)
        return status

    def as_dict(self) -> dict[str, Any]:
        """The contract's row."""
        return {
            "tried": self.tried,
            "refused_or_caught": self.caught if self.server_errors == 0 else 0,
            "paid": f"{self.paid.normalize():f}" if self.paid else "0",
            "server_errors": self.server_errors,
        }


@contextmanager
def _database(kind: str, workdir: Path) -> Iterator[str]:
    """A fresh database of ``kind`` for one try."""
    if kind == "sqlite":
        workdir.mkdir(parents=True, exist_ok=True)
        yield f"sqlite:///{workdir / f'{uuid.uuid4().hex[:8]}.db'}"
        return
    with databases("postgresql", ("bench",)) as urls:
        yield urls["bench"]


@contextmanager
def _market(url: str, artifact_dir: Path) -> Iterator[Any]:
    """The market app on ``url`` (migrated at start) through Starlette's test client."""
    import redis
    from fastapi.testclient import TestClient

    from services.market.core.config import Settings
    from services.market.main import create_app

    prefix = f"bench-limits-{uuid.uuid4().hex[:8]}:"
    settings = Settings(
        database_url=url,
        redis_url=REDIS_URL,
        redis_key_prefix=prefix,
        artifact_dir=str(artifact_dir),
    )
    try:
        with TestClient(create_app(settings)) as client:
            yield client
    finally:
        r = redis.Redis.from_url(REDIS_URL)
        for key in r.scan_iter(f"{prefix}*"):
            r.delete(key)


def _operator() -> dict[str, str]:
    from mots.local.keys import process_secrets

    return {"Authorization": f"Bearer {process_secrets().operator_token}"}


def _bulk(count: int, deposit: str) -> dict[str, Any]:
    kind = {
        "type_name": "small",
        "data_size": 50,
        "cost": "0.5",
        "count": count,
        "name_prefix": "b",
    }
    return {"types": [kind], "deposit": deposit}


def money_overflow(market: Any, row: Row) -> None:
    """999 × 10^9 booked, then one more 10^9 and a bulk of 10,000 × 10^9 refused."""
    from mots.platform.money import MAX_BALANCE_MICROS, from_micros

    op, limit = _operator(), f"{from_micros(MAX_BALANCE_MICROS):f}"
    row.seen(market.post("/v1/clients/bulk", json=_bulk(999, BILLION), headers=op).status_code)
    late = market.post(
        "/v1/clients",
        json={"name": "late", "type_name": "small", "data_size": 50, "cost": "0.5"},
        headers=op,
    ).json()
    one = market.post(
        "/v1/deposits",
        json={"client_id": late["id"], "amount": BILLION},
        headers={**op, "Idempotency-Key": f"over-{uuid.uuid4().hex}"},
    )
    bulk = market.post("/v1/clients/bulk", json=_bulk(10_000, BILLION), headers=op)
    check = market.get("/v1/ledger/check", headers=op)
    accounts = market.get("/v1/ledger/accounts?limit=500", headers=op)
    refused = [r.status_code == 422 and limit in r.json()["detail"] for r in (one, bulk)]
    body = check.json() if check.status_code == 200 else {}
    balanced = body.get("unbalanced_transactions") == 0 and Decimal(body.get("total", "1")) == 0
    for r in (one, bulk, check, accounts):
        row.seen(r.status_code)
    paid = Decimal(BILLION) * (int(one.is_success) + 10_000 * int(bulk.is_success))
    row.record(all(refused) and balanced and accounts.status_code == 200, paid)


ID_PATHS = (
    ("GET", "/v1/ledger/transactions?round_id=2147483648", "operator"),
    ("GET", "/v1/ledger/transactions?round_id=9223372036854775808", "operator"),
    ("GET", "/v1/ledger/transactions?round_id=99999999999999999999999", "operator"),
    ("POST", "/v1/clients/2147483648/approve", "operator"),
    ("DELETE", "/v1/clients/9223372036854775808", "operator"),
    ("GET", "/v1/rounds/2147483648/model", "client"),
    ("GET", "/v1/rounds/9223372036854775808/quote", "client"),
    ("PUT", "/v1/rounds/2147483648/decision", "client"),
)
"""(method, path, whose token): an operator route with the operator's, a client route with a
registered client's (a token is checked before the path)."""


def id_overflow(market: Any, row: Row) -> None:
    """Every id past int32 or int64 is a 422."""
    op = _operator()
    client = market.post(
        "/v1/clients",
        json={"name": "ids", "type_name": "small", "data_size": 50, "cost": "0.5"},
        headers=op,
    ).json()
    who = {"operator": op, "client": {"Authorization": f"Bearer {client['token']}"}}
    answers = [
        row.seen(market.request(m, p, headers=who[w], json={"strategy": "join"}).status_code)
        if m == "PUT"
        else row.seen(market.request(m, p, headers=who[w]).status_code)
        for m, p, w in ID_PATHS
    ]
    for status in answers:
        row.record(status == 422)


def debt_model(market: Any, row: Row) -> None:
    """Six empty wallets quoted a fee: no join, no model, no debt."""
    from mots.platform.contracts import OpenRoundPayload, SettlePayload
    from mots.platform.db import in_transaction
    from services.market import rounds

    op, sessions = _operator(), market.app.state.sessions
    six = [
        market.post(
            "/v1/clients",
            json={"name": f"free-{n}", "type_name": "small", "data_size": 50, "cost": "0.5"},
            headers=op,
        ).json()
        for n in range(6)
    ]
    rewards = {"small": Decimal("-0.25")}
    quote = OpenRoundPayload(
        round_id=1, mechanism="swan_robust", price=Decimal("0.75"), rewards=rewards,
        target_participants={"small": 6}, target_buyers={"small": 0}, epsilon=0.7,
        welfare=1.0, incentive_cost=Decimal(0),
    )  # fmt: skip
    in_transaction(sessions, lambda s: rounds.population(s, 1))
    in_transaction(sessions, lambda s: rounds.open_round(s, quote))
    auth = [{"Authorization": f"Bearer {c['token']}"} for c in six]
    joins = [
        row.seen(
            market.put("/v1/rounds/1/decision", json={"strategy": "join"}, headers=a).status_code
        )
        for a in auth
    ]
    artifact = Path(market.app.state.settings.artifact_dir) / "round-0001.pt"
    artifact.write_bytes(b"weights")
    payload = SettlePayload(
        round_id=1, rewards=rewards, participants=[c["id"] for c in six],
        artifact_path=str(artifact), artifact_sha256=hashlib.sha256(b"weights").hexdigest(),
    )  # fmt: skip
    in_transaction(sessions, lambda s: rounds.settle_round(s, payload))
    in_transaction(sessions, lambda s: rounds.publish(s, 1))
    for a, joined in zip(auth, joins, strict=True):
        download = row.seen(market.get("/v1/rounds/1/model", headers=a).status_code)
        balance = Decimal(market.get("/v1/me/balance", headers=a).json()["balance"])
        row.record(joined == 402 and download == 403 and balance == 0, max(Decimal(0), -balance))


def type_added_between_rounds(url: str, row: Row) -> None:
    """Eight rounds, a type added before each, evaluated and published by the real worker."""
    from mots.economics.error import generalization_error
    from mots.economics.scenario import ErrorModel
    from mots.platform.contracts import EvaluationRequest, RoundRef, TaskRef
    from services.evaluation.core import config
    from services.evaluation.migrations import upgrade

    truth = ErrorModel(d_gamma2=40.0, sigma2=0.05, eps0=0.6)
    previous_url = os.environ.get("MOTS_DATABASE_URL")
    os.environ["MOTS_DATABASE_URL"] = url  # the worker reads its settings from the environment
    config.get_settings.cache_clear()
    upgrade(url)
    import services.evaluation.worker as worker

    worker = importlib.reload(worker)
    real_measure = worker.measure
    k, d = [2, 2], [50.0, 300.0]
    try:
        for n in range(8):
            k, d = [*k, 2], sorted([*d, 40.0 + 70 * n])
            loss = float(generalization_error(np.array(k), np.array(d), truth))
            worker.measure = lambda *_, loss=loss: (loss, 0.7)
            try:
                worker.evaluate(
                    EvaluationRequest(
                        round_id=n + 1,
                        artifact_path="-",
                        artifact_sha256="ab" * 32,
                        participants=k,
                        sizes=d,
                    )
                )
                counted = worker.published(RoundRef(round_id=n + 1)).counted
                worker.error_model(TaskRef())
                row.record(counted)
            except Exception:
                row.server_errors += 1
                row.record(False)
    finally:
        worker.measure = real_measure
        worker.sessions.kw["bind"].dispose()
        if previous_url is None:  # leave the environment as found (later readers' defaults)
            os.environ.pop("MOTS_DATABASE_URL", None)
        else:
            os.environ["MOTS_DATABASE_URL"] = previous_url
        config.get_settings.cache_clear()


MARKET_ROWS: dict[str, Callable[[Any, Row], None]] = {
    "money_overflow": money_overflow,
    "id_overflow": id_overflow,
    "debt_model": debt_model,
}


def run(workdir: Path, options: dict[str, Any]) -> SuiteResult:
    """Each row tried :data:`TRIES` times on each database of :data:`KINDS`."""
    rows = {name: Row() for name in ("type_added_between_rounds", *MARKET_ROWS)}
    by_kind: dict[str, dict[str, dict[str, Any]]] = {}
    for kind in options.get("limit_databases") or KINDS:
        for name, row in rows.items():
            before = (row.tried, row.caught, row.server_errors)
            for _ in range(TRIES):
                with _database(kind, workdir / kind) as url:
                    if name == "type_added_between_rounds":
                        type_added_between_rounds(url, row)
                        continue
                    with tempfile.TemporaryDirectory() as art, _market(url, Path(art)) as market:
                        MARKET_ROWS[name](market, row)
            by_kind.setdefault(kind, {})[name] = {
                "tried": row.tried - before[0],
                "caught": row.caught - before[1],
                "server_errors": row.server_errors - before[2],
            }
    result = SuiteResult("market_limits")
    result.attacks = {name: row.as_dict() for name, row in rows.items()}
    result.extra = {"by_database": by_kind}
    return result
