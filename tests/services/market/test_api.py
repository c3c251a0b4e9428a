"""The market's REST API on SQLite and PostgreSQL: auth, idempotency, purchases, settlement, downloads."""

from __future__ import annotations

import hashlib
from decimal import Decimal
from typing import Any

from fastapi.testclient import TestClient

from mots.platform.contracts import SettlePayload
from mots.platform.db import in_transaction
from services.market import rounds
from services.market.core.config import Settings
from services.market.main import create_app
from tests.services.market.conftest import OPERATOR


def _buy(market: TestClient, auth: dict[str, str], key: str, round_id: int = 1) -> Any:
    return market.post(
        "/v1/purchases", json={"round_id": round_id}, headers={**auth, "Idempotency-Key": key}
    )


def test_every_call_needs_a_registered_token(market: TestClient, register, open_round) -> None:
    """No token or a wrong token is a 401; a client token on an operator route is a 403."""
    register()
    open_round()
    assert market.get("/v1/me").status_code == 401
    assert market.get("/v1/quote").status_code == 401
    bad = {"Authorization": "Bearer mots_not-a-token"}
    assert market.get("/v1/me/balance", headers=bad).status_code == 401
    assert _buy(market, bad, "key-00000001").status_code == 401
    c = register(name="x")
    assert market.get("/v1/ledger/check", headers=c["auth"]).status_code == 403
    r = market.post(
        "/v1/deposits",
        json={"client_id": c["id"], "amount": "5"},
        headers={**c["auth"], "Idempotency-Key": "self-fund-1"},
    )
    assert r.status_code == 403


def test_tokens_are_stored_hashed_and_identify_their_client(market: TestClient, register) -> None:
    """The token is returned once; the database holds only its SHA-256; /me is the caller."""
    a, b = register(name="a"), register(name="b")
    assert a["token"] != b["token"]
    from services.market.models import Client

    with market.app.state.sessions() as s:
        stored = {c.id: c.token_hash for c in s.query(Client)}
    assert stored[a["id"]] == hashlib.sha256(a["token"].encode()).hexdigest()
    assert a["token"] not in stored.values()
    assert market.get("/v1/me", headers=b["auth"]).json()["id"] == b["id"]


def test_no_one_pays_or_collects_as_another(market: TestClient, register, fund, open_round) -> None:
    """A purchase made with A's token charges A only; B's balance and ledger are untouched."""
    a, b = register(name="a"), register(name="b")
    fund(a["id"], "10")
    fund(b["id"], "10")
    open_round(price="2.5")
    r = _buy(market, a["auth"], "a-buys-0001")
    assert r.status_code == 201, r.text
    assert r.json()["client_id"] == a["id"]
    bal_a = market.get("/v1/me/balance", headers=a["auth"]).json()
    bal_b = market.get("/v1/me/balance", headers=b["auth"]).json()
    assert Decimal(bal_a["balance"]) == Decimal("7.5")
    assert Decimal(bal_b["balance"]) == Decimal("10")
    assert [e["kind"] for e in bal_b["entries"]] == ["deposit"]
    # The body cannot name another client: the schema forbids extra fields.
    r = market.post(
        "/v1/purchases",
        json={"round_id": 1, "client_id": b["id"]},
        headers={**a["auth"], "Idempotency-Key": "a-as-b-0001"},
    )
    assert r.status_code == 422


def test_idempotency_key_replays_and_conflicts(
    market: TestClient, register, fund, open_round
) -> None:
    """Same key and body: the first result, no second entry; same key, other body: 409."""
    a = register()
    fund(a["id"], "10")
    open_round(price="2.5")
    first = _buy(market, a["auth"], "same-key-001")
    again = _buy(market, a["auth"], "same-key-001")
    assert first.status_code == again.status_code == 201
    assert first.json() == again.json()
    other = _buy(market, a["auth"], "same-key-001", round_id=7)
    assert other.status_code == 409
    assert "different request body" in other.json()["detail"]
    bal = market.get("/v1/me/balance", headers=a["auth"]).json()
    assert Decimal(bal["balance"]) == Decimal("7.5")
    assert [e["kind"] for e in bal["entries"]] == ["purchase", "deposit"]
    # A second purchase of the same round under a new key is refused, not booked.
    assert _buy(market, a["auth"], "another-key-1").status_code == 409
    missing = market.post("/v1/purchases", json={"round_id": 1}, headers=a["auth"])
    assert missing.status_code == 422  # the Idempotency-Key header is required


