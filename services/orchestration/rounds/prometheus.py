"""A round's figures: a finished round's summary (:func:`round_summary`, the keys the demo's
``summary.json`` carries, and more), and the round machine's Prometheus export of them and of the
time per state, as gauges of each task's latest round (label ``task``, issue 36; dashboards in
``monitoring/grafana``).

:func:`round_summary` is pure: the round, its products and the time it spent in each state in, a
:class:`~mots.platform.api.rounds.RoundSummary` out; the round stores it and :func:`finished`
exports it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from decimal import Decimal

from mots.platform import metrics
from mots.platform.api.base import TERMINAL_STATES, RoundState
from mots.platform.api.pricing import PricingResult
from mots.platform.api.rounds import RoundSummary, SettleResult, TrainingProgress
from mots.platform.api.tasks import DEFAULT_TASK
from mots.platform.contracts import EvaluationResult
from mots.training.progress import RoundProgress
from services.orchestration.products import RoundTerms, TrainingRecord, progress_of
from services.orchestration.rounds.ports import RoundRecord, RoundStore

log = logging.getLogger(__name__)

PARTICIPANT_OUTCOMES = ("verified", "dropped", "failed_verification")
"""A participant's training outcome (mots.training.participants: VERIFIED, DROPPED, FAILED; not
imported here: that module loads the training engine)."""
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
    left; the time in its current state runs until ``now``. Price, rewards and incentive cost are
    the settlement's, as the ledger booked them (within the quote and budget), not the terms'."""
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
        price=settlement.captured_price if settlement else None,
        rewards=settlement.captured_rewards if settlement else {},
        terms_price=terms.price if terms else None,
        terms_rewards=dict(zip(names, terms.rewards, strict=True)) if terms else {},
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


def task_of(rnd: object) -> str:
    """The task a round trains (its ``task``; ``fashion-mnist`` where the round names none): the
    ``task`` label of every figure it exports (issue 36)."""
    return getattr(rnd, "task", None) or DEFAULT_TASK


_declared: set[str] = set()


def declare(task: str = DEFAULT_TASK) -> None:
    """Export a task's round counters and histograms at 0 before its first round ends
    (increase() cannot count the observation that created a series): the default task's when the
    worker starts, any other's when its first round moves (:func:`state_left`)."""
    if task in _declared:
        return
    for histogram in (metrics.ROUND_DURATION, metrics.ROUND_WAITING, metrics.ROUND_PLATFORM):
        histogram.labels(task)
    for state in RoundState:
        if state not in TERMINAL_STATES:  # states a step runs in, retried or re-driven
            metrics.ROUND_STEP_RETRIES.labels(task, state.value)
            metrics.ROUNDS_REDRIVEN.labels(task, state.value)
        if state not in TERMINAL_STATES and state != RoundState.FAILED:  # states a round leaves
            metrics.ROUND_PHASE_DURATION.labels(task, state.value)
    for state in TERMINAL_STATES:
        metrics.ROUNDS.labels(task, state.value)
    for outcome in PARTICIPANT_OUTCOMES:  # MotsFailedVerificationsSpike counts the failed ones
        metrics.PARTICIPANT_VERIFICATIONS.labels(task, outcome)
    metrics.ROUND_SUBSIDY.labels(task).inc(0)
    for kind in ("quote", "equilibrium"):  # the round's pricing runs here (steps._price)
        metrics.PRICING_DURATION.labels(kind)
    _declared.add(task)


def state_left(state: RoundState, seconds: float, task: str = DEFAULT_TASK) -> None:
    """A round of ``task`` spent ``seconds`` in ``state`` and moved on."""
    declare(task)
    metrics.ROUND_PHASE_DURATION.labels(task, state.value).observe(seconds)


def quoted(quote: PricingResult, task: str = DEFAULT_TASK) -> None:
    """A round of ``task`` opened with this quote: its predicted ε(K*)."""
    metrics.GENERALIZATION_ERROR.labels(task, "predicted").set(quote.epsilon)


