"""The pricing adapter: the economics core's numbers, unchanged, and clear errors for bad input."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest
import yaml
from fastapi.testclient import TestClient

from mots.economics.equilibrium import check_equilibrium
from mots.economics.mechanisms.registry import get_mechanism
from mots.economics.optimum import solve_mots_optimum
from mots.platform import quotes as engine
from mots.platform.api.pricing import PricingRequest, WhatIfRequest
from mots.platform.settings import DEV_OPERATOR_TOKEN
from mots.scenario_file import parse_scenario
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
    np.testing.assert_allclose(float(result.price), q.price, atol=5e-7)
    np.testing.assert_allclose([float(r) for r in result.rewards], q.rewards, atol=5e-7)
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
    np.testing.assert_allclose(
        float(result.price), get_mechanism("swan_robust", sc).quote(k).price, atol=5e-7
    )
    assert not result.optimal
    assert engine.equilibrium(sc, "swan_robust", opt.participants.tolist(), opt.buyers.tolist())[
        "equilibrium"
    ]
    assert not engine.equilibrium(sc, "swan_robust", k, [9, 5, 0])["equilibrium"]


def test_what_if_changes_one_thing() -> None:
    """A lower ε_req or a higher cost reprices the same population."""
    base = engine.what_if(WhatIfRequest(scenario=PAPER), "swan_robust", 32)
    free = engine.what_if(WhatIfRequest(scenario=PAPER, no_requirement=True), "swan_robust", 32)
    dear = engine.what_if(
        WhatIfRequest(scenario=PAPER, type_name="type-3", cost=Decimal(30)), "swan_robust", 32
    )
    expected = solve_mots_optimum(parse_scenario({**PAPER, "eps_req": None}))
    assert free.participants == expected.participants.tolist()
    assert dear.rewards[2] != base.rewards[2]


def _types(n_types: int, count: int = 10) -> list[dict[str, object]]:
    return [
        {"name": f"t{i}", "count": count, "data_size": 50 + 10 * i, "cost": 0.5 + 0.1 * i}
        for i in range(n_types)
    ]


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"types": []}, "types"),
        ({"eps_req": 0.001}, "eps_req"),
        ({"types": _types(33)}, "scenario.types: 33 distinct client types .*MOTS_MAX_TYPES"),
        ({"types": _types(2, 10**15)}, "scenario.types: Σ count = 2000000000000000"),
    ],
)
def test_bad_scenarios_name_the_field(change: dict[str, object], match: str) -> None:
    """Empty types, an unreachable ε_req, too many types or clients are refused with the field."""
    data = {**PAPER, **change}
    with pytest.raises(engine.PricingInputError, match=match):
        sc = engine.scenario_from(data, max_types=32)
        engine.price(sc, "swan_robust", PricingRequest(scenario=data))


@pytest.mark.parametrize("counts", [(100, 50, 50), (50_000, 25_000, 25_000), (10**9, 10**8, 10**8)])
def test_large_populations_are_priced_and_checked(counts: tuple[int, int, int]) -> None:
    """N = 200 split 100/50/50 (refused by the old state cap) and far larger markets: priced at K*,
    which passes the equilibrium check, with terms equal to the core's."""
    data = {
        **PAPER,
        "types": [{**t, "count": c} for t, c in zip(PAPER["types"], counts, strict=True)],
    }
    sc = engine.scenario_from(data, max_types=32)
    for name in ("swan_robust", "swan"):
        result = engine.price(sc, name, PricingRequest(scenario=data))
        opt = solve_mots_optimum(sc)
        assert result.participants == opt.participants.tolist() and result.optimal
        np.testing.assert_allclose(
            [float(r) for r in result.rewards],
            get_mechanism(name, sc).quote(opt.participants).rewards,
            atol=5e-7,
        )
        eq = engine.equilibrium(sc, name, result.participants, result.buyers)
        assert eq == {"equilibrium": True, "reason": "equilibrium"}


def test_type_bound_is_the_setting() -> None:
    """Exactly max_types types are accepted, one more is refused; the default prices 32 types."""
    data = {**PAPER, "types": _types(32), "eps_req": None}
    sc = engine.scenario_from(data, max_types=32)
    assert engine.price(sc, "swan_robust", PricingRequest(scenario=data)).optimal
    with pytest.raises(engine.PricingInputError, match="MOTS_MAX_TYPES"):
        engine.scenario_from(data, max_types=31)


