"""Issue 24, point 1: a participant revoked by the operator (DELETE /v1/clients/{id}) or departed
(DELETE /v1/me) while its round is collecting or training is removed from the round, on SQLite
and PostgreSQL: out of K at close, its SuperNode key no longer handed to the SuperLink, and at
settlement not paid, not charged and given no model (the drop-out rule of
services/market/rounds.py), the round settling with the others and the ledger exact."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from mots.platform.contracts import SettlePayload
from mots.platform.db import in_transaction
from mots.platform.money import from_micros
from mots.training.pki import make_node_key
from services.market import ledger, node_keys, rounds
from services.market.models import Account
from tests.services.market.conftest import OPERATOR, node_key_body


def _remove(market: TestClient, how: str, client: dict[str, Any]) -> None:
    if how == "revoked":
        r = market.delete(f"/v1/clients/{client['id']}", headers=OPERATOR)
    else:
        r = market.delete("/v1/me", headers=client["auth"])
    assert r.status_code == 200, r.text


def _balance(market: TestClient, client_id: int) -> Decimal:
    """The client's wallet, read from the ledger (a revoked client's token no longer works)."""
    with market.app.state.sessions() as session:
        acc = session.scalar(select(Account).where(Account.name == ledger.wallet_name(client_id)))
        return from_micros(acc.balance_micros if acc is not None else 0)


def _balanced(market: TestClient) -> None:
    check = market.get("/v1/ledger/check", headers=OPERATOR).json()
    assert check["unbalanced_transactions"] == 0 and check["mismatched_accounts"] == 0
    assert Decimal(check["total"]) == 0 and Decimal(check["accounts"]["round_pools"]) == 0


def joined_round(
    market: TestClient, register: Any, fund: Any, open_round: Any, keys: Callable[[int], Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Two large participants (quoted 4 each) whose SuperNode keys are ``keys(0)`` and
    ``keys(1)`` (registered with proof of possession), both joined, and a paying buyer."""
    stay = register(name="stay", type_name="large", data_size=300, cost="3")
    go = register(name="go", type_name="large", data_size=300, cost="3")
    buyer = register(name="buyer")
    fund(buyer["id"], "10")
    for n, c in enumerate((stay, go)):
        pair = keys(n)
        body = node_key_body(market, c["auth"], pair.private_key, pair.public_pem.decode())
        assert market.put("/v1/me/node-key", json=body, headers=c["auth"]).is_success
    open_round(price="2.5", rewards={"small": "-1.25", "large": "4.0"})
    for c in (stay, go):
        r = market.put("/v1/rounds/1/decision", json={"strategy": "join"}, headers=c["auth"])
        assert r.status_code == 200, r.text
    r = market.post(
        "/v1/purchases",
        json={"round_id": 1},
        headers={**buyer["auth"], "Idempotency-Key": "buyer-0001"},
    )
    assert r.status_code == 201, r.text
    return stay, go


def _joined_round(
    market: TestClient, register: Any, fund: Any, open_round: Any, tmp_path: Path
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Two large participants with fresh SuperNode keys, joined, and a paying buyer."""
    return joined_round(
        market, register, fund, open_round, lambda n: make_node_key(tmp_path / f"node-{n}.key")
    )


def _settle(market: TestClient, participants: list[int]) -> Any:
    payload = SettlePayload(
        round_id=1,
        rewards={"small": Decimal("-1.25"), "large": Decimal("4")},
        participants=participants,
        artifact_path=None,
    )
    return in_transaction(market.app.state.sessions, lambda s: rounds.settle_round(s, payload))


@pytest.mark.parametrize("how", ["revoked", "departed"])
def test_removed_while_collecting_is_out_of_k_keys_and_pay(
    market: TestClient, register: Any, fund: Any, open_round: Any, tmp_path: Path, how: str
) -> None:
    """Removed while the round collects: the close leaves it out of K, its key is no longer
    handed out, and a settlement that still names it pays it nothing."""
    stay, go = _joined_round(market, register, fund, open_round, tmp_path)
    _remove(market, how, go)
    final = in_transaction(market.app.state.sessions, lambda s: rounds.close_round(s, 1))
    assert final.participants == {"large": [stay["id"]]}
    with market.app.state.sessions() as session:
        keys = node_keys.keys_of(session, [stay["id"], go["id"]])
    assert sorted(keys.keys) == [stay["id"]]
    result = _settle(market, [stay["id"], go["id"]])
    assert _balance(market, go["id"]) == 0 and _balance(market, stay["id"]) == 4
    assert result.rewards_paid == 4 and result.removed == [go["id"]]
    _balanced(market)


@pytest.mark.parametrize("how", ["revoked", "departed"])
def test_removed_while_training_is_not_paid(
    market: TestClient, register: Any, fund: Any, open_round: Any, tmp_path: Path, how: str
) -> None:
    """Removed after the close (the round is training) and reported as completed by the trainer:
    the settlement treats it as a drop-out: no reward, no charge, marked dropped."""
    stay, go = _joined_round(market, register, fund, open_round, tmp_path)
    final = in_transaction(market.app.state.sessions, lambda s: rounds.close_round(s, 1))
    assert final.participants == {"large": sorted([stay["id"], go["id"]])}
    _remove(market, how, go)
    result = _settle(market, [stay["id"], go["id"]])
    assert _balance(market, go["id"]) == 0 and _balance(market, stay["id"]) == 4
    assert result.rewards_paid == 4 and result.removed == [go["id"]]
    with market.app.state.sessions() as session:
        assert node_keys.keys_of(session, [go["id"]]).keys == {}
    _balanced(market)
