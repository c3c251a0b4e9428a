"""A market round as an explicit state machine, persisted so that it survives a restart.

    open ─► collecting ─► training ─► evaluating ─► settling ─► published
      └──────────┴────────────┴────────────┴────────────┴─► failed ─► settled_by_rule

The machine runs one state's step (:mod:`.steps`) and applies its decision with a compare-and-set
on the round's state (``UPDATE … WHERE state = expected``): a duplicated or re-delivered step
message finds the round elsewhere and does nothing, and only the step that moved the round
schedules the next one. A step that raises fails the round; settling a failed round by rule is
retried until the market answers. On start the worker re-enqueues the step of every round not in
a terminal state (:meth:`RoundMachine.recover`).

No step waits for another service. A step's call is sent and the step returns
(:class:`~.ports.Pending`); the call's reply, stored in the :class:`~.ports.CallLog` by the
order of the call within its step, runs the step again from the top, its answered calls read
back from the log, until it sends the next call or decides. A replayed step reads the clock as
of its first call, so what it computes from the time (the collection deadline) is the same on
every replay. Once the step decides (a move, a wait, a retry or a failure) its calls are
forgotten: its next run starts afresh, and a late reply to a forgotten call is dropped.

Liveness: every move records the deadline of the state it enters (:func:`deadline_of`), which
the worker's reconciler (:mod:`.reconciler`) enforces by re-driving a round past it. A step whose
service call got no answer (:class:`~.ports.ServiceUnavailable`: a lost task or reply, the
broker or the database away) runs again after ``MOTS_RETRY_INTERVAL_S`` instead of failing the
round, until its state's deadline plus one service call's timeout; an evaluating round retries
for as long as its trained model exists (the work survives, so the round is not voided).
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass

from mots.platform.api.base import TERMINAL_STATES, RoundState
from mots.platform.contracts import AdvanceRequest, AdvanceResult
from services.orchestration.core.config import Settings
from services.orchestration.rounds import prometheus
from services.orchestration.rounds.ports import (
    CURRENT_STEP,
    Move,
    Pending,
    RoundFailure,
    RoundPorts,
    RoundRecord,
    RoundUpdate,
    ServiceUnavailable,
    StepContext,
    Wait,
)
from services.orchestration.rounds.steps import HANDLERS

log = logging.getLogger(__name__)
S = RoundState
ALLOWED: dict[RoundState, set[RoundState]] = {
    S.OPEN: {S.COLLECTING, S.FAILED},
    S.COLLECTING: {S.TRAINING, S.FAILED},
    S.TRAINING: {S.EVALUATING, S.FAILED},
    S.EVALUATING: {S.SETTLING, S.FAILED},
    S.SETTLING: {S.PUBLISHED, S.FAILED},
    S.FAILED: {S.SETTLED_BY_RULE},
    S.PUBLISHED: set(),
    S.SETTLED_BY_RULE: set(),
}
RETRY_SETTLEMENT_S = 5.0
"""Seconds between two tries to settle a failed round by rule (the market must answer)."""


def deadline_of(rnd: RoundRecord, settings: Settings) -> float:
    """The deadline of the round's current state (epoch seconds): the one recorded when it
    entered the state, else its entry time plus the state's budget."""
    recorded = rnd.deadline()
    if recorded is not None:
        return recorded
    return rnd.state_entered_at.timestamp() + settings.phase_budget_s(rnd.state.value)


@dataclass(frozen=True)
class Step:
    """What to do after a step: run ``state``'s step after ``countdown`` seconds, or stop (None)."""

    state: RoundState | None
    countdown: float = 0.0
    waiting: bool = False
    """The step sent a call and waits for its reply (which runs it again)."""