def test_paper_swan_bounds_its_own_domain() -> None:
    """The paper's SWAN refuses (4xx) a low-regime θ over more than 2^20 vertices and a high-regime
    candidate domain beyond its bound, while robust SWAN prices both markets."""
    low = {**PAPER, "types": _types(21), "eps_req": None}
    high = {
        **PAPER,
        "types": _types(3, 2_000_000),
        "error_model": {"d_gamma2": 2000.0, "sigma2": 100.0},
        "eps_req": None,
    }
    for data, match in ((low, "2\\^I vertices"), (high, "candidate states")):
        sc = engine.scenario_from(data, max_types=32)
        with pytest.raises(engine.PricingInputError, match=match):
            engine.price(sc, "swan", PricingRequest(scenario=data))
        assert engine.price(sc, "swan_robust", PricingRequest(scenario=data)).optimal


def test_equilibrium_names_the_deviating_classes() -> None:
    """Off K* the check lists who would move, by type name, and refuses K + B > N with the field."""
    sc = parse_scenario(PAPER)
    mech = get_mechanism("swan_robust", sc)
    out = engine.equilibrium(sc, "swan_robust", [1, 0, 5], [9, 5, 0])
    moves = check_equilibrium(mech, [1, 0, 5], [9, 5, 0]).deviations
    assert not out["equilibrium"] and moves
    parts = out["reason"].split("; ")
    assert len(parts) == len(moves)
    for part, d in zip(parts, moves, strict=True):
        name = sc.types[d.type_index].name
        assert part.startswith(f"{name}: {d.clients} {d.source.name}→{d.target.name} (gain ")
    with pytest.raises(engine.PricingInputError, match="buyers: K_i \\+ B_i"):
        engine.equilibrium(sc, "swan_robust", [10, 0, 5], [1, 5, 0])


def test_api_answers_and_refuses() -> None:
    """The REST routes return the engine's result, 422 with the message for bad input."""
    client = TestClient(create_app(), headers={"Authorization": f"Bearer {DEV_OPERATOR_TOKEN}"})
    r = client.post("/v1/quote", json={"scenario": PAPER})
    assert r.status_code == 200 and r.json()["mechanism"] == "swan_robust"
    r = client.post("/v1/quote", json={"scenario": PAPER, "mechanism": "nope"})
    assert r.status_code == 422 and "mechanism" in r.json()["detail"]
    r = client.post("/v1/what-if", json={"scenario": PAPER, "type_name": "type-9", "cost": "1"})
    assert r.status_code == 422 and "type_name" in r.json()["detail"]
    assert "swan" in client.get("/v1/mechanisms").json()["items"]
    first = client.get("/v1/mechanisms", params={"limit": 1}).json()
    second = client.get("/v1/mechanisms", params={"limit": 1, "cursor": first["next"]}).json()
    assert len(first["items"]) == 1 and second["items"] != first["items"]
    r = client.post("/v1/quote", json={"scenario": {**PAPER, "types": _types(40)}})
    assert r.status_code == 422 and "MOTS_MAX_TYPES" in r.json()["detail"]
    assert "mots_pricing_requests_total" in client.get("/metrics").text


def test_money_crosses_the_pricing_api_as_six_place_strings() -> None:
    """Price, rewards and incentive cost leave as six-place decimal strings (as the market's do);
    a JSON number given as the what-if ``cost`` is refused in one line naming body.cost."""
    client = TestClient(create_app(), headers={"Authorization": f"Bearer {DEV_OPERATOR_TOKEN}"})
    for route, extra in (("/v1/quote", {}), ("/v1/what-if", {"type_name": "type-3", "cost": "30"})):
        body = client.post(route, json={"scenario": PAPER, **extra}).json()
        amounts = [body["price"], body["incentive_cost"], *body["rewards"]]
        assert all(isinstance(a, str) and len(a.split(".")[1]) == 6 for a in amounts), body
        assert isinstance(body["welfare"], float) and isinstance(body["epsilon"], float)
    r = client.post("/v1/what-if", json={"scenario": PAPER, "type_name": "type-3", "cost": 30})
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert detail.startswith("body.cost: ") and "decimal string" in detail and "\n" not in detail