def test_purchase_needs_funds_and_an_open_round(
    market: TestClient, register, fund, open_round
) -> None:
    """402 below the price, 404 for an unknown round, 409 once the round closed."""
    a = register()
    assert _buy(market, a["auth"], "no-round-0001").status_code == 404
    open_round(price="2.5")
    fund(a["id"], "2.499999")
    r = _buy(market, a["auth"], "poor-000001")
    assert r.status_code == 402 and "balance" in r.json()["detail"]
    fund(a["id"], "0.000001")
    assert _buy(market, a["auth"], "poor-000001").status_code == 201  # refusals are not stored
    b = register(name="b")
    fund(b["id"], "5")
    in_transaction(market.app.state.sessions, lambda s: rounds.close_round(s, 1))
    assert _buy(market, b["auth"], "late-000001").status_code == 409


def test_settlement_books_rewards_charges_and_balances(
    market: TestClient, register, fund, open_round
) -> None:
    """Buyers' payments fund rewards; a negative reward is charged out of the fee held at join
    (issue 37: no debt); the pool ends at zero."""
    small = register(name="s", type_name="small", data_size=50, cost="0.5")
    large = register(name="l", type_name="large", data_size=300, cost="3")
    buyer = register(name="b", type_name="small", data_size=50, cost="0.5")
    dropped = register(name="d", type_name="large", data_size=300, cost="3")
    fund(buyer["id"], "10")
    fund(small["id"], "2")
    open_round(price="2.5", rewards={"small": "-1.25", "large": "4.0"})
    for c in (small, large, dropped):
        r = market.put("/v1/rounds/1/decision", json={"strategy": "join"}, headers=c["auth"])
        assert r.status_code == 200, r.text
    assert _buy(market, buyer["auth"], "buyer-00001").status_code == 201
    payload = SettlePayload(
        round_id=1,
        rewards={"small": Decimal("-1.25"), "large": Decimal("4.0")},
        participants=[small["id"], large["id"], dropped["id"]],
        dropped=[dropped["id"]],
        artifact_path=str(market.app.state.settings.artifact_dir) + "/model.pt",
        artifact_sha256="ab" * 32,
    )
    result = in_transaction(market.app.state.sessions, lambda s: rounds.settle_round(s, payload))
    assert result.payments == Decimal("2.5")
    assert result.rewards_paid == Decimal("4")
    assert result.charges == Decimal("1.25")
    assert result.subsidy == Decimal("0.25") and result.surplus == 0
    again = in_transaction(market.app.state.sessions, lambda s: rounds.settle_round(s, payload))
    assert again == result  # settling twice books nothing new
    check = market.get("/v1/ledger/check", headers=OPERATOR).json()
    assert check["unbalanced_transactions"] == 0 and check["mismatched_accounts"] == 0
    assert Decimal(check["total"]) == 0
    assert Decimal(check["accounts"]["round_pools"]) == 0
    assert Decimal(
        market.get("/v1/me/balance", headers=small["auth"]).json()["balance"]
    ) == Decimal("0.75")
    assert Decimal(market.get("/v1/me/balance", headers=dropped["auth"]).json()["balance"]) == 0


