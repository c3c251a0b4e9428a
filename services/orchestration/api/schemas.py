"""The round API's response bodies (the OpenAPI schemas of ``/v1/rounds``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from mots.economics.scenario import SCENARIO_EXAMPLE, Scenario
from mots.platform.api.base import MAX_AMOUNT, PRICED_EXAMPLE, RoundState, example
from mots.platform.api.pricing import PricingResult
from mots.platform.money import Money, money
from mots.platform.timestamps import Timestamp
from services.orchestration.products import (
    PROGRESS_EXAMPLE,
    SUMMARY_EXAMPLE,
    RoundSummary,
    TrainingProgress,
)

QUOTE_EXAMPLE: dict[str, Any] = PRICED_EXAMPLE | {
    "price": "0.750000",
    "rewards": ["-0.250000", "0.450000", "2.250000"],
    "incentive_cost": "0.000000",
}
ROUND_EXAMPLE: dict[str, Any] = {
    "id": 3,
    "state": "published",
    "mechanism": "swan_robust",
    "rule": None,
    "created_at": "2026-11-26T16:20:05Z",
    "summary": SUMMARY_EXAMPLE,
    "training_progress": PROGRESS_EXAMPLE,
    "quote": QUOTE_EXAMPLE,
    "scenario": SCENARIO_EXAMPLE,
    "deadlines": {"collecting": "2026-11-26T16:05:05Z"},
}
TRANSITION_EXAMPLE: dict[str, Any] = {
    "from": "collecting",
    "to": "training",
    "seconds_in_from": 3.1,
    "note": "K=[0, 0, 5] B=[10, 5, 0]",
    "at": "2026-11-26T16:20:08Z",
}
"""Realistic instances (the demo's round 3) for the OpenAPI examples."""


MIN_COLLECT_S = 1.0
"""Shortest collection window a round may be given (a client needs a moment to answer)."""
MAX_COLLECT_S = 86_400.0
"""Longest collection window a round may be given (a day: one round at a time blocks the next)."""


class RoundStart(BaseModel):
    """Options of a new round (the body of ``POST /v1/rounds`` is optional)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"subsidy_budget": "50.000000", "collect_seconds": 120}]},
    )

    subsidy_budget: Money | None = Field(
        None,
        ge=0,
        le=MAX_AMOUNT,
        description="most the platform subsidises this round (currency units); payouts beyond it"
        " are scaled down at settlement. Omitted: MOTS_ROUND_SUBSIDY_BUDGET",
    )
    collect_seconds: float | None = Field(
        None,
        ge=MIN_COLLECT_S,
        le=MAX_COLLECT_S,
        allow_inf_nan=False,
        description=f"how long the round takes decisions, {MIN_COLLECT_S:g} to {MAX_COLLECT_S:g} s;"
        " the silent then abstain. Omitted: MOTS_COLLECT_TIMEOUT_S",
    )


class RoundQuote(BaseModel):
    """The terms at K* a round opened with, as the market booked them: p, r_i and the incentive
    cost as six-place money (the pricing service's floats rounded once, half-even)."""

    model_config = example(QUOTE_EXAMPLE)

    mechanism: str
    regime: Literal["low", "high"]
    type_names: list[str]
    participants: list[int] = Field(..., description="K*_i per type, in type_names' order")
    buyers: list[int] = Field(..., description="B*_i per type")
    price: Money
    rewards: list[Money] = Field(..., description="r_i per type")
    welfare: float
    epsilon: float
    incentive_cost: Money = Field(..., description="[Σ K_i r_i − Σ B_i p]⁺ (Problem 1's Eq. 7)")
    optimal: bool

    @classmethod
    def of(cls, priced: PricingResult) -> RoundQuote:
        """The pricing service's terms with their amounts as the market books them."""
        return cls(
            **priced.model_dump(exclude={"price", "rewards", "incentive_cost"}),
            price=money(priced.price),
            rewards=[money(r) for r in priced.rewards],
            incentive_cost=money(priced.incentive_cost),
        )


class RoundStarted(BaseModel):
    """A round accepted: it opens as soon as the orchestration worker runs its first step."""

    model_config = example({"round_id": 3, "state": "open"})

    round_id: int
    state: RoundState


class TransitionOut(BaseModel):
    """One move of a round, with the seconds it spent in the state it left."""

    model_config = ConfigDict(
        populate_by_name=True,
        serialize_by_alias=True,
        json_schema_extra={"examples": [TRANSITION_EXAMPLE]},
    )

    from_state: RoundState = Field(..., alias="from")
    to: RoundState
    seconds_in_from: float
    note: str | None
    at: Timestamp


class RoundOut(BaseModel):
    """A round's state and products: its quote at K*, the priced market, the latest FedAvg round
    while it trains, and its figures once it has finished."""

    model_config = example(ROUND_EXAMPLE)

    id: int
    state: RoundState
    mechanism: str | None
    rule: str | None = Field(..., description="why the round was settled by rule, if it was")
    created_at: Timestamp
    summary: RoundSummary | None = Field(..., description="the figures of a finished round")
    training_progress: TrainingProgress | None = Field(
        ..., description="while training: the latest FedAvg round, clients done, ε so far"
    )
    quote: RoundQuote | None = Field(..., description="the terms at K* the round opened with")
    scenario: Scenario | None = Field(
        ..., description="the priced population and error model: a pricing what-if query's body"
    )
    deadlines: dict[str, Timestamp] | None = Field(
        None,
        description="the deadline of each state the round entered (RFC 3339, UTC); past it the "
        "reconciler re-drives the round",
    )
    predicted_epsilon: float | None = Field(
        None,
        description="ε the round opened with: the quote's ε(K*) (Eq. 3, the error model's "
        "estimate then); None before the quote",
    )
    measured_epsilon: float | None = Field(
        None, description="the evaluation service's test loss of the round's model; None before"
    )


class RoundDetail(RoundOut):
    """A round with its transitions, oldest first."""

    model_config = example(ROUND_EXAMPLE | {"transitions": [TRANSITION_EXAMPLE]})

    transitions: list[TransitionOut]
