"""The round API's bodies (``/v1/rounds`` on the orchestration), used by the orchestration
service and by the SDK (:class:`mots.client.RoundsClient`) alike.

A round's figures (:class:`RoundSummary`), its training progress (:class:`TrainingProgress`), its
settlement (:class:`SettleResult`, also the market's answer to ``market.settle_round``) and the
error model's fit (:class:`ErrorFit`, the evaluation's) are shown here and stored by the
orchestration in its round table as they are shown. The SDK reads answers with
``extra="ignore"``, so a newer service with more fields still parses.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from mots.economics.optimum import SocialState
from mots.economics.scenario import SCENARIO_EXAMPLE, Scenario
from mots.platform.api.base import (
    PRICED_EXAMPLE,
    SETTLE_EXAMPLE,
    TERMINAL_STATES,
    BoundedMoney,
    RoundState,
    Schema,
    example,
)
from mots.platform.api.pricing import PricingResult
from mots.platform.api.tasks import DEFAULT_TASK, TaskName
from mots.platform.money import Money, QuotedMoney, money
from mots.platform.timestamps import Timestamp

PROGRESS_EXAMPLE: dict[str, Any] = {
    "fedavg_round": 3,
    "fedavg_rounds": 5,
    "clients_done": 5,
    "clients": 5,
    "epsilon": 0.412,
    "round_seconds": 2.8,
    "in_progress": False,
}
SUMMARY_EXAMPLE: dict[str, Any] = {
    "round_id": 3,
    "state": "published",
    "rule": None,
    "mechanism": "swan_robust",
    "participants": {"type-1": 0, "type-2": 0, "type-3": 5},
    "buyers": {"type-1": 10, "type-2": 5, "type-3": 0},
    "price": "0.750000",
    "rewards": {"type-1": "-0.250000", "type-2": "0.450000", "type-3": "2.250000"},
    "welfare": 170199.74,
    "incentive_cost": "0.000000",
    "incentive_cost_predicted": "0.000000",
    "epsilon": 0.338,
    "epsilon_predicted": 0.3227,
    "epsilon_training": 0.341,
    "equilibrium": True,
    "round_seconds": 21.4,
    "phase_seconds": {
        "open": 0.2,
        "collecting": 3.1,
        "training": 14.6,
        "evaluating": 2.9,
        "settling": 0.6,
    },
    "platform_seconds": 3.9,
    "platform_share": 0.182,
    "training_round_seconds": [3.2, 2.9, 2.8, 2.8, 2.9],
    "dropped": [],
    "failed_verification": [],
    "verification": {"16": "verified", "17": "verified"},
    "settlement": SETTLE_EXAMPLE,
    "error_model_fit": {"eps0": 0.29, "d_gamma2": 10.4, "sigma2": 0.018, "r2": 0.97, "points": 4},
}
QUOTE_EXAMPLE: dict[str, Any] = PRICED_EXAMPLE | {
    "price": "0.750000",
    "rewards": ["-0.250000", "0.450000", "2.250000"],
    "incentive_cost": "0.000000",
}
ROUND_EXAMPLE: dict[str, Any] = {
    "id": 3,
    "state": "published",
    "task": "fashion-mnist",
    "task_version": 1,
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
        json_schema_extra={
            "examples": [{"task": "digits", "subsidy_budget": "50.000000", "collect_seconds": 120}]
        },
    )

    task: TaskName = Field(
        DEFAULT_TASK,
        description="the task the round trains (a task file's name; issue 36): its clients, its "
        "economics, its model. One round per task at a time (409); an unknown task is a 404. "
        "Omitted: fashion-mnist",
    )
    subsidy_budget: BoundedMoney | None = Field(
        None,
        description="most the platform subsidises this round (currency units); payouts beyond it"
        " are scaled down at settlement. Omitted: the task's subsidy_budget (fashion-mnist:"
        " MOTS_ROUND_SUBSIDY_BUDGET)",
    )
    collect_seconds: float | None = Field(
        None,
        ge=MIN_COLLECT_S,
        le=MAX_COLLECT_S,
        allow_inf_nan=False,
        description=f"how long the round takes decisions, {MIN_COLLECT_S:g} to {MAX_COLLECT_S:g} s;"
        " the silent then abstain. Omitted: the task's collection window (fashion-mnist:"
        " MOTS_COLLECT_TIMEOUT_S)",
    )


class RoundQuote(PricingResult):
    """The terms at K* a round opened with, as the market booked them: the quote's fields, with
    p, r_i and the incentive cost as the ledger's money (rounded once, half-even)."""

    model_config = example(QUOTE_EXAMPLE) | {"extra": "ignore"}

    price: Money
    rewards: list[Money] = Field(..., description="r_i per type")
    incentive_cost: Money = Field(..., description="[Σ K_i r_i − Σ B_i p]⁺ (Problem 1's Eq. 7)")

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


