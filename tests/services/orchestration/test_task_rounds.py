"""Rounds of two tasks at once through the real services (issue 36): a digits round publishes
while a fashion-mnist round collects, each priced by its own SWAN on its own scenario, and the
one ledger stays exact; a round of a task with no clients fails by rule and touches neither."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from mots.economics.mechanisms.registry import get_mechanism
from mots.economics.scenario import Scenario
from mots.economics.utility import PowerUtility
from mots.local.agents import act, choose, register_population, wait_for_quote
from mots.local.demo import wait_round
from mots.platform.api.base import Strategy
from mots.platform.settings import DEV_OPERATOR_TOKEN
from mots.tasks.task_file import SHIPPED_DIR, inline_task_text, load_task
from tests.services.orchestration.conftest import OPERATOR, UTILITY
from tests.services.orchestration.test_rounds import _ledger_balanced

pytestmark = pytest.mark.integration

DIGIT_TYPES = [
    {"name": "type-1", "count": 3, "data_size": 20, "cost": "0.05"},
    {"name": "type-3", "count": 2, "data_size": 100, "cost": "0.25"},
]


def _store_task(market, name: str) -> None:
    """The operator stores the shipped task file ``name`` at the market."""
    content = inline_task_text(Path(SHIPPED_DIR) / f"{name}.yaml")
    r = market.post("/v1/tasks", json={"content": content}, headers=OPERATOR)
    assert r.status_code == 201, r.text


def _own_swan(body: dict) -> None:
    """The round's quote is SWAN's terms at K* on the round's own scenario (economics core)."""
    scenario = Scenario.model_validate(body["scenario"])
    quote = body["quote"]
    terms = get_mechanism("swan", scenario).quote(quote["participants"])
    assert Decimal(quote["price"]) == pytest.approx(Decimal(str(terms.price)), abs=Decimal("1e-6"))
    for got, want in zip(quote["rewards"], terms.rewards, strict=True):
        assert Decimal(got) == pytest.approx(Decimal(str(want)), abs=Decimal("1e-6"))


def test_a_digits_round_publishes_while_a_fashion_mnist_round_runs(platform) -> None:
    """Two tasks' rounds at once: digits (its own clients, U(ε) and ε prior from its task file)
    publishes while fashion-mnist's round still collects; then fashion-mnist publishes. A third
    round, of breast-cancer (stored, no client), is settled by rule meanwhile. The prices and
    rewards differ, each is SWAN's on its own scenario, and ledger-check is exact."""
    _, market, orchestration, agents = platform
    for name in ("digits", "breast-cancer"):
        _store_task(market, name)
    digit_agents = register_population(
        market, DIGIT_TYPES, DEV_OPERATOR_TOKEN, deposit="10", task="digits"
    )
    fm = orchestration.post("/v1/rounds", json={"collect_seconds": 60}).json()["round_id"]
    dg = orchestration.post("/v1/rounds", json={"task": "digits"})
    assert dg.status_code == 202, dg.text
    dg = dg.json()["round_id"]
    bc = orchestration.post("/v1/rounds", json={"task": "breast-cancer"}).json()["round_id"]
    assert orchestration.post("/v1/rounds", json={"task": "digits"}).status_code == 409
    fm_quote = wait_for_quote(market, agents[0], fm)
    dg_quote = wait_for_quote(market, digit_agents[0], dg)
    digits_utility = load_task("digits").economics.scenario.utility
    dg_choices = choose(digit_agents, dg_quote, digits_utility)
    act(market, digit_agents, dg, dg_choices)
    dg_body = wait_round(orchestration, dg, 120)
    assert dg_body["state"] == "published", dg_body
    assert orchestration.get(f"/v1/rounds/{fm}").json()["state"] == "collecting"
    bc_body = wait_round(orchestration, bc, 30)
    assert bc_body["state"] == "settled_by_rule" and "breast-cancer" in bc_body["rule"]

    choices = choose(agents, fm_quote, PowerUtility.model_validate(UTILITY))
    act(market, agents, fm, choices)
    fm_body = wait_round(orchestration, fm, 240)
    assert fm_body["state"] == "published", fm_body
    assert (fm_body["task"], dg_body["task"]) == ("fashion-mnist", "digits")
    assert fm_body["scenario"]["utility"] != dg_body["scenario"]["utility"]
    assert fm_body["quote"]["price"] != dg_body["quote"]["price"]
    for body in (fm_body, dg_body):
        _own_swan(body)
    _ledger_balanced(market)
    joined = next(a for a in digit_agents if dg_choices[a.id] == Strategy.JOIN)
    assert market.get(f"/v1/rounds/{dg}/model", headers=joined.auth).status_code == 200
