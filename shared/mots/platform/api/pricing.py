"""The pricing service's REST bodies (``services/pricing``), also the payloads of its tasks."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    model_validator,
)

# A client's strategy s_n ∈ {A, J, B} (Eq. 2) is the economics core's, re-exported for the schemas.
from mots.economics.best_response import Strategy as Strategy
from mots.economics.optimum import SocialState
from mots.economics.scenario import SCENARIO_EXAMPLE
from mots.platform.api.base import PRICED_EXAMPLE, BoundedMoney, Schema, example
from mots.platform.money import Money as Money
from mots.platform.money import QuotedMoney, money


class ErrorModelIn(Schema):
    """ε0, dγ² and σ² of Eq. (3)."""

    d_gamma2: float = Field(..., gt=0, allow_inf_nan=False)
    sigma2: float = Field(0.0, ge=0, allow_inf_nan=False)
    eps0: float = Field(0.0, ge=0, allow_inf_nan=False)


class PricingRequest(Schema):
    """A scenario (as :func:`mots.scenario_file.parse_scenario` reads it) and the state to price.

    ``participants`` absent: price the welfare-maximising state K* (Problem 2); present: evaluate
    the mechanism's schedule p(K), r_i(K) at that realised state.
    """

    model_config = example(
        {
            "scenario": SCENARIO_EXAMPLE,
            "mechanism": "swan_robust",
            "participants": None,
            "buyers": None,
        }
    )

    scenario: dict[str, Any] = Field(..., description="types, error_model, utility, eps_req")
    mechanism: str | None = Field(
        None, description="mechanism name; the registry default if absent"
    )
    participants: list[int] | None = Field(None, description="K per type, in the scenario's order")
    buyers: list[int] | None = Field(None, description="B per type; N − K if absent")


class WhatIfRequest(Schema):
    """A what-if query: the same scenario with another ε_req or another cost of one type."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "scenario": SCENARIO_EXAMPLE,
                    "mechanism": "swan_robust",
                    "eps_req": None,
                    "no_requirement": False,
                    "type_name": "type-2",
                    "cost": "0.800000",
                }
            ],
            # type_name and cost together or neither (mots.platform.quotes.what_if; issue 37)
            "anyOf": [
                {"properties": {"type_name": {"type": "null"}, "cost": {"type": "null"}}},
                {
                    "required": ["type_name", "cost"],
                    "properties": {"type_name": {"type": "string"}, "cost": {"type": "string"}},
                },
            ],
        },
    )

    scenario: dict[str, Any]
    mechanism: str | None = None
    eps_req: float | None = Field(None, gt=0, description="another ε_req (absent: keep)")
    no_requirement: bool = Field(False, description="drop ε_req (ε_req = +∞)")
    type_name: str | None = Field(None, description="type whose cost changes")
    cost: BoundedMoney | None = Field(None, description="new C_i of type_name")


class PricingResult(Schema, SocialState[list[int], float]):
    """SWAN's terms at a social state (K and B in the scenario's type order, with its welfare,
    Eq. 5, and ε, Eq. 3), and the platform's incentive cost."""

    model_config = example(PRICED_EXAMPLE)

    mechanism: str
    regime: Literal["low", "high"]
    type_names: list[str]
    price: QuotedMoney
    rewards: list[QuotedMoney]
    incentive_cost: QuotedMoney = Field(
        ..., description="[Σ K_i r_i − Σ B_i p]⁺ (Problem 1's Eq. 7)"
    )
    optimal: bool = Field(..., description="True when the state is the welfare maximiser K*")

    @model_validator(mode="before")
    @classmethod
    def _stored_floats(cls, data: Any) -> Any:
        """Quotes stored before the amounts were Money (floats in a JSON column) still load,
        rounded once as :func:`mots.platform.money.money` books them."""
        if not isinstance(data, dict):
            return data
        out = dict(data)
        for key in ("price", "incentive_cost"):
            if isinstance(out.get(key), float):
                out[key] = money(out[key])
        if isinstance(out.get("rewards"), list):
            out["rewards"] = [money(r) if isinstance(r, float) else r for r in out["rewards"]]
        return out


class EquilibriumRequest(PricingRequest):
    """A realised state (K, B) of a scenario to check under a mechanism's schedule: a
    :class:`PricingRequest` whose state is required."""

    model_config = example(
        {
            "scenario": SCENARIO_EXAMPLE,
            "mechanism": "swan_robust",
            "participants": [2, 1, 1],
            "buyers": [3, 2, 2],
        }
    )

    participants: list[int] = Field(..., description="K per type, in the scenario's order")
    buyers: list[int] = Field(..., description="B per type, in the scenario's order")


class EquilibriumResult(Schema):
    """Whether no client gains by a unilateral move at (K, B), and why the check stopped."""

    equilibrium: bool
    reason: str