def training_progress(progress: TrainingProgress, task: str = DEFAULT_TASK) -> None:
    """The task's latest training reached FedAvg round r of R with ε so far."""
    metrics.TRAINING_FEDAVG_ROUND.labels(task).set(progress.fedavg_round)
    metrics.TRAINING_FEDAVG_ROUNDS.labels(task).set(progress.fedavg_rounds)
    if progress.epsilon is not None:
        metrics.GENERALIZATION_ERROR.labels(task, "training").set(progress.epsilon)


def progress_recorder(
    store: RoundStore, round_id: int, task: str | None = None
) -> Callable[[RoundProgress], None]:
    """What the training engine calls after each FedAvg round: export it (under ``task``, else
    the round's own, read once) and note it on the round (best effort: a failed write must not
    stop training)."""
    known: list[str] = [] if task is None else [task]

    def record(p: RoundProgress) -> None:
        try:
            if not known:
                known.append(task_of(store.load(round_id)))
            training_progress(progress_of(p), known[0])
            store.record_progress(round_id, progress_of(p))
        except Exception:
            log.warning("round %s: training progress not recorded", round_id, exc_info=True)

    return record


def evaluated(evaluation: EvaluationResult, task: str = DEFAULT_TASK) -> None:
    """The task's latest round's model was measured."""
    metrics.GENERALIZATION_ERROR.labels(task, "measured").set(evaluation.test_loss)


def finished(summary: RoundSummary, task: str = DEFAULT_TASK) -> None:
    """A round of ``task`` reached a terminal state: export its figures."""
    declare(task)
    metrics.ROUNDS.labels(task, summary.state.value).inc()
    metrics.ROUND_DURATION.labels(task).observe(summary.round_seconds)
    metrics.ROUND_WAITING.labels(task).observe(summary.waiting_seconds)
    metrics.ROUND_PLATFORM.labels(task).observe(summary.platform_seconds)
    if summary.platform_share is not None:
        metrics.PLATFORM_OVERHEAD_RATIO.labels(task).set(summary.platform_share)
    metrics.INCENTIVE_COST.labels(task).set(float(summary.incentive_cost))
    if summary.price is not None:
        metrics.MODEL_PRICE.labels(task).set(float(summary.price))
        if summary.welfare is not None:
            metrics.SOCIAL_WELFARE.labels(task).set(summary.welfare)
    for name, reward in summary.rewards.items():
        metrics.REWARD.labels(task, name).set(float(reward))
    for name, k in summary.participants.items():
        metrics.PARTICIPANTS.labels(task, name).set(k)
    for name, b in summary.buyers.items():
        metrics.BUYERS.labels(task, name).set(b)
    if summary.epsilon is not None:
        metrics.GENERALIZATION_ERROR.labels(task, "measured").set(summary.epsilon)
    for outcome in summary.verification.values():
        metrics.PARTICIPANT_VERIFICATIONS.labels(task, outcome).inc()


def retried(state: RoundState, task: str = DEFAULT_TASK) -> None:
    """A step of a round of ``task`` got no answer from a service call; the step runs again."""
    metrics.ROUND_STEP_RETRIES.labels(task, state.value).inc()


def redriven(state: RoundState, task: str = DEFAULT_TASK) -> None:
    """The reconciler re-drove a round of ``task`` past its state's deadline."""
    metrics.ROUNDS_REDRIVEN.labels(task, state.value).inc()


def subsidy(summary: RoundSummary, alert_share: float, task: str = DEFAULT_TASK) -> None:
    """A settled round's subsidy against its budget, by task (the alert rule
    MotsRoundSubsidyNearBudget compares the two with ``alert_share``, task by task,
    monitoring/prometheus/rules/mots.yml)."""
    metrics.ROUND_SUBSIDY_ALERT_SHARE.labels(task).set(alert_share)
    settlement = summary.settlement
    if settlement is None:
        return
    metrics.ROUND_SUBSIDY.labels(task).inc(float(settlement.subsidy))
    metrics.LATEST_ROUND_SUBSIDY.labels(task).set(float(settlement.subsidy))
    if settlement.subsidy_budget is not None:
        metrics.ROUND_SUBSIDY_BUDGET.labels(task).set(float(settlement.subsidy_budget))