def test_model_download_only_for_participants_and_buyers(
    market: TestClient, register, fund, open_round
) -> None:
    """After publication a buyer and a participant download; an abstainer and a dropout get 403."""
    from pathlib import Path

    root = Path(market.app.state.settings.artifact_dir)
    artifact = root / "round-1" / "model.pt"
    artifact.parent.mkdir(parents=True)
    artifact.write_bytes(b"weights")
    digest = hashlib.sha256(b"weights").hexdigest()
    p, buyer, idle, gone = (register(name=n) for n in "pbig")
    fund(buyer["id"], "3")
    open_round(price="2.5", rewards={"small": "0.5"})
    for c in (p, gone):
        market.put("/v1/rounds/1/decision", json={"strategy": "join"}, headers=c["auth"])
    market.put("/v1/rounds/1/decision", json={"strategy": "abstain"}, headers=idle["auth"])
    assert _buy(market, buyer["auth"], "buy-model-01").status_code == 201
    assert market.get("/v1/rounds/1/model", headers=buyer["auth"]).status_code == 409
    payload = SettlePayload(
        round_id=1,
        rewards={"small": Decimal("0.5")},
        participants=[p["id"], gone["id"]],
        dropped=[gone["id"]],
        artifact_path=str(artifact),
        artifact_sha256=digest,
    )
    in_transaction(market.app.state.sessions, lambda s: rounds.settle_round(s, payload))
    in_transaction(market.app.state.sessions, lambda s: rounds.publish(s, 1))
    for c in (p, buyer):
        r = market.get("/v1/rounds/1/model", headers=c["auth"])
        assert r.status_code == 200 and r.content == b"weights"
        assert r.headers["X-Model-SHA256"] == digest
    assert market.get("/v1/rounds/1/model", headers=idle["auth"]).status_code == 403
    assert market.get("/v1/rounds/1/model", headers=gone["auth"]).status_code == 403


def test_model_info_reads_the_sidecar_for_those_who_may_download(
    market: TestClient, register, fund, open_round
) -> None:
    """GET /v1/rounds/{id}/model/info: digest, size, coalition and ε from the trainer's .json,
    under the download's rules (409 before publication, 403 for an abstainer)."""
    import json
    from pathlib import Path

    artifact = Path(market.app.state.settings.artifact_dir) / "round-0001.pt"
    artifact.parent.mkdir(parents=True, exist_ok=True)
    artifact.write_bytes(b"weights")
    meta = {"dataset": "fashion-mnist", "participants": [1, 0], "epsilon": 0.7, "round": 2}
    sidecar = {**meta, "format": "mots-model/1", "file": artifact.name, "sha256": "x"}
    artifact.with_suffix(".json").write_text(json.dumps(sidecar))
    digest = hashlib.sha256(b"weights").hexdigest()
    p, idle = register(name="p"), register(name="i")
    open_round(price="0", rewards={"small": "0.5"})
    market.put("/v1/rounds/1/decision", json={"strategy": "join"}, headers=p["auth"])
    market.put("/v1/rounds/1/decision", json={"strategy": "abstain"}, headers=idle["auth"])
    assert market.get("/v1/rounds/1/model/info", headers=p["auth"]).status_code == 409
    payload = SettlePayload(
        round_id=1,
        rewards={"small": Decimal("0.5")},
        participants=[p["id"]],
        artifact_path=str(artifact),
        artifact_sha256=digest,
    )
    in_transaction(market.app.state.sessions, lambda s: rounds.settle_round(s, payload))
    in_transaction(market.app.state.sessions, lambda s: rounds.publish(s, 1))
    r = market.get("/v1/rounds/1/model/info", headers=p["auth"])
    assert r.status_code == 200, r.text
    info = r.json()
    assert (info["round_id"], info["file"], info["sha256"], info["size"]) == (
        1, "mots-round-1.pt", digest, 7,
    )  # fmt: skip
    assert (info["participants"], info["epsilon"], info["format"]) == ([1, 0], 0.7, "mots-model/1")
    assert info["metadata"] == {**meta, "format": "mots-model/1"}  # the market's digest, not x
    assert market.get("/v1/rounds/1/model/info", headers=idle["auth"]).status_code == 403


