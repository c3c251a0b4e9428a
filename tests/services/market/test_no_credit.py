"""No goods on credit (issue 37 #5), on SQLite and PostgreSQL: a participant whose type's quoted
reward is a fee joins only with the fee held from its wallet (402 otherwise: no decision, no
model); the fee held is charged at settlement out of the hold, refunded whole when the joiner
drops out or the round is settled by rule; a buyer the operator revoked is refunded."""

from __future__ import annotations

import hashlib
from decimal import Decimal
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from mots.platform.contracts import SettlePayload
from mots.platform.db import in_transaction
from services.market import rounds
from tests.services.market.conftest import OPERATOR
from tests.services.market.test_removed_participants import _balance, _balanced

REWARDS = {"small": "-0.25", "large": "4.0"}


def _settle(market: TestClient, participants: list[int], **extra: Any) -> Any:
    payload = SettlePayload(
        round_id=1,
        rewards={k: Decimal(v) for k, v in REWARDS.items()},
        participants=participants,
        **extra,
    )
    return in_transaction(market.app.state.sessions, lambda s: rounds.settle_round(s, payload))


def _artifact(market: TestClient) -> dict[str, str]:
    artifact = Path(market.app.state.settings.artifact_dir) / "round-0001.pt"
    artifact.parent.mkdir(parents=True, exist_ok=True)
    artifact.write_bytes(b"weights")
    return {
        "artifact_path": str(artifact),
        "artifact_sha256": hashlib.sha256(b"weights").hexdigest(),
    }


def _join(market: TestClient, client: dict[str, Any], strategy: str = "join") -> Any:
    return market.put("/v1/rounds/1/decision", json={"strategy": strategy}, headers=client["auth"])


def test_six_empty_wallets_cannot_join_for_a_fee_nor_download(
    market: TestClient, register: Any, open_round: Any
) -> None:
    """Six small clients with empty wallets, their type quoted a fee of 0.25: six 402s naming
    the fee, no decision booked, no debt after the round, and no model for any of them."""
    six = [register(name=f"free-{n}") for n in range(6)]
    open_round(price="2.5", rewards=REWARDS)
    for c in six:
        r = _join(market, c)
        assert r.status_code == 402, r.text
        assert "0.250000" in r.json()["detail"] and "strategy" in r.json()["detail"]
    decided = market.get("/v1/rounds/1/decisions", headers=OPERATOR)
    assert all(
        d["client_id"] not in {c["id"] for c in six} for d in decided.json().get("items", [])
    )
    _settle(market, [c["id"] for c in six], **_artifact(market))
    in_transaction(market.app.state.sessions, lambda s: rounds.publish(s, 1))
    for c in six:
        assert _balance(market, c["id"]) == 0
        assert market.get("/v1/rounds/1/model", headers=c["auth"]).status_code == 403
        market.delete("/v1/me", headers=c["auth"])  # left: still no model
        assert market.get("/v1/rounds/1/model", headers=c["auth"]).status_code == 403
    _balanced(market)


def test_a_fee_is_held_at_join_charged_at_settlement_and_refunded_on_drop_out(
    market: TestClient, register: Any, fund: Any, open_round: Any
) -> None:
    """Two funded small joiners: 0.25 each leaves their wallets at join and cannot be taken back
    by switching strategy; the one that trained keeps paying 0.25 and gets the model, the one
    that dropped out is refunded 0.25 and gets none; the ledger balances."""
    trained, dropped = register(name="trained"), register(name="dropped")
    for c in (trained, dropped):
        fund(c["id"], "1")
    open_round(price="2.5", rewards=REWARDS)
    for c in (trained, dropped):
        assert _join(market, c).status_code == 200
        assert _join(market, c).status_code == 200  # a repeat holds nothing more
        assert _balance(market, c["id"]) == Decimal("0.75")
    assert _join(market, trained, "abstain").status_code == 409
    result = _settle(
        market, [trained["id"], dropped["id"]], dropped=[dropped["id"]], **_artifact(market)
    )
    in_transaction(market.app.state.sessions, lambda s: rounds.publish(s, 1))
    assert result.charges == Decimal("0.25")
    assert _balance(market, trained["id"]) == Decimal("0.75")
    assert _balance(market, dropped["id"]) == Decimal("1")
    assert market.get("/v1/rounds/1/model", headers=trained["auth"]).status_code == 200
    assert market.get("/v1/rounds/1/model", headers=dropped["auth"]).status_code == 403
    _balanced(market)


def test_a_round_settled_by_rule_refunds_every_held_fee(
    market: TestClient, register: Any, fund: Any, open_round: Any
) -> None:
    """The round fails: every joiner's held fee comes back whole, nobody is charged."""
    joiner = register(name="j")
    fund(joiner["id"], "1")
    open_round(price="2.5", rewards=REWARDS)
    assert _join(market, joiner).status_code == 200
    result = _settle(market, [], refund_buyers=True)
    assert result.charges == 0 and _balance(market, joiner["id"]) == Decimal("1")
    _balanced(market)


def test_an_operator_revoked_buyer_who_paid_is_refunded(
    market: TestClient, register: Any, fund: Any, open_round: Any
) -> None:
    """A buyer pays 0.75, the operator revokes it while the round collects: the settlement
    refunds the 0.75 (it can no longer download), the others' terms unchanged."""
    buyer, other = register(name="revoked-buyer"), register(name="other-buyer")
    for c in (buyer, other):
        fund(c["id"], "1")
    open_round(price="0.75", rewards=REWARDS)
    for n, c in enumerate((buyer, other)):
        r = market.post(
            "/v1/purchases",
            json={"round_id": 1},
            headers={**c["auth"], "Idempotency-Key": f"buy-model-{n:04d}"},
        )
        assert r.status_code == 201, r.text
    assert market.delete(f"/v1/clients/{buyer['id']}", headers=OPERATOR).status_code == 200
    _settle(market, [], **_artifact(market))
    in_transaction(market.app.state.sessions, lambda s: rounds.publish(s, 1))
    assert _balance(market, buyer["id"]) == Decimal("1")
    assert _balance(market, other["id"]) == Decimal("0.25")
    assert market.get("/v1/rounds/1/model", headers=other["auth"]).status_code == 200
    _balanced(market)
