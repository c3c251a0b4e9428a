"""The thin adapter from JSON requests to the economics core (no economics is computed here).

K* comes from :func:`mots.economics.optimum.solve_mots_optimum` (Problem 2), p and r_i from the
mechanism's schedule (Mechanism 1 for SWAN), welfare from Eq. (5), the equilibrium check from
:func:`mots.economics.dynamics.run_dynamics`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from mots.economics.dynamics import run_dynamics
from mots.economics.error import generalization_error
from mots.economics.mechanisms.base import Mechanism
from mots.economics.mechanisms.registry import MECHANISMS, get_mechanism
from mots.economics.optimum import RequirementInfeasibleError, regime, solve_mots_optimum
from mots.economics.scenario import Scenario
from mots.economics.welfare import welfare_mots
from mots.platform.schemas import PricingRequest, PricingResult, WhatIfRequest
from mots.scenario_file import ScenarioError, parse_scenario


class PricingInputError(ValueError):
    """A request the pricing service cannot price; the message names the field and the rule."""


def mechanism_names() -> list[str]:
    """The mechanisms a request may name (the economics core's registry)."""
    return sorted(MECHANISMS)


def scenario_from(data: dict[str, Any], max_states: int) -> Scenario:
    """Validate a scenario document and refuse populations too large to price by enumeration."""
    try:
        sc = parse_scenario(data, source="scenario")
    except ScenarioError as exc:
        raise PricingInputError(str(exc)) from exc
    states = math.prod(t.count + 1 for t in sc.types)
    if states > max_states:
        raise PricingInputError(
            f"scenario.types: Π(N_i + 1) = {states} social states exceed this service's limit "
            f"{max_states} (MOTS_MAX_STATES)"
        )
    return sc


def mechanism_for(name: str, scenario: Scenario) -> Mechanism:
    """Build mechanism ``name`` for a scenario."""
    if name not in MECHANISMS:
        raise PricingInputError(f"mechanism: {name!r} is not one of {mechanism_names()}")
    try:
        return get_mechanism(name, scenario)
    except RequirementInfeasibleError as exc:
        raise PricingInputError(str(exc)) from exc


def _state(values: list[int] | None, scenario: Scenario, field: str) -> np.ndarray:
    try:
        arr = np.asarray(values, dtype=np.int64)
    except (OverflowError, ValueError, TypeError) as exc:
        raise PricingInputError(f"{field}: needs one integer count per type") from exc
    if arr.shape != (scenario.n_types,):
        raise PricingInputError(f"{field}: needs one count per type ({scenario.n_types})")
    if (arr < 0).any() or (arr > scenario.counts).any():
        raise PricingInputError(
            f"{field}: each count must lie in [0, N_i] = {scenario.counts.tolist()}"
        )
    return arr


def price(scenario: Scenario, mechanism_name: str, request: PricingRequest) -> PricingResult:
    """The mechanism's terms at K* (no ``participants``) or at a realised state."""
    try:
        with np.errstate(all="ignore"):
            result = _price(scenario, mechanism_name, request)
    except (OverflowError, ZeroDivisionError, FloatingPointError) as exc:
        raise PricingInputError(f"scenario: the numbers overflow ({exc})") from exc
    numbers = [result.price, result.welfare, result.epsilon, result.incentive_cost, *result.rewards]
    if not all(math.isfinite(x) for x in numbers):
        raise PricingInputError(
            "scenario: the utility, costs or error model give non-finite prices or welfare"
        )
    return result


def _price(scenario: Scenario, mechanism_name: str, request: PricingRequest) -> PricingResult:
    mech = mechanism_for(mechanism_name, scenario)
    try:
        opt = solve_mots_optimum(scenario)
    except RequirementInfeasibleError as exc:
        raise PricingInputError(str(exc)) from exc
    if request.participants is None:
        k, b = opt.participants, opt.buyers
    else:
        k = _state(request.participants, scenario, "participants")
        b = (
            scenario.counts - k
            if request.buyers is None
            else _state(request.buyers, scenario, "buyers")
        )
        if ((k + b) > scenario.counts).any():
            raise PricingInputError("buyers: K_i + B_i must not exceed N_i")
    quote = mech.quote(k)
    eps = float(generalization_error(k, scenario.sizes, scenario.error_model))
    return PricingResult(
        mechanism=mech.name,
        regime=regime(scenario),
        type_names=[t.name for t in scenario.types],
        participants=[int(x) for x in k],
        buyers=[int(x) for x in b],
        price=float(quote.price),
        rewards=[float(r) for r in quote.rewards],
        welfare=float(welfare_mots(scenario, k, b)),
        epsilon=eps,
        incentive_cost=max(0.0, float(mech.incentive_cost(k, b))),
        optimal=bool(np.array_equal(k, opt.participants)),
    )


def what_if(request: WhatIfRequest, default_mechanism: str, max_states: int) -> PricingResult:
    """The terms at K* after changing ε_req or one type's cost."""
    data = dict(request.scenario)
    if request.no_requirement:
        data["eps_req"] = None
    elif request.eps_req is not None:
        data["eps_req"] = request.eps_req
    if (request.type_name is None) != (request.cost is None):
        raise PricingInputError("type_name: give type_name and cost together")
    if request.type_name is not None:
        types = [dict(t) for t in data.get("types", []) if isinstance(t, dict)]
        hits = [t for t in types if t.get("name") == request.type_name]
        if not hits:
            raise PricingInputError(f"type_name: no type named {request.type_name!r}")
        hits[0]["cost"] = request.cost
        data["types"] = types
    scenario = scenario_from(data, max_states)
    return price(
        scenario,
        request.mechanism or default_mechanism,
        PricingRequest(scenario=data, mechanism=request.mechanism),
    )


def equilibrium(
    scenario: Scenario, mechanism_name: str, k: list[int], b: list[int]
) -> dict[str, Any]:
    """Whether no client gains by a unilateral move at (K, B) under the mechanism's schedule."""
    mech = mechanism_for(mechanism_name, scenario)
    kk, bb = _state(k, scenario, "participants"), _state(b, scenario, "buyers")
    result = run_dynamics(scenario, mech, kk, bb, max_moves=1)
    return {
        "equilibrium": bool(result.converged and result.moves == 0),
        "reason": str(result.reason),
    }
