"""The market SDK's own behaviour: typed answers, typed errors, safe retries, the model's digest.

The market's side is replaced by ``httpx.MockTransport`` (the outer edge: the network); the SDK
against the real market service is exercised by tests/edge/agent/test_agent_against_market.py.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from mots.client import MarketClient, MarketError, ModelIntegrityError
from mots.client.model_file import read_model_info
from mots.platform.api.base import RoundState, Strategy
from mots.platform.api.market import ClientRegistration

Handler = Callable[[httpx.Request], httpx.Response]

QUOTE: dict[str, Any] = {
    "round_id": 4,
    "state": "collecting",
    "mechanism": "swan_robust",
    "price": "1.5",
    "types": [
        {"type_name": "small", "reward": "-0.5", "target_participants": 2, "target_buyers": 1}
    ],
    "epsilon": 0.6,
    "welfare": 3.0,
    "incentive_cost": "0",
}
PURCHASE = {
    "purchase_id": 1,
    "round_id": 4,
    "client_id": 7,
    "price": "1.5",
    "transaction_id": 9,
    "balance": "8.5",
}


def client(handler: Handler, token: str | None = "tok", **kw: Any) -> MarketClient:
    """An SDK client whose requests ``handler`` answers; retries do not sleep."""
    kw.setdefault("sleep", lambda _: None)
    return MarketClient("http://market.test", token, transport=httpx.MockTransport(handler), **kw)


def test_answers_are_parsed_into_the_schemas() -> None:
    """The quote comes back as QuoteOut (Decimals, enums), sent with the bearer token."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=QUOTE)

    quote = client(handler).quote()
    assert quote is not None and quote.price == Decimal("1.5")
    assert quote.state is RoundState.COLLECTING and quote.types[0].target_buyers == 1
    assert seen[0].url.path == "/v1/quote"
    assert seen[0].headers["Authorization"] == "Bearer tok"
    client(handler).quote(4)
    assert seen[1].url.path == "/v1/rounds/4/quote"


def test_missing_rounds_and_decisions_are_none() -> None:
    """A 404 for a quote or a decision means "not there (yet)", not an error."""

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(404, json={"detail": "no round has been opened yet"})

    market = client(handler)
    assert market.quote() is None
    assert market.decision(3) is None
    with pytest.raises(MarketError) as err:
        market.me()
    assert err.value.status == 404


def test_refusals_raise_a_typed_error_with_the_markets_detail() -> None:
    """Status, detail (field and rule), method and path travel in MarketError; 422 lists are
    flattened to ``field: message``."""

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/clients":
            body = {"detail": [{"loc": ["body", "cost"], "msg": "Input should be >= 0"}]}
            return httpx.Response(422, json=body)
        return httpx.Response(402, json={"detail": "balance: 0 is below the price 1.5"})

    market = client(handler)
    with pytest.raises(MarketError) as err:
        market.buy(4)
    assert (err.value.status, err.value.method, err.value.path) == (402, "POST", "/v1/purchases")
    assert err.value.detail == "balance: 0 is below the price 1.5"
    assert "402" in str(err.value)
    with pytest.raises(MarketError, match=r"cost: Input should be >= 0") as err:
        market.register(
            ClientRegistration(name="a", type_name="small", data_size=5, cost=Decimal(1))
        )
    assert err.value.status == 422


