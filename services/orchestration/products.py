"""What a round produces on its way through the machine, one pydantic model each.

The round's table stores each product in a typed JSON column (see :mod:`.models`). Those the
round API shows are its models (:mod:`mots.platform.api.rounds`: the summary, the training
progress, the settlement, the error model's fit); the others come from the services' contracts
and are stored as they came:
the quote (:class:`~mots.platform.api.pricing.PricingResult`), the decisions
(:class:`~mots.platform.contracts.RoundDecisions`), the evaluation
(:class:`~mots.platform.contracts.EvaluationResult`); the priced market is the economics core's
:class:`~mots.economics.scenario.Scenario`.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from mots.platform.api.pricing import EquilibriumResult, PricingResult
from mots.platform.api.rounds import TrainingProgress
from mots.training.progress import RoundProgress

TypeClients = dict[str, list[int]]
"""The registered client ids of each type when the round opened."""
Deadlines = dict[str, float]
"""The deadline of each state the round entered (epoch seconds): past it, the reconciler
re-drives the round (:mod:`services.orchestration.rounds.reconciler`)."""


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


def progress_of(p: RoundProgress) -> TrainingProgress:
    """A training engine's report (0-based round; ε NaN before the first evaluation) as the
    round API shows it."""
    return TrainingProgress(
        fedavg_round=p.round + 1,
        fedavg_rounds=p.rounds,
        clients_done=p.clients_done,
        clients=p.clients,
        epsilon=p.epsilon if math.isfinite(p.epsilon) else None,
        round_seconds=p.seconds,
        in_progress=p.partial,
    )
