"""What the platform's APIs share: limits, typed ids and amounts, realistic examples, pages,
and the round states (the platform's and the market's)."""

from __future__ import annotations

import enum
from decimal import Decimal
from typing import Annotated, Any, Generic, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    Strict,
)

# A client's strategy s_n ∈ {A, J, B} (Eq. 2) is the economics core's, re-exported for the schemas.
from mots.economics.best_response import Strategy as Strategy
from mots.platform.money import (
    FRACTION_RE,
    NONZERO_FRACTION_RE,
    ZERO_FRACTION_RE,
    amount_schema,
    canonical_amount,
    money_str,
)
from mots.platform.money import Money as Money

MAX_AMOUNT = Decimal(10**9)
"""Largest amount one call may move or declare (keeps every balance far inside BIGINT micro-units)."""
_UP_TO_A_BILLION = rf"1000000000{ZERO_FRACTION_RE}"
PositiveMoney = Annotated[
    Decimal,
    BeforeValidator(canonical_amount),
    Field(gt=0, le=MAX_AMOUNT, max_digits=18, decimal_places=6),
    PlainSerializer(money_str, return_type=str, when_used="json"),
    amount_schema(
        rf"^(?:[1-9][0-9]{{0,8}}{FRACTION_RE}|0{NONZERO_FRACTION_RE}|{_UP_TO_A_BILLION})$",
        "a decimal string above 0 and at most 1000000000, at most 6 decimals",
    ),
]
"""An amount one call moves: more than 0, at most :data:`MAX_AMOUNT`."""
BoundedMoney = Annotated[
    Decimal,
    BeforeValidator(canonical_amount),
    Field(ge=0, le=MAX_AMOUNT, max_digits=18, decimal_places=6),
    PlainSerializer(money_str, return_type=str, when_used="json"),
    amount_schema(
        rf"^(?:-?0{ZERO_FRACTION_RE}|(?:0|[1-9][0-9]{{0,8}}){FRACTION_RE}|{_UP_TO_A_BILLION})$",
        "a decimal string from 0 to 1000000000, at most 6 decimals",
    ),
]
"""An amount one call declares (a cost, a deposit per wallet, a budget): 0 to :data:`MAX_AMOUNT`."""
MAX_ID = 2**31 - 1


def json_integer(value: Any) -> Any:
    """An integral JSON number (``7.0``) as the integer it is: JSON Schema's ``integer`` holds
    every number with a zero fraction, so the OpenAPI documents' ``"type": "integer"`` takes it
    (issue 37). Anything else is left for :class:`~pydantic.Strict` to refuse (``"7"``, ``true``,
    ``7.5``)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


Id = Annotated[
    int,
    BeforeValidator(json_integer),
    Strict(),
    Field(ge=1, le=MAX_ID, description="a positive 32-bit identifier"),
]
"""An id in a request body: a JSON integer only ("1", 1.5 and true are refused; 1.0 is 1)."""
TypeName = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")]


TOKEN_EXAMPLE = (
    "mots.7.1795709105.4c848faec99956fcb6853eafb5762e2e.FWTQG8XfG7kDOCLwWzysoGTsEFZ6T0hKcLwXim3FXFQ"
)
"""A signed client token as :func:`mots.platform.tokens.sign` makes one (client 7)."""
PRICED_EXAMPLE: dict[str, Any] = {
    "mechanism": "swan_robust",
    "regime": "low",
    "type_names": ["type-1", "type-2", "type-3"],
    "participants": [0, 0, 5],
    "buyers": [10, 5, 0],
    "price": "0.750000",
    "rewards": ["-0.250000", "0.450000", "2.250000"],
    "welfare": 170199.74,
    "epsilon": 0.3227,
    "incentive_cost": "0.000000",
    "optimal": True,
}
SETTLE_EXAMPLE: dict[str, Any] = {
    "round_id": 3,
    "payments": "11.250000",
    "rewards_paid": "11.250000",
    "charges": "0.000000",
    "subsidy": "0.000000",
    "surplus": "0.000000",
    "refunds": "0.000000",
    "subsidy_budget": "50.000000",
    "captured_price": "0.750000",
    "captured_rewards": {"type-1": "-0.250000", "type-2": "0.450000", "type-3": "2.250000"},
    "capture_rule": None,
}
"""Realistic instances (the demo's market, round 3) reused by the models' OpenAPI examples."""


def example(instance: dict[str, Any]) -> ConfigDict:
    """A model's config adding one realistic instance as its OpenAPI example (``examples``)."""
    return ConfigDict(json_schema_extra={"examples": [instance]})


class Schema(BaseModel):
    """A request or response body: unknown fields are refused (422 naming the field)."""

    model_config = ConfigDict(extra="forbid")


T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    """One page of a list route: its items, and the cursor of the next page (``null``: the last);
    see :mod:`mots.platform.paging`."""

    model_config = ConfigDict(extra="forbid")

    items: list[T] = Field(..., description="at most `limit` items, in the route's order")
    next: str | None = Field(
        ...,
        description="pass as `cursor` for the next page; null on the last page",
        examples=["YWZ0ZXI6NDI"],
    )


class MechanismPage(Page[str]):
    """A page of the mechanism names a pricing request may give."""

    model_config = example(
        {"items": ["dynamic", "fl_optimum", "modified_fl", "swan", "swan_robust"], "next": None}
    )


class RoundState(enum.StrEnum):
    """States of a round, one enum for both services that store one (issue 38): the orchestration
    moves a round along them in order; the market stores the ones it sees (``collecting`` while it
    takes decisions and purchases, ``training`` once closed, ``settling`` once booked,
    ``settled_by_rule`` once refunded, ``published`` once its model is downloadable)."""

    OPEN = "open"
    COLLECTING = "collecting"
    TRAINING = "training"
    EVALUATING = "evaluating"
    SETTLING = "settling"
    PUBLISHED = "published"
    FAILED = "failed"
    SETTLED_BY_RULE = "settled_by_rule"


TERMINAL_STATES = frozenset({RoundState.PUBLISHED, RoundState.SETTLED_BY_RULE})
