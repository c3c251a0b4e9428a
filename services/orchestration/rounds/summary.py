"""A finished round's figures (the keys the demo's ``summary.json`` carries, and more).

Pure: the round, its products and the time it spent in each state in, a
:class:`~services.orchestration.products.RoundSummary` out.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from mots.platform.api.base import RoundState
from mots.platform.api.rounds import RoundSummary, SettleResult
from services.orchestration.products import RoundTerms, TrainingRecord
from services.orchestration.rounds.ports import RoundRecord

WORK_STATES = (RoundState.TRAINING.value, RoundState.EVALUATING.value)
"""The states whose time is the learning's, not the platform's."""
WAITING_STATES = (RoundState.COLLECTING.value,)
"""The states whose time is spent waiting for clients (their decisions until all have declared or
the deadline passed), not the platform's own."""


def round_summary(
    rnd: RoundRecord,
    terms: RoundTerms | None,
    training: TrainingRecord | None,
    settlement: SettleResult | None,
    published: bool,
    phases: dict[str, float],
    now: datetime,
) -> RoundSummary:
    """The figures of a round ending now: ``phases`` holds the seconds spent in each state it has
    left; the time in its current state runs until ``now``."""
    phases = dict(phases)
    in_state = (now - rnd.state_entered_at).total_seconds()
    phases[rnd.state.value] = phases.get(rnd.state.value, 0.0) + in_state
    total = (now - rnd.created_at).total_seconds()
    work = sum(phases.get(s, 0.0) for s in WORK_STATES)
    waiting = sum(phases.get(s, 0.0) for s in WAITING_STATES)
    platform = max(total - work - waiting, 0.0)
    names = terms.type_names if terms else []
    evaluation = rnd.evaluation
    subsidy = Decimal(settlement.subsidy) if settlement else Decimal(0)

    return RoundSummary(
        round_id=rnd.id,
        state=RoundState.PUBLISHED if published else RoundState.SETTLED_BY_RULE,
        rule=rnd.rule,
        mechanism=rnd.mechanism,
        participants=dict(zip(names, terms.participants, strict=True)) if terms else {},
        buyers=dict(zip(names, terms.buyers, strict=True)) if terms else {},
        price=terms.price if terms else None,
        rewards=dict(zip(names, terms.rewards, strict=True)) if terms else {},
        welfare=terms.welfare if terms else None,
        incentive_cost=subsidy,
        incentive_cost_predicted=terms.incentive_cost if terms else None,
        epsilon=evaluation.test_loss if evaluation else None,
        epsilon_predicted=terms.epsilon if terms else None,
        epsilon_training=training.epsilon if training else None,
        equilibrium=terms.equilibrium.equilibrium if terms and terms.equilibrium else None,
        round_seconds=total,
        phase_seconds=phases,
        waiting_seconds=waiting,
        platform_seconds=platform,
        platform_share=platform / (total - waiting) if total - waiting > 0 else None,
        training_round_seconds=training.round_seconds if training else [],
        dropped=training.dropped if training else [],
        failed_verification=training.failed_verification if training else [],
        verification={
            str(p["client_id"]): str(p["status"])
            for p in (training.participants if training else [])
            if p.get("client_id") is not None
        },
        settlement=settlement,
        error_model_fit=evaluation.fit if evaluation else None,
    )