class TrainingProgress(Schema):
    """The latest FedAvg round of a training under way, as the round API shows it."""

    model_config = example(PROGRESS_EXAMPLE)

    fedavg_round: int = Field(..., description="1-based number of the FedAvg round")
    fedavg_rounds: int = Field(..., description="FedAvg rounds in the training")
    clients_done: int
    clients: int
    epsilon: float | None = Field(..., description="test loss so far; None before the first")
    round_seconds: float
    in_progress: bool = Field(..., description="True while clients of this FedAvg round train")


class TrainingCurve(BaseModel):
    """What any training of a coalition reports: ε (the final global test loss, Eq. 3's
    measured counterpart), the test loss and the seconds of each FedAvg round, and the engine's
    metadata. The engines' :class:`mots.training.artifacts.TrainingResult` and the round's
    :class:`mots.platform.contracts.TrainResult` both extend it (one shape, issue 38)."""

    epsilon: float
    losses: list[float]
    round_seconds: list[float]
    metadata: dict[str, Any] = Field(default_factory=dict)


class ErrorEstimate(Schema):
    """An estimate of Eq. 3's parameters (with ε0) from ``points`` published measurements: what
    the refit (:class:`ErrorFit`) and the posterior
    (:class:`mots.platform.contracts.ErrorPosteriorEstimate`) share."""

    eps0: float
    d_gamma2: float
    sigma2: float
    points: int


class ErrorFit(ErrorEstimate):
    """The error model refitted from all measurements so far (Eq. 3 with ε0)."""

    model_config = example(
        {"eps0": 0.29, "d_gamma2": 10.4, "sigma2": 0.018, "r2": 0.97, "points": 4}
    )

    r2: float | None


class SettleResult(Schema):
    """Totals of a settlement, from the ledger."""

    model_config = example(SETTLE_EXAMPLE)

    round_id: int
    payments: Money
    rewards_paid: Money
    charges: Money
    subsidy: Money
    surplus: Money
    refunds: Money
    subsidy_budget: Money | None = Field(None, description="the round's cap on the subsidy")
    captured_price: Money | None = Field(None, description="what each paid buyer was charged")
    captured_rewards: dict[str, Money] = Field(
        default_factory=dict, description="r_i per type as booked: within the quote and budget"
    )
    capture_rule: str | None = Field(None, description="the stated capture rule that applied")
    removed: list[int] = Field(
        default_factory=list,
        description="participants revoked or departed before settlement: not paid, not charged",
    )
    bonds_returned: Money = Field(
        Decimal(0), description="participation bonds returned to their wallets"
    )
    bonds_slashed: Money = Field(
        Decimal(0),
        description="participation bonds forfeited to platform:surplus (failed verification)",
    )


STATE_ORDER = {state.value: i for i, state in enumerate(RoundState)}