class RoundMachine:
    """Runs the steps of rounds through its ports and persists every transition."""

    def __init__(self, ports: RoundPorts) -> None:
        self.ports = ports

    def step(self, round_id: int, expected: RoundState) -> Step:
        """Run ``expected``'s step if the round is still there; a lost service call runs it
        again later, any other failure fails the round; a step waiting for a reply stops here."""
        rnd = self.ports.store.load(round_id)
        if rnd is None:
            raise RoundFailure(f"round {round_id} does not exist")
        handler = HANDLERS.get(expected)
        if rnd.state != expected or handler is None:
            return Step(None)
        token = CURRENT_STEP.set(StepContext(round_id, expected))
        try:
            decision = handler(rnd, self._ports_of(round_id, expected))
        except Pending:
            return Step(None, waiting=True)  # the call's reply runs the step again
        except ServiceUnavailable as exc:
            self._forget_calls(round_id, expected)
            if expected == S.FAILED or self._may_retry(rnd):
                log.warning("round %s: %s lost (%s); retrying", round_id, expected.value, exc)
                prometheus.retried(expected, prometheus.task_of(rnd))
                return Step(expected, self.ports.settings.retry_interval_s)
            return self._fail(rnd, exc)
        except Exception as exc:
            self._forget_calls(round_id, expected)
            if expected == S.FAILED:
                raise  # settlement by rule is retried (see advance), not failed again
            return self._fail(rnd, exc)
        finally:
            CURRENT_STEP.reset(token)
        self._forget_calls(round_id, expected)
        if isinstance(decision, Wait):
            return Step(expected, decision.seconds)
        return self._apply(rnd, decision)

    def _ports_of(self, round_id: int, state: RoundState) -> RoundPorts:
        """The ports a step runs with: a replayed step reads the clock as of its first call."""
        calls = self.ports.calls
        first = None if calls is None else calls.first_sent(round_id, state)
        if first is None:
            return self.ports
        return dataclasses.replace(self.ports, clock=lambda: first)

    def _forget_calls(self, round_id: int, state: RoundState) -> None:
        """The step has decided: its calls are done with (its next run sends afresh)."""
        if self.ports.calls is not None:
            self.ports.calls.clear(round_id, state)

    def _may_retry(self, rnd: RoundRecord) -> bool:
        """A step whose call was lost runs again: evaluation while its model exists, any other
        until its state's deadline plus one service call's timeout."""
        if rnd.state == S.EVALUATING:
            return rnd.training is not None and self.ports.artifact_exists(
                rnd.training.artifact_path
            )
        settings = self.ports.settings
        return self.ports.clock() < deadline_of(rnd, settings) + settings.task_timeout_s

    def _fail(self, rnd: RoundRecord, exc: Exception) -> Step:
        """Move the round to ``failed`` with the error as its rule."""
        rule = str(exc) if isinstance(exc, RoundFailure) else f"{type(exc).__name__}: {exc}"
        log.error("round %s failed in %s: %s", rnd.id, rnd.state.value, rule, exc_info=exc)
        return self._apply(rnd, Move(S.FAILED, rule, RoundUpdate(rule=rule)))

    def _apply(self, rnd: RoundRecord, move: Move) -> Step:
        """Compare-and-set the round to the move's state; the step to run next, if any."""
        if move.to not in ALLOWED[rnd.state]:
            raise AssertionError(f"transition {rnd.state} → {move.to} is not in the machine")
        update = move.update
        if move.to not in TERMINAL_STATES:
            budget = self.ports.settings.phase_budget_s(move.to.value)
            due = update.collect_deadline or self.ports.clock() + budget
            deadlines = {**(rnd.deadlines or {}), move.to.value: due}
            update = dataclasses.replace(update, deadlines=deadlines)
        seconds = self.ports.store.move(rnd.id, rnd.state, move.to, move.note, update)
        if seconds is None:
            return Step(None)  # another delivery of this step moved the round first
        log.info("round %s: %s → %s %s", rnd.id, rnd.state.value, move.to.value, move.note)
        task = prometheus.task_of(rnd)  # every figure carries its round's task (issue 36)
        prometheus.state_left(rnd.state, seconds, task)
        if move.update.quote is not None:
            prometheus.quoted(move.update.quote, task)
        if move.update.evaluation is not None:
            prometheus.evaluated(move.update.evaluation, task)
        if move.to in TERMINAL_STATES:
            summary = move.update.summary
            if summary is not None:
                prometheus.finished(summary, task)
                prometheus.subsidy(summary, self.ports.settings.subsidy_alert_share, task)
            return Step(None)
        return Step(move.to)

    def advance(self, round_id: int, state: RoundState) -> AdvanceResult:
        """Run one step and schedule the next; a failed settlement by rule, or a step that could
        not reach the round store, is tried again."""
        try:
            step = self.step(round_id, state)
        except ServiceUnavailable:  # the store (database) is away: the same step, later
            log.warning("round %s: %s could not run; retrying", round_id, state.value)
            self.ports.schedule(
                AdvanceRequest(round_id=round_id, state=state), self.ports.settings.retry_interval_s
            )
            return AdvanceResult(round_id=round_id, retry=True)
        except Exception:
            if state == S.FAILED:  # settle-by-rule must happen: retry until the market answers
                log.warning("round %s: settling by rule failed; retrying", round_id, exc_info=True)
                self.ports.schedule(
                    AdvanceRequest(round_id=round_id, state=state), RETRY_SETTLEMENT_S
                )
                return AdvanceResult(round_id=round_id, retry=True)
            raise
        if step.state is not None:
            self.ports.schedule(AdvanceRequest(round_id=round_id, state=step.state), step.countdown)
        return AdvanceResult(round_id=round_id, next=step.state, waiting=step.waiting)

    def answered(
        self, call_id: str, reply: dict[str, object] | None, error: str | None = None
    ) -> AdvanceResult | None:
        """A call's answer came back: store it and run its step again; None if the call was
        forgotten (its step decided without it, so the late answer is dropped)."""
        if self.ports.calls is None:
            raise RuntimeError("answers need a call log")
        step = self.ports.calls.answer(call_id, reply, error)
        if step is None:
            log.info("call %s answered after its step moved on; dropped", call_id)
            return None
        return self.advance(*step)

    def recover(self) -> list[int]:
        """Schedule the current step of every round not in a terminal state (after a restart)."""
        pending = self.ports.store.unfinished()
        for round_id, state in pending:
            log.info("recovering round %s in %s", round_id, state.value)
            self.ports.schedule(AdvanceRequest(round_id=round_id, state=state), 0.0)
        return [round_id for round_id, _ in pending]