def test_buy_retries_with_one_key_until_the_market_answers() -> None:
    """A lost connection and a 503 are retried with the same Idempotency-Key; each buy() call
    makes its own key, and a given key is used as it is."""
    keys: list[str] = []
    answers: list[Callable[[], httpx.Response]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        keys.append(request.headers["Idempotency-Key"])
        assert json.loads(request.content) == {"round_id": 4}
        return answers.pop(0)()

    def lost() -> httpx.Response:
        raise httpx.ConnectError("connection reset")

    answers[:] = [lost, lambda: httpx.Response(503, json={"detail": "ledger: retry"})]
    answers.append(lambda: httpx.Response(201, json=PURCHASE))
    market = client(handler)
    bought = market.buy(4)
    assert bought.balance == Decimal("8.5") and bought.transaction_id == 9
    assert len(keys) == 3 and len(set(keys)) == 1
    answers.append(lambda: httpx.Response(201, json=PURCHASE))
    market.buy(4)
    assert keys[3] != keys[0]
    answers.append(lambda: httpx.Response(201, json=PURCHASE))
    market.buy(4, idempotency_key="client-7-round-4")
    assert keys[4] == "client-7-round-4"


def test_retries_are_bounded_and_registration_is_never_retried() -> None:
    """After ``retries`` extra attempts the last failure is raised; a registration (not
    idempotent) is sent once, and an unreachable market gives status None."""
    calls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        raise httpx.ConnectError("refused")

    market = client(handler, retries=2)
    with pytest.raises(MarketError) as err:
        market.balance()
    assert err.value.status is None and "unreachable" in str(err.value)
    assert calls == ["/v1/me/balance"] * 3
    calls.clear()
    with pytest.raises(MarketError):
        market.register(
            ClientRegistration(name="a", type_name="small", data_size=5, cost=Decimal(1))
        )
    assert calls == ["/v1/clients"]


def test_with_token_shares_the_pool_and_switches_the_credential() -> None:
    """A view carries its own token; closing it leaves the owner usable."""
    auth: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        auth.append(request.headers.get("Authorization"))
        row = {"id": 1, "name": "a", "type_name": "small", "data_size": 5, "cost": "1"}
        return httpx.Response(200, json={"items": [row], "next": None})

    owner = client(handler, token=None)
    operator = owner.with_token("op")
    assert [c.id for c in operator.clients()] == [1]
    operator.close()
    owner.clients()
    assert auth == ["Bearer op", None]
    assert operator.token == "op" and owner.token is None


def test_deposit_declare_and_wait_for_quote() -> None:
    """Operator deposits carry a key; declarations send the strategy; waiting polls the round."""
    states = iter(["open", "open", "collecting"])

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/deposits":
            assert request.headers["Idempotency-Key"]
            assert json.loads(request.content) == {"client_id": 7, "amount": "10.000000"}
            return httpx.Response(
                201, json={"transaction_id": 2, "client_id": 7, "amount": "10", "balance": "10"}
            )
        if request.url.path == "/v1/rounds/4/decision":
            assert json.loads(request.content) == {"strategy": "join"}
            return httpx.Response(
                200, json={"round_id": 4, "client_id": 7, "strategy": "join", "paid": False}
            )
        return httpx.Response(200, json={**QUOTE, "state": next(states)})

    market = client(handler)
    assert market.deposit(7, Decimal(10)).balance == Decimal(10)
    assert market.declare(4, Strategy.JOIN).strategy is Strategy.JOIN
    assert market.wait_for_quote(4, timeout_s=5).state is RoundState.COLLECTING
    with pytest.raises(TimeoutError, match="round 4"):
        client(lambda _: httpx.Response(404, json={"detail": "x"})).wait_for_quote(4, timeout_s=0)


def test_unexpected_answers_are_market_errors() -> None:
    """A body that is not the schema's raises MarketError naming the call, not a bare KeyError."""
    market = client(lambda _: httpx.Response(200, json={"round_id": 4}))
    with pytest.raises(MarketError, match="unexpected answer") as err:
        market.quote()
    assert err.value.status == 200


def test_download_checks_the_published_digest(tmp_path: Path) -> None:
    """The model is kept when its SHA-256 matches X-Model-SHA256, and refused (no file) when not;
    the market's metadata lands beside a kept model as <stem>.json."""
    blob = b"model bytes" * 1000
    digest = hashlib.sha256(blob).hexdigest()
    published = {"sha": digest}
    info = {
        "round_id": 4, "file": "mots-round-4.pt", "sha256": digest, "size": len(blob),
        "format": "mots-model/1", "participants": [0, 2], "epsilon": 0.6,
        "metadata": {"dataset": "fashion-mnist"},
    }  # fmt: skip

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/rounds/4/model/info":
            return httpx.Response(200, json=info)
        assert request.url.path == "/v1/rounds/4/model"
        return httpx.Response(200, content=blob, headers={"X-Model-SHA256": published["sha"]})

    got = client(handler).download_model(4, tmp_path / "m.pt")
    assert (got.sha256, got.size) == (digest, len(blob))
    assert (tmp_path / "m.pt").read_bytes() == blob
    assert got.metadata_path == tmp_path / "m.json"
    unsigned = {"price": None, "signature": None, "key_id": None}  # a market before issue 40
    assert read_model_info(tmp_path / "m.pt") == {**info, **unsigned, "file": "m.pt"}
    published["sha"] = "0" * 64
    with pytest.raises(ModelIntegrityError, match="SHA-256"):
        client(handler).download_model(4, tmp_path / "bad.pt")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json", "m.pt"]


def test_download_from_a_market_without_model_info_writes_no_sidecar(tmp_path: Path) -> None:
    """An older market (404 on /model/info) still serves the verified model, with no .json."""
    blob = b"weights"

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/info"):
            return httpx.Response(404, json={"detail": "Not Found"})
        sha = hashlib.sha256(blob).hexdigest()
        return httpx.Response(200, content=blob, headers={"X-Model-SHA256": sha})

    got = client(handler).download_model(4, tmp_path / "m.pt")
    assert got.metadata_path is None and [p.name for p in tmp_path.iterdir()] == ["m.pt"]


def test_download_refusal_carries_the_detail(tmp_path: Path) -> None:
    """A refused download (403) raises MarketError with the market's detail and writes nothing."""
    market = client(lambda _: httpx.Response(403, json={"detail": "round_id: not entitled"}))
    with pytest.raises(MarketError, match="not entitled") as err:
        market.download_model(4, tmp_path / "m.pt")
    assert err.value.status == 403 and not any(tmp_path.iterdir())


def test_configuration_is_checked() -> None:
    """A base URL without a scheme, a non-positive timeout or negative retries are refused."""
    with pytest.raises(ValueError, match="base_url"):
        MarketClient("market:8000")
    with pytest.raises(ValueError, match="timeout_s"):
        MarketClient("http://m", timeout_s=0)
    with pytest.raises(ValueError, match="retries"):
        MarketClient("http://m", retries=-1)
    with httpx.Client(base_url="http://m") as http:
        over = MarketClient.over(http, "t")
        over.close()
        assert not http.is_closed and over.base_url == "http://m"


def test_the_client_list_follows_next_to_the_last_page() -> None:
    """``clients()`` asks for pages until ``next`` is null, passing each ``next`` back unchanged."""
    row = {"name": "a", "type_name": "small", "data_size": 5, "cost": "1.000000"}
    pages = {
        None: {"items": [{"id": 1, **row}, {"id": 2, **row}], "next": "c2"},
        "c2": {"items": [{"id": 3, **row}], "next": None},
    }
    asked: list[tuple[str | None, str | None]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        cursor = request.url.params.get("cursor")
        asked.append((request.url.params.get("limit"), cursor))
        return httpx.Response(200, json=pages[cursor])

    listed = client(handler).clients(page_size=2)
    assert [c.id for c in listed] == [1, 2, 3]
    assert asked == [("2", None), ("2", "c2")]


def test_operator_calls_hit_their_routes_and_lists_follow_next() -> None:
    """enrolments() reads every page; revoke_enrolment, approve and revoke_client hit their
    routes with the operator's token and parse the service's schemas."""
    seen: list[tuple[str, str]] = []
    enrolment = {
        "id": 1, "type_name": "small", "data_size": 50, "cost": "0.500000", "uses_left": 2,
        "expires_at": 1_900_000_000, "revoked": False,
    }  # fmt: skip
    client_out = {"id": 7, "name": "pi-7", "type_name": "small", "data_size": 50, "cost": "0.5"}

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.method, request.url.path + ("?" + request.url.query.decode())))
        assert request.headers["Authorization"] == "Bearer op"
        if request.url.path == "/v1/enrolments":
            nxt = None if "cursor" in request.url.params else "c1"
            return httpx.Response(200, json={"items": [enrolment], "next": nxt})
        if request.url.path.startswith("/v1/enrolments/"):
            return httpx.Response(200, json={**enrolment, "revoked": True})
        status = "revoked" if request.method == "DELETE" else "active"
        return httpx.Response(200, json={**client_out, "status": status})

    op = client(handler, token="op")
    assert len(op.enrolments(page_size=1)) == 2
    assert op.revoke_enrolment(1).revoked
    assert op.approve(7).status.value == "active"
    assert op.revoke_client(7).status.value == "revoked"
    assert [m for m, _ in seen] == ["GET", "GET", "DELETE", "POST", "DELETE"]
    assert seen[1][1] == "/v1/enrolments?limit=1&cursor=c1"
    assert seen[3][1] == "/v1/clients/7/approve?"