class RoundSummary(Schema, SocialState[dict[str, int], float | None]):
    """A finished round's figures: the realised social state (K_i, B_i per type name, its
    welfare and its measured ε), its terms, money and time."""

    model_config = example(SUMMARY_EXAMPLE)

    round_id: int
    state: RoundState = Field(..., description="published or settled_by_rule")
    rule: str | None = Field(..., description="why the round was settled by rule")
    mechanism: str | None
    price: Money | None = Field(..., description="p at the realised state, as the market booked it")
    rewards: dict[str, Money] = Field(..., description="r_i per type, as the market booked them")
    terms_price: QuotedMoney | None = Field(
        None,
        description="p of the mechanism's terms at the realised state, before the capture rule",
    )
    terms_rewards: dict[str, QuotedMoney] = Field(
        default_factory=dict,
        description="r_i of the mechanism's terms at the realised state, before the capture rule"
        " bounded them by the quote (what `rewards` would be without it)",
    )
    welfare: float | None = Field(..., description="Eq. 5 at the realised state")
    epsilon: float | None = Field(..., description="the evaluation service's measured test loss")
    incentive_cost: Money = Field(..., description="the subsidy the ledger booked")
    incentive_cost_predicted: Money | None = Field(
        ..., description="[Σ K_i r_i − Σ B_i p]⁺ at pricing, in micro-units"
    )
    epsilon_predicted: float | None = Field(..., description="ε(K) of Eq. 3 at pricing")
    epsilon_training: float | None = Field(..., description="the training engine's test loss")
    equilibrium: bool | None = Field(..., description="(K, B) is an equilibrium of the schedule")
    round_seconds: float
    phase_seconds: dict[str, float] = Field(..., description="seconds in each state, in order")
    waiting_seconds: float = Field(
        0.0, description="round time spent waiting for clients (collecting their decisions)"
    )
    platform_seconds: float = Field(
        ...,
        description="the platform's own time: round time outside training, evaluation and "
        "waiting for clients",
    )
    platform_share: float | None = Field(
        ..., description="platform_seconds / (round_seconds − waiting_seconds)"
    )
    training_round_seconds: list[float]
    dropped: list[int]
    failed_verification: list[int] = Field(
        default_factory=list, description="client ids whose update failed verification (unpaid)"
    )
    verification: dict[str, str] = Field(
        default_factory=dict,
        description="per participant (client id): verified, dropped or failed_verification",
    )
    settlement: SettleResult | None
    error_model_fit: ErrorFit | None

    @field_validator("price", "incentive_cost", "incentive_cost_predicted", mode="before")
    @classmethod
    def _booked(cls, amount: object) -> object:
        """A float amount (computed, or stored before amounts were Money) rounds as booked."""
        return money(amount) if isinstance(amount, float) else amount

    @field_validator("rewards", mode="before")
    @classmethod
    def _booked_rewards(cls, rewards: object) -> object:
        """Float rewards (computed, or stored before amounts were Money) round as booked."""
        if not isinstance(rewards, dict):
            return rewards
        return {k: money(v) if isinstance(v, float) else v for k, v in rewards.items()}

    @field_validator("phase_seconds")
    @classmethod
    def _in_machine_order(cls, phases: dict[str, float]) -> dict[str, float]:
        """States in the machine's order (JSONB does not keep the order keys were written in)."""
        return dict(sorted(phases.items(), key=lambda kv: STATE_ORDER.get(kv[0], len(STATE_ORDER))))


class RoundOut(BaseModel):
    """A round's state and products: its quote at K*, the priced market, the latest FedAvg round
    while it trains, and its figures once it has finished."""

    model_config = example(ROUND_EXAMPLE)

    id: int
    state: RoundState
    task: str = Field(DEFAULT_TASK, description="the task the round trains (issue 36)")
    task_version: int | None = Field(
        None,
        description="the task's version pinned when the round opened: its pricing, training, "
        "evaluation and publication all use exactly that version (None: opened before the pin)",
    )
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

    @property
    def finished(self) -> bool:
        """True once the round is published or settled by rule (nothing more will change)."""
        return self.state in TERMINAL_STATES

    def deadline(self) -> float | None:
        """The epoch second by which the round must leave its current state (None: none known,
        or the round has ended)."""
        if self.finished or not self.deadlines:
            return None
        due = self.deadlines.get(self.state.value)
        return None if due is None else due.timestamp()


class RoundDetail(RoundOut):
    """A round with its transitions, oldest first."""

    model_config = example(ROUND_EXAMPLE | {"transitions": [TRANSITION_EXAMPLE]})

    transitions: list[TransitionOut]
    calls: list[str] = Field(
        default_factory=list,
        description="the tasks the round's steps sent to other services, in order (its call log)",
    )
