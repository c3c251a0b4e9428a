"""What a round produces on its way through the machine, one pydantic model each.

The round's table stores each product in a typed JSON column (see :mod:`.models`); the round API
shows some of them. The others come from the services' contracts and are stored as they came:
the quote (:class:`~mots.platform.api.pricing.PricingResult`), the decisions
(:class:`~mots.platform.contracts.RoundDecisions`), the evaluation
(:class:`~mots.platform.contracts.EvaluationResult`), the settlement
(:class:`~mots.platform.contracts.SettleResult`); the priced market is the economics core's
:class:`~mots.economics.scenario.Scenario`.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from mots.platform.api.base import SETTLE_EXAMPLE, RoundState, example
from mots.platform.api.pricing import EquilibriumResult, PricingResult
from mots.platform.contracts import ErrorFit, SettleResult
from mots.platform.money import Money, money
from mots.training.progress import RoundProgress

TypeClients = dict[str, list[int]]
"""The registered client ids of each type when the round opened."""
Deadlines = dict[str, float]
"""The deadline of each state the round entered (epoch seconds): past it, the reconciler
re-drives the round (:mod:`services.orchestration.rounds.reconciler`)."""


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
"""Realistic instances (the demo's round 3) for the OpenAPI examples."""


class _Product(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RoundTerms(_Product):
    """The mechanism's schedule at the realised state (K, B) and its equilibrium check; with no
    participant there is no model, so no price, no ε and no check."""

    type_names: list[str]
    participants: list[int] = Field(..., description="K_i per type, in type_names' order")
    buyers: list[int] = Field(..., description="B_i per type (paid buyers)")
    price: float | None = Field(..., description="p(K); None when nobody joined")
    rewards: list[float] = Field(..., description="r_i(K) per type")
    welfare: float
    epsilon: float | None = Field(..., description="predicted ε(K) (Eq. 3); None at K = 0")
    incentive_cost: float = Field(..., description="predicted [Σ K_i r_i − Σ B_i p]⁺")
    mechanism: str | None = None
    regime: Literal["low", "high"] | None = None
    optimal: bool | None = None
    equilibrium: EquilibriumResult | None = None

    @classmethod
    def at_state(cls, priced: PricingResult, check: EquilibriumResult) -> RoundTerms:
        """The pricing service's terms at (K, B) with its equilibrium check."""
        return cls(**priced.model_dump(), equilibrium=check)

    @classmethod
    def no_model(cls, type_names: list[str], k: list[int], b: list[int]) -> RoundTerms:
        """Nobody joined: no schedule to price (ε is +∞ at K = 0), nothing rewarded."""
        return cls(
            type_names=type_names,
            participants=k,
            buyers=b,
            price=None,
            rewards=[0.0] * len(type_names),
            welfare=0.0,
            epsilon=None,
            incentive_cost=0.0,
        )


class TrainingRecord(_Product):
    """What the round's training produced, and the participants that dropped out of it."""

    epsilon: float = Field(..., description="the trained model's test loss on the engine's subset")
    losses: list[float] = Field(..., description="test loss after each FedAvg round")
    round_seconds: list[float] = Field(..., description="wall time of each FedAvg round")
    artifact_path: str
    artifact_sha256: str
    completed: list[int] = Field(..., description="participants per type that finished")
    seconds: float
    metadata: dict[str, Any] = Field(default_factory=dict, description="the engine's own record")
    dropped: list[int] = Field(default_factory=list, description="client ids that dropped out")
    failed_verification: list[int] = Field(
        default_factory=list, description="client ids whose update failed verification"
    )
    participants: list[dict[str, Any]] = Field(
        default_factory=list,
        description="per participant: client_id, status (verified, dropped, failed_verification), "
        "the round it left in and why",
    )


class TrainingProgress(_Product):
    """The latest FedAvg round of a training under way, as the round API shows it."""

    model_config = example(PROGRESS_EXAMPLE)

    fedavg_round: int = Field(..., description="1-based number of the FedAvg round")
    fedavg_rounds: int = Field(..., description="FedAvg rounds in the training")
    clients_done: int
    clients: int
    epsilon: float | None = Field(..., description="test loss so far; None before the first")
    round_seconds: float
    in_progress: bool = Field(..., description="True while clients of this FedAvg round train")

    @classmethod
    def of(cls, p: RoundProgress) -> TrainingProgress:
        """A training engine's report (0-based round; ε NaN before the first evaluation)."""
        return cls(
            fedavg_round=p.round + 1,
            fedavg_rounds=p.rounds,
            clients_done=p.clients_done,
            clients=p.clients,
            epsilon=p.epsilon if math.isfinite(p.epsilon) else None,
            round_seconds=p.seconds,
            in_progress=p.partial,
        )


STATE_ORDER = {state.value: i for i, state in enumerate(RoundState)}


class RoundSummary(_Product):
    """A finished round's figures: the realised state, its terms, measured ε, money and time."""

    model_config = example(SUMMARY_EXAMPLE)

    round_id: int
    state: RoundState = Field(..., description="published or settled_by_rule")
    rule: str | None = Field(..., description="why the round was settled by rule")
    mechanism: str | None
    participants: dict[str, int] = Field(..., description="K_i per type")
    buyers: dict[str, int] = Field(..., description="B_i per type")
    price: Money | None = Field(..., description="p at the realised state, as the market booked it")
    rewards: dict[str, Money] = Field(..., description="r_i per type, as the market booked them")
    welfare: float | None = Field(..., description="Eq. 5 at the realised state")
    incentive_cost: Money = Field(..., description="the subsidy the ledger booked")
    incentive_cost_predicted: Money | None = Field(
        ..., description="[Σ K_i r_i − Σ B_i p]⁺ at pricing, in micro-units"
    )
    epsilon: float | None = Field(..., description="the evaluation service's measured test loss")
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
