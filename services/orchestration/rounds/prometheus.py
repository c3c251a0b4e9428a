"""The round machine's Prometheus export: time per state, and a finished round's figures as
gauges of the latest round (dashboards in ``monitoring/grafana``)."""

from __future__ import annotations

from mots.platform import metrics
from mots.platform.api.base import TERMINAL_STATES, RoundState
from mots.platform.api.pricing import PricingResult
from mots.platform.api.rounds import RoundSummary, TrainingProgress
from mots.platform.contracts import EvaluationResult


def declare() -> None:
    """Export the round counters and histograms at 0 before the first round ends (increase()
    cannot count the observation that created a series)."""
    for lazy in ("ROUND_DURATION", "ROUND_WAITING", "ROUND_PLATFORM"):
        getattr(metrics, lazy)  # creates the lazy histogram
    for state in RoundState:
        if state not in TERMINAL_STATES:  # states a step runs in, retried or re-driven
            metrics.ROUND_STEP_RETRIES.labels(state.value)
            metrics.ROUNDS_REDRIVEN.labels(state.value)
        if state not in TERMINAL_STATES and state != RoundState.FAILED:  # states a round leaves
            metrics.ROUND_PHASE_DURATION.labels(state.value)
    for state in TERMINAL_STATES:
        metrics.ROUNDS.labels(state.value)
    metrics.ROUND_SUBSIDY.inc(0)


def state_left(state: RoundState, seconds: float) -> None:
    """A round spent ``seconds`` in ``state`` and moved on."""
    metrics.ROUND_PHASE_DURATION.labels(state.value).observe(seconds)


def quoted(quote: PricingResult) -> None:
    """A round opened with this quote: its predicted ε(K*)."""
    metrics.GENERALIZATION_ERROR.labels("predicted").set(quote.epsilon)


def training_progress(progress: TrainingProgress) -> None:
    """The latest training reached FedAvg round r of R with ε so far."""
    metrics.TRAINING_FEDAVG_ROUND.set(progress.fedavg_round)
    metrics.TRAINING_FEDAVG_ROUNDS.set(progress.fedavg_rounds)
    if progress.epsilon is not None:
        metrics.GENERALIZATION_ERROR.labels("training").set(progress.epsilon)


def evaluated(evaluation: EvaluationResult) -> None:
    """The latest round's model was measured."""
    metrics.GENERALIZATION_ERROR.labels("measured").set(evaluation.test_loss)


def finished(summary: RoundSummary) -> None:
    """A round reached a terminal state: export its figures."""
    metrics.ROUNDS.labels(summary.state.value).inc()
    metrics.ROUND_DURATION.observe(summary.round_seconds)
    metrics.ROUND_WAITING.observe(summary.waiting_seconds)
    metrics.ROUND_PLATFORM.observe(summary.platform_seconds)
    if summary.platform_share is not None:
        metrics.PLATFORM_OVERHEAD_RATIO.set(summary.platform_share)
    metrics.INCENTIVE_COST.set(float(summary.incentive_cost))
    if summary.price is not None:
        metrics.MODEL_PRICE.set(float(summary.price))
        if summary.welfare is not None:
            metrics.SOCIAL_WELFARE.set(summary.welfare)
    for name, reward in summary.rewards.items():
        metrics.REWARD.labels(name).set(float(reward))
    for name, k in summary.participants.items():
        metrics.PARTICIPANTS.labels(name).set(k)
    for name, b in summary.buyers.items():
        metrics.BUYERS.labels(name).set(b)
    if summary.epsilon is not None:
        metrics.GENERALIZATION_ERROR.labels("measured").set(summary.epsilon)


def retried(state: RoundState) -> None:
    """A step's service call got no answer; the step runs again."""
    metrics.ROUND_STEP_RETRIES.labels(state.value).inc()


def redriven(state: RoundState) -> None:
    """The reconciler re-drove a round past its state's deadline."""
    metrics.ROUNDS_REDRIVEN.labels(state.value).inc()


def subsidy(summary: RoundSummary, alert_share: float) -> None:
    """A settled round's subsidy against its budget (the alert rule MotsRoundSubsidyNearBudget
    compares the two with ``alert_share``, monitoring/prometheus/rules/mots.yml)."""
    metrics.ROUND_SUBSIDY_ALERT_SHARE.set(alert_share)
    settlement = summary.settlement
    if settlement is None:
        return
    metrics.ROUND_SUBSIDY.inc(float(settlement.subsidy))
    metrics.LATEST_ROUND_SUBSIDY.set(float(settlement.subsidy))
    if settlement.subsidy_budget is not None:
        metrics.ROUND_SUBSIDY_BUDGET.set(float(settlement.subsidy_budget))
