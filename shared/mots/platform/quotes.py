"""The mechanism's terms for a scenario: the thin adapter from pricing requests to the economics core
(no economics is computed here), called as a library by the orchestration's round and by the
pricing service's what-if API.

K* comes from :func:`mots.economics.optimum.solve_mots_optimum` (Problem 2), p and r_i from the
mechanism's schedule (Mechanism 1 for SWAN), welfare from Eq. (5), the equilibrium check from
:func:`mots.economics.equilibrium.check_equilibrium` (one unilateral-deviation test per class).

Nothing here enumerates social states, so the population size N is not what costs: the solver's
time grows with the number of distinct types I (about I³, N-independent), which the service bounds
(``max_types``, MOTS_MAX_TYPES). Measured on the shared 2-core machine over random markets of
10³-10⁶ clients (CPU time of the solve, 25 markets per row, with a binding ε_req):
I = 16: median 7 ms, max 69 ms; I = 24: 16 / 115 ms; I = 32: 30 / 117 ms; I = 40: 55 ms / 2.1 s;
I = 100: 0.8 s / 21 s. Hence the default of 32. The paper's SWAN (mechanism ``swan``) scores its
potential on a domain of its own and has two more bounds (:data:`SWAN_MAX_THETA_TYPES`,
:data:`SWAN_MAX_CANDIDATE_CELLS`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from mots.economics.equilibrium import check_equilibrium
from mots.economics.error import generalization_error
from mots.economics.lagrangian import high_regime_domain_size
from mots.economics.mechanisms.base import Mechanism
from mots.economics.mechanisms.registry import MECHANISMS, get_mechanism
from mots.economics.optimum import regime, solve_mots_optimum
from mots.economics.scenario import Scenario
from mots.economics.welfare import welfare_mots
from mots.platform.api.pricing import PricingRequest, PricingResult, WhatIfRequest
from mots.platform.money import money
from mots.scenario_file import MAX_CLIENTS, ScenarioError, parse_scenario

SWAN_MAX_THETA_TYPES = 20
"""The paper's SWAN in the low regime interpolates θ over 2^I vertices (Eq. 11): measured 2^20 in
0.2 s and 130 MiB, 2^22 in 1 s and 330 MiB, 2^24 in 4 s and 1.5 GiB (robust SWAN has no such cost)."""

SWAN_MAX_CANDIDATE_CELLS = 10_000_000
"""The paper's SWAN in the high regime scores L on about Σ N_i candidate states of I counts each
(:func:`mots.economics.lagrangian.high_regime_domain_size`): measured 10^6 states × 3 types in
0.3 s and 110 MiB, 2·10^6 × 10 in 2.2 s and 540 MiB; this bounds states × I."""


class PricingInputError(ValueError):
    """A request the pricing service cannot price; the message names the field and the rule."""


def mechanism_names() -> list[str]:
    """The mechanisms a request may name (the economics core's registry)."""
    return sorted(MECHANISMS)


def scenario_from(data: dict[str, Any], max_types: int) -> Scenario:
    """Validate a scenario document; refuse more than ``max_types`` types or MAX_CLIENTS clients."""
    try:
        sc = parse_scenario(data, source="scenario")
    except ScenarioError as exc:
        raise PricingInputError(str(exc)) from exc
    if sc.n_types > max_types:
        raise PricingInputError(
            f"scenario.types: {sc.n_types} distinct client types exceed this service's limit of "
            f"{max_types} (MOTS_MAX_TYPES); the solver's time grows about as the cube of the "
            "number of types, not with the number of clients: merge similar types"
        )
    total = sum(t.count for t in sc.types)
    if total > MAX_CLIENTS:
        raise PricingInputError(
            f"scenario.types: Σ count = {total} clients exceed {MAX_CLIENTS:.0e}, beyond which "
            "float64 arithmetic no longer represents the counts exactly"
        )
    return sc


def _check_cost(name: str, scenario: Scenario) -> None:
    """Refuse the paper's SWAN where its own domain (not the solver) would be too large to score."""
    if name != "swan":
        return
    i = scenario.n_types
    if regime(scenario) == "low":
        if i > SWAN_MAX_THETA_TYPES:
            raise PricingInputError(
                f"scenario.types: mechanism 'swan' interpolates θ over 2^I vertices in the low "
                f"regime; at most {SWAN_MAX_THETA_TYPES} types, got {i} (swan_robust has no limit)"
            )
        return
    cells = high_regime_domain_size(scenario) * i
    if cells > SWAN_MAX_CANDIDATE_CELLS:
        raise PricingInputError(
            f"scenario.types: mechanism 'swan' scores L on about Σ N_i candidate states in the "
            f"high regime; states × types = {cells} exceed {SWAN_MAX_CANDIDATE_CELLS} "
            "(swan_robust has no limit)"
        )


def mechanism_for(name: str, scenario: Scenario) -> Mechanism:
    """Build mechanism ``name`` for a scenario."""
    if name not in MECHANISMS:
        raise PricingInputError(f"mechanism: {name!r} is not one of {mechanism_names()}")
    _check_cost(name, scenario)
    try:
        return get_mechanism(name, scenario)
    except ValueError as exc:  # the core's input errors (RequirementInfeasibleError among them)
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
    return result


def _amounts(price: float, rewards: list[float], cost: float, welfare: float, eps: float) -> None:
    """Refuse a quote whose numbers are not finite."""
    if not all(math.isfinite(x) for x in [price, welfare, eps, cost, *rewards]):
        raise PricingInputError(
            "scenario: the utility, costs or error model give non-finite prices or welfare"
        )


def _price(scenario: Scenario, mechanism_name: str, request: PricingRequest) -> PricingResult:
    mech = mechanism_for(mechanism_name, scenario)
    try:
        opt = solve_mots_optimum(scenario)
    except ValueError as exc:  # RequirementInfeasibleError, or a utility that overflows
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
    rewards = [float(r) for r in quote.rewards]
    cost = max(0.0, float(mech.incentive_cost(k, b)))
    welfare = float(welfare_mots(scenario, k, b))
    _amounts(float(quote.price), rewards, cost, welfare, eps)
    return PricingResult(
        mechanism=mech.name,
        regime=regime(scenario),
        type_names=[t.name for t in scenario.types],
        participants=[int(x) for x in k],
        buyers=[int(x) for x in b],
        price=money(float(quote.price)),
        rewards=[money(r) for r in rewards],
        welfare=welfare,
        epsilon=eps,
        incentive_cost=money(cost),
        optimal=bool(np.array_equal(k, opt.participants)),
    )


def what_if(request: WhatIfRequest, default_mechanism: str, max_types: int) -> PricingResult:
    """The terms at K* after changing ε_req or one type's cost."""
    data = dict(request.scenario)
    if request.no_requirement:
        data["eps_req"] = None
    elif request.eps_req is not None:
        data["eps_req"] = request.eps_req
    if (request.type_name is None) != (request.cost is None):
        raise PricingInputError("type_name: give type_name and cost together")
    if request.type_name is not None and request.cost is not None:
        types = [dict(t) for t in data.get("types", []) if isinstance(t, dict)]
        hits = [t for t in types if t.get("name") == request.type_name]
        if not hits:
            raise PricingInputError(f"type_name: no type named {request.type_name!r}")
        hits[0]["cost"] = float(request.cost)
        data["types"] = types
    scenario = scenario_from(data, max_types)
    return price(
        scenario,
        request.mechanism or default_mechanism,
        PricingRequest(scenario=data, mechanism=request.mechanism),
    )


def equilibrium(
    scenario: Scenario, mechanism_name: str, k: list[int], b: list[int]
) -> dict[str, Any]:
    """Whether no client gains by a unilateral move at (K, B) under the mechanism's schedule.

    ``reason`` is "equilibrium", or lists every class that would move, largest gain first:
    "type-1: 10 B→J (gain 2.9); …" (clients of that type playing B would each gain 2.9 by J).
    """
    mech = mechanism_for(mechanism_name, scenario)
    kk, bb = _state(k, scenario, "participants"), _state(b, scenario, "buyers")
    if ((kk + bb) > scenario.counts).any():
        raise PricingInputError("buyers: K_i + B_i must not exceed N_i")
    with np.errstate(all="ignore"):
        check = check_equilibrium(mech, kk, bb)
    names = [t.name for t in scenario.types]
    reason = "; ".join(
        f"{names[d.type_index]}: {d.clients} {d.source.name}→{d.target.name} (gain {d.gain:.6g})"
        for d in check.deviations
    )
    return {"equilibrium": check.equilibrium, "reason": reason or "equilibrium"}