def test_registration_rejects_inconsistent_type_declarations(market: TestClient, register) -> None:
    """A type has one (D_i, C_i); a mismatching declaration is a 409 naming the field, a
    malformed one a 422."""
    register(type_name="t", data_size=50, cost="0.5")
    r = market.post(
        "/v1/clients",
        json={"name": "z", "type_name": "t", "data_size": 60, "cost": "0.5"},
        headers=OPERATOR,
    )
    assert r.status_code == 409 and "type_name" in r.json()["detail"]
    r = market.post(
        "/v1/clients",
        json={"name": "z", "type_name": "t", "data_size": 50, "cost": "-1"},
        headers=OPERATOR,
    )
    assert r.status_code == 422


def test_failed_round_refunds_every_buyer(market: TestClient, register, fund, open_round) -> None:
    """Settlement by rule returns each payment and pays no reward."""
    a, b = register(name="a"), register(name="b")
    fund(a["id"], "5")
    open_round(price="2.5")
    _buy(market, a["auth"], "refund-me-01")
    market.put("/v1/rounds/1/decision", json={"strategy": "join"}, headers=b["auth"])
    payload = SettlePayload(round_id=1, rewards={}, participants=[], refund_buyers=True)
    result = in_transaction(market.app.state.sessions, lambda s: rounds.settle_round(s, payload))
    assert result.refunds == Decimal("2.5") and result.rewards_paid == 0
    assert Decimal(market.get("/v1/me/balance", headers=a["auth"]).json()["balance"]) == 5
    assert market.get("/v1/ledger/check", headers=OPERATOR).json()["total"] == "0.000000"


def test_the_purchase_batch_settings_reach_the_batcher(tmp_path: Any) -> None:
    """MOTS_PURCHASE_MAX_BATCH and MOTS_PURCHASE_WRITERS shape the app's purchase batcher."""
    settings = Settings(
        database_url=f"sqlite:///{tmp_path / 'market.db'}",
        artifact_dir=str(tmp_path),
        purchase_max_batch=1,
        purchase_writers=3,
    )
    batcher = create_app(settings).state.purchases
    assert (batcher.max_batch, batcher.writers) == (1, 3)


def test_purchase_writers_default_to_one_on_sqlite_and_two_per_host_on_postgresql(
    tmp_path: Any,
) -> None:
    """SQLite writes one transaction at a time, so a second writer would only wait on its lock;
    on PostgreSQL two batches in flight over the host's API processes."""
    sqlite = Settings(
        database_url=f"sqlite:///{tmp_path / 'market.db'}", artifact_dir=str(tmp_path)
    )
    postgres = Settings(database_url="postgresql://mots@db/market", artifact_dir=str(tmp_path))
    assert (sqlite.purchase_writer_count, postgres.purchase_writer_count) == (1, 2)
    # two processes on one host (mots.platform.serve --workers 2): one writer each, two in all
    for processes, each in ((2, 1), (3, 1), (8, 1)):
        shared = Settings(database_url="postgresql://mots@db/market", api_processes=processes)
        assert shared.purchase_writer_count == each
    assert create_app(sqlite).state.purchases.writers == 1
    explicit = Settings(database_url="postgresql://mots@db/market", purchase_writers=5)
    assert explicit.purchase_writer_count == 5


def test_the_purchase_route_reads_the_bearer_token_as_the_others_do(
    market: TestClient, register, fund, open_round
) -> None:
    """Its own header parsing: no token, another scheme or an empty one is a 401 with a
    challenge; the scheme is case-insensitive; the OpenAPI entry names the bearer scheme."""
    a = register()
    fund(a["id"], "10")
    open_round()
    token = a["auth"]["Authorization"].split(" ", 1)[1]
    for header in ({}, {"Authorization": f"Basic {token}"}, {"Authorization": "Bearer "}):
        r = _buy(market, header, "key-auth-0001")
        assert r.status_code == 401, header
        assert r.headers["WWW-Authenticate"] == "Bearer"
    assert _buy(market, {"Authorization": f"bearer {token}"}, "key-auth-0002").status_code == 201
    spec = market.get("/openapi.json").json()
    assert spec["paths"]["/v1/purchases"]["post"]["security"] == [{"HTTPBearer": []}]
    assert "HTTPBearer" in spec["components"]["securitySchemes"]