def test_operator_lists_follow_every_page_with_their_filter() -> None:
    """``accounts`` follows ``next`` to the last page, sending its filter and the cursor on each."""
    seen: list[httpx.Request] = []
    account = {"category": "wallet", "client_id": 1, "balance": "1.000000"}

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        cursor = request.url.params.get("cursor")
        page = int(cursor or 0)
        items = [account | {"name": f"wallet:{page}"}]
        return httpx.Response(
            200, json={"items": items, "next": None if page == 2 else str(page + 1)}
        )

    names = [a.name for a in client(handler).accounts(category="wallet", page_size=1)]
    assert names == ["wallet:0", "wallet:1", "wallet:2"]
    assert [r.url.params.get("cursor") for r in seen] == [None, "1", "2"]
    assert {r.url.params["category"] for r in seen} == {"wallet"}
    assert {r.url.params["limit"] for r in seen} == {"1"}


def test_bulk_registration_sends_each_types_task_once() -> None:
    """Issue 36: ``register_bulk`` posts every type with its task (the default one where a type
    names none), answers the typed clients with their tasks, and is not retried on a 503 (a
    lost answer would register a second fleet)."""
    from mots.platform.api.market import BulkRegistration, BulkType

    seen: list[dict[str, Any]] = []
    made = {
        "id": 1, "name": "d-1", "type_name": "type-1", "data_size": 20, "cost": "0.2",
        "token": "t1", "task": "digits",
    }  # fmt: skip

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return httpx.Response(201, json={"clients": [made]})

    body = BulkRegistration(
        types=[
            BulkType(type_name="type-1", data_size=20, cost=Decimal("0.2"), count=1, task="digits"),
            BulkType(type_name="type-1", data_size=50, cost=Decimal("0.5"), count=2),
        ]
    )
    out = client(handler, "operator").register_bulk(body)
    assert [c.task for c in out.clients] == ["digits"]
    assert [t["task"] for t in seen[0]["types"]] == ["digits", "fashion-mnist"]
    calls = 0

    def busy(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        return httpx.Response(503, json={"detail": "briefly unavailable"})

    with pytest.raises(MarketError):
        client(busy, "operator").register_bulk(body)
    assert calls == 1
