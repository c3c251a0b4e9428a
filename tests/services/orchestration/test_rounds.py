"""Market rounds through the real services: the state machine, its rules and restart safety."""

from __future__ import annotations

from decimal import Decimal

import pytest

from mots.economics.utility import PowerUtility
from mots.local.agents import act, choose, wait_for_quote
from mots.local.demo import wait_round
from mots.platform.api.base import Strategy
from tests.services.orchestration.conftest import OPERATOR, UTILITY

pytestmark = pytest.mark.integration


def _ledger_balanced(market) -> dict:
    check = market.get("/v1/ledger/check", headers=OPERATOR).json()
    assert check["unbalanced_transactions"] == 0 and check["mismatched_accounts"] == 0
    assert Decimal(check["total"]) == 0 and Decimal(check["accounts"]["round_pools"]) == 0
    return check


def test_round_with_no_participant_is_settled_by_rule(platform) -> None:
    """Nobody joins: no model can exist, so every buyer is refunded and the round ends by rule."""
    _, market, orchestration, agents = platform
    r = orchestration.post("/v1/rounds", headers=OPERATOR)
    assert r.status_code == 202
    round_id = r.json()["round_id"]
    assert orchestration.post("/v1/rounds", headers=OPERATOR).status_code == 409
    wait_for_quote(market, agents[0], round_id)
    choices = {a.id: Strategy.BUY if i % 2 else Strategy.ABSTAIN for i, a in enumerate(agents)}
    act(market, agents, round_id, choices)
    body = wait_round(orchestration, round_id, 60)
    assert body["state"] == "settled_by_rule"
    assert "no participant" in body["rule"]
    s = body["summary"]
    assert s["settlement"]["refunds"] == s["settlement"]["payments"] != "0.000000"
    for a in agents:
        bal = market.get("/v1/me/balance", headers=a.auth).json()
        assert Decimal(bal["balance"]) == Decimal("10")
    _ledger_balanced(market)
    states = [t["to"] for t in orchestration.get(f"/v1/rounds/{round_id}").json()["transitions"]]
    assert states == ["collecting", "failed", "settled_by_rule"]


def test_round_survives_a_killed_orchestrator(platform) -> None:
    """SIGKILL the orchestration worker while collecting; after a restart the round completes."""
    stack, market, orchestration, agents = platform
    round_id = orchestration.post("/v1/rounds", headers=OPERATOR).json()["round_id"]
    quote = wait_for_quote(market, agents[0], round_id)
    stack.kill("orchestration-worker")
    choices = choose(agents, quote, PowerUtility.model_validate(UTILITY))
    act(market, agents, round_id, choices)
    # killed after the market published the quote: the round is open or collecting, not further
    assert orchestration.get(f"/v1/rounds/{round_id}").json()["state"] in ("open", "collecting")
    stack.restart("orchestration-worker")
    body = wait_round(orchestration, round_id, 240)
    assert body["state"] == "published", body
    # the API shows the training's last report: MOTS_TRAIN_ROUNDS=2, both type-3 clients done
    progress = body["training_progress"]
    assert (progress["fedavg_round"], progress["fedavg_rounds"]) == (2, 2)
    assert progress["clients_done"] == progress["clients"] == 2
    s = body["summary"]
    assert s["participants"] == {"type-1": 0, "type-3": 2}
    assert s["equilibrium"] is True
    assert s["epsilon"] is not None and s["epsilon"] > 0
    assert Decimal(str(s["incentive_cost"])) >= 0
    _ledger_balanced(market)
    joined = next(a for a in agents if choices[a.id] == Strategy.JOIN)
    assert market.get(f"/v1/rounds/{round_id}/model", headers=joined.auth).status_code == 200
