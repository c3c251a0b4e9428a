"""The pricing adapter: the economics core's numbers, unchanged, and clear errors for bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from fastapi.testclient import TestClient

from mots.economics.mechanisms.registry import get_mechanism
from mots.economics.optimum import solve_mots_optimum
from mots.platform.schemas import PricingRequest, WhatIfRequest
from mots.scenario_file import parse_scenario
from services.pricing import engine
from services.pricing.main import create_app

PAPER = yaml.safe_load(
    (Path(__file__).parents[3] / "examples" / "scenarios" / "paper_mnist.yaml").read_text()
)


def test_quote_at_the_optimum_is_the_mechanisms() -> None:
    """K*, p and r_i equal solve_mots_optimum and the registry mechanism's quote at K*."""
    sc = parse_scenario(PAPER)
    result = engine.price(sc, "swan_robust", PricingRequest(scenario=PAPER))
    opt = solve_mots_optimum(sc)
    q = get_mechanism("swan_robust", sc).quote(opt.participants)
    assert result.participants == opt.participants.tolist()
    assert result.buyers == opt.buyers.tolist()
    np.testing.assert_allclose(result.price, q.price)
    np.testing.assert_allclose(result.rewards, q.rewards)
    np.testing.assert_allclose(result.welfare, opt.welfare)
    assert result.optimal
    # Theorem 3: budget balance at K* when W* > 0.
    assert result.welfare > 0 and result.incentive_cost == pytest.approx(0.0, abs=1e-9)


def test_quote_at_a_realised_state_and_equilibrium_check() -> None:
    """Off K*: the schedule at that state; K* passes the equilibrium check, an off state fails."""
    sc = parse_scenario(PAPER)
    opt = solve_mots_optimum(sc)
    k = [1, 0, 5]
    result = engine.price(sc, "swan_robust", PricingRequest(scenario=PAPER, participants=k))
    np.testing.assert_allclose(result.price, get_mechanism("swan_robust", sc).quote(k).price)
    assert not result.optimal
    assert engine.equilibrium(sc, "swan_robust", opt.participants.tolist(), opt.buyers.tolist())[
        "equilibrium"
    ]
    assert not engine.equilibrium(sc, "swan_robust", k, [9, 5, 0])["equilibrium"]


def test_what_if_changes_one_thing() -> None:
    """A lower ε_req or a higher cost reprices the same population."""
    base = engine.what_if(WhatIfRequest(scenario=PAPER), "swan_robust", 10**6)
    free = engine.what_if(WhatIfRequest(scenario=PAPER, no_requirement=True), "swan_robust", 10**6)
    dear = engine.what_if(
        WhatIfRequest(scenario=PAPER, type_name="type-3", cost=30.0), "swan_robust", 10**6
    )
    expected = solve_mots_optimum(parse_scenario({**PAPER, "eps_req": None}))
    assert free.participants == expected.participants.tolist()
    assert dear.rewards[2] != base.rewards[2]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"types": []}, "types"),
        ({"eps_req": 0.001}, "eps_req"),
        ({"types": [{"name": "a", "count": 60, "data_size": 1, "cost": 0}] * 1}, "types"),
    ],
)
def test_bad_scenarios_name_the_field(change: dict[str, object], field: str) -> None:
    """Empty types, an unreachable ε_req or a population too large are refused with the field."""
    data = {**PAPER, **change}
    with pytest.raises(engine.PricingInputError, match=field):
        sc = engine.scenario_from(data, max_states=50 if field == "types" else 10**6)
        engine.price(sc, "swan_robust", PricingRequest(scenario=data))


def test_api_answers_and_refuses() -> None:
    """The REST routes return the engine's result, 422 with the message for bad input."""
    client = TestClient(create_app())
    r = client.post("/v1/quote", json={"scenario": PAPER})
    assert r.status_code == 200 and r.json()["mechanism"] == "swan_robust"
    r = client.post("/v1/quote", json={"scenario": PAPER, "mechanism": "nope"})
    assert r.status_code == 422 and "mechanism" in r.json()["detail"]
    r = client.post("/v1/what-if", json={"scenario": PAPER, "type_name": "type-9", "cost": 1})
    assert r.status_code == 422 and "type_name" in r.json()["detail"]
    assert "swan" in client.get("/v1/mechanisms").json()
    assert "mots_pricing_requests_total" in client.get("/metrics").text
