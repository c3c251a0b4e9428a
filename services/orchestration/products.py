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
from decimal import Decimal
from typing import Literal

from pydantic import Field

from mots.platform.api.pricing import EquilibriumResult, PricingResult
from mots.platform.api.rounds import TrainingProgress
from mots.platform.contracts import TrainResult
from mots.platform.money import QuotedMoney
from mots.training.progress import RoundProgress

TypeClients = dict[str, list[int]]
"""The registered client ids of each type when the round opened."""
Deadlines = dict[str, float]
"""The deadline of each state the round entered (epoch seconds): past it, the reconciler
re-drives the round (:mod:`services.orchestration.rounds.reconciler`)."""


class RoundTerms(PricingResult):
    """The mechanism's schedule at the realised state (K, B) and its equilibrium check: the
    quote's fields (amounts stay Money end to end), of which price, ε, mechanism, regime and
    optimality are absent when nobody joined (no model, so no price, no ε and no check)."""

    mechanism: str | None = None  # type: ignore[assignment]
    regime: Literal["low", "high"] | None = None  # type: ignore[assignment]
    price: QuotedMoney | None = Field(..., description="p(K); None when nobody joined")  # type: ignore[assignment]
    epsilon: float | None = Field(..., description="predicted ε(K) (Eq. 3); None at K = 0")  # type: ignore[assignment]
    optimal: bool | None = None  # type: ignore[assignment]
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
            rewards=[Decimal(0)] * len(type_names),
            welfare=0.0,
            epsilon=None,
            incentive_cost=Decimal(0),
        )


class TrainingRecord(TrainResult):
    """What the round's training produced (the training worker's result, as it came), and the
    participants that forfeit: dropped out, or failed verification."""

    dropped: list[int] = Field(default_factory=list, description="client ids that dropped out")
    failed_verification: list[int] = Field(
        default_factory=list, description="client ids whose update failed verification"
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
