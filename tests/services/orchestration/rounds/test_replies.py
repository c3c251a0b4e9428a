"""Rounds that never block a worker, on both databases: every step sends its call and returns,
the call's reply runs the step again from the top (its answered calls read back from the SQL
call log), and a call with no answer is re-driven past its timeout. The services on the other
side are the scripted fakes; the Celery transport is replaced by a list of sent calls."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic import BaseModel

from mots.platform.api.base import RoundState
from mots.platform.contracts import (
    EVALUATION_ERROR_MODEL,
    EVALUATION_EVALUATE,
    EVALUATION_PUBLISHED,
    MARKET_CLOSE_ROUND,
    MARKET_DECLARATION_PROGRESS,
    MARKET_OPEN_ROUND,
    MARKET_POPULATION,
    MARKET_SETTLE_ROUND,
    TRAINING_TRAIN,
    TaskSpec,
    resent_calls,
    round_calls,
)
from mots.platform.db import make_engine, make_sessionmaker
from services.orchestration.migrations import upgrade
from services.orchestration.rounds.calls import CallPort
from services.orchestration.rounds.machine import RoundMachine
from services.orchestration.rounds.ports import RoundPorts
from services.orchestration.rounds.reconciler import Reconciler
from services.orchestration.rounds.sql_store import SqlCallLog, SqlRoundStore
from tests.services.orchestration.rounds.fakes import Clock, FakeServices, FakeTrainer, answers

S = RoundState
PUBLISHED_PATH = ["collecting", "training", "evaluating", "settling", "published"]


@dataclass
class Sent:
    spec: TaskSpec[Any, Any]
    payload: BaseModel
    call_id: str


@dataclass
class Wire:
    """The machine on the SQL store and call log; sent calls wait in ``sent`` until delivered."""

    clock: Clock
    services: FakeServices
    trainer: FakeTrainer
    store: SqlRoundStore
    calls: SqlCallLog
    machine: RoundMachine
    queue: list[tuple[int, RoundState, float]]
    sent: list[Sent] = field(default_factory=list)

    def answer(self, call: Sent) -> dict[str, Any]:
        """What the service on the other side returns for the call (its JSON)."""
        out: BaseModel = answers(self.services, self.trainer)[call.spec.name](call.payload)
        return out.model_dump(mode="json")

    def deliver(
        self, lose: Callable[[Sent], bool] = lambda _: False, max_events: int = 200
    ) -> None:
        """Run queued steps and deliver sent calls' replies (as the reply task does) until
        nothing is left; ``lose`` drops a call (its task or reply lost)."""
        for _ in range(max_events):
            if not self.one(lose):
                return
        raise AssertionError("the round did not settle")

    def one(self, lose: Callable[[Sent], bool] = lambda _: False) -> bool:
        """Deliver one reply (first) or run one queued step; False if there was none."""
        if self.sent:
            call = self.sent.pop(0)
            if not lose(call):
                self.clock.now += 0.01
                self.machine.answered(call.call_id, self.answer(call))
        elif self.queue:
            round_id, state, countdown = self.queue.pop(0)
            self.clock.now += countdown + 0.25
            self.machine.advance(round_id, state)
        else:
            return False
        return True

    def path(self, round_id: int) -> list[str]:
        return [t.to for t in self.store.transitions(round_id)]


@pytest.fixture
def wire(database_url: str) -> Iterator[Wire]:
    upgrade(database_url)
    engine = make_engine(database_url, pool_size=2)
    clock = Clock()
    sessions = make_sessionmaker(engine)
    store, calls = SqlRoundStore(sessions), SqlCallLog(sessions)
    queue: list[tuple[int, RoundState, float]] = []
    sent: list[Sent] = []
    port = CallPort(lambda spec, payload, cid: sent.append(Sent(spec, payload, cid)), calls, 20.0)
    port.clock = clock
    from services.orchestration.core.config import Settings

    settings = Settings(
        collect_timeout_s=10.0,
        poll_interval_s=0.5,
        task_timeout_s=20.0,
        evaluate_timeout_s=40.0,
        train_timeout_s=300.0,
    )  # type: ignore[call-arg]
    services, trainer = FakeServices(clock), FakeTrainer(clock)

    def notify(spec: TaskSpec[Any, Any], payload: Any) -> None:
        """An event reaches its service at once; nothing answers it."""
        assert spec is EVALUATION_PUBLISHED
        services.measurement_published(payload)

    ports = RoundPorts(
        call=port.call,
        notify=notify,
        store=store,
        schedule=lambda a, c: queue.append((a.round_id, a.state, c)),
        settings=settings,
        clock=clock,
        calls=calls,
    )
    try:
        yield Wire(clock, services, trainer, store, calls, RoundMachine(ports), queue, sent)
    finally:
        engine.dispose()


def test_every_step_sends_and_returns_and_replies_move_the_round(wire: Wire) -> None:
    """No step waits: each run sends at most one call and returns (waiting); each call of a
    step is sent once, its reply replays the step; the round publishes as the fakes decide."""
    round_id = wire.store.create()
    result = wire.machine.advance(round_id, S.OPEN)
    assert result.waiting and result.next is None
    assert [c.spec for c in wire.sent] == [MARKET_POPULATION]
    assert wire.machine.advance(round_id, S.OPEN).waiting  # a duplicate sends nothing more
    assert len(wire.sent) == 1
    wire.deliver()
    assert wire.path(round_id) == PUBLISHED_PATH
    assert wire.trainer.calls == [[0, 2]]  # trained once, on the training queue
    assert wire.services.calls.count("open") == 1 and wire.services.calls.count("settle") == 1
    rnd = wire.store.load(round_id)
    assert rnd is not None and rnd.summary is not None and rnd.summary.state == S.PUBLISHED
    (opened,) = wire.services.opened  # the deadline the market got is the one the round keeps
    assert opened.collect_deadline is not None
    assert opened.collect_deadline.timestamp() == pytest.approx(rnd.collect_deadline, abs=1e-3)
    assert wire.calls.overdue(wire.clock.now + 3600) == []  # every step's calls were forgotten


MAX_ROUND_CALLS = 7
"""Issue 38: a round makes at most this many service calls, the collection's polls apart."""


def test_a_round_makes_at_most_seven_calls_counted_from_its_call_log(wire: Wire) -> None:
    """The round's own call history (the SQL call log, as ``GET /v1/rounds/{id}`` shows it):
    population, error model, open, close (members and keys included), train, evaluate and settle
    (publication included); pricing is a library call and the evaluation hears of the
    publication as an event. Polls while some client is silent are counted apart."""
    wire.services.declared = 5  # one client silent: the collection polls until the deadline
    round_id = wire.store.create()
    wire.queue.append((round_id, S.OPEN, 0.0))
    wire.deliver()
    assert wire.path(round_id) == PUBLISHED_PATH
    sent = wire.calls.sent(round_id)
    assert sent.count(MARKET_DECLARATION_PROGRESS.name) > 1  # it did poll
    assert round_calls(sent) <= MAX_ROUND_CALLS, sent
    assert [t for t in sent if t != MARKET_DECLARATION_PROGRESS.name] == [
        MARKET_POPULATION.name,
        EVALUATION_ERROR_MODEL.name,
        MARKET_OPEN_ROUND.name,
        MARKET_CLOSE_ROUND.name,
        TRAINING_TRAIN.name,
        EVALUATION_EVALUATE.name,
        MARKET_SETTLE_ROUND.name,
    ]
    assert wire.services.counted == [round_id]  # the publication event reached evaluation


def test_a_lost_call_is_re_driven_past_its_timeout_and_sent_again(wire: Wire) -> None:
    """The market's close is lost once (its task or reply): the step waits; past the call's
    timeout the reconciler re-drives it, the step finds the call lost, runs again after the
    retry interval and sends it anew; the round publishes."""
    round_id = wire.store.create()
    wire.queue.append((round_id, S.OPEN, 0.0))
    lost: list[str] = []

    def lose_first_close(call: Sent) -> bool:
        if call.spec.name == MARKET_CLOSE_ROUND.name and not lost:
            lost.append(call.call_id)
            return True
        return False

    wire.deliver(lose_first_close)
    assert wire.path(round_id) == ["collecting"]  # waiting for the lost close
    assert wire.calls.pending(lost[0])
    reconciler = Reconciler(wire.machine.ports)
    assert reconciler.tick() == []  # within its timeout: nothing to do
    wire.clock.now += 20.5
    assert round_id in reconciler.tick()
    wire.deliver()
    assert wire.path(round_id) == PUBLISHED_PATH
    assert wire.services.calls.count("close") == 1  # the lost one never reached the fake
    assert not wire.calls.pending(lost[0])
    assert wire.machine.answered(lost[0], {"round_id": round_id}) is None  # late: dropped
    sent = wire.calls.sent(round_id)  # the call log holds the close twice: sent, lost, re-sent
    assert (round_calls(sent), resent_calls(sent)) == (MAX_ROUND_CALLS + 1, 1), sent
    assert round_calls(sent) - resent_calls(sent) == MAX_ROUND_CALLS  # each call counted once


def test_an_error_reply_fails_the_round_as_a_raised_error_did(wire: Wire) -> None:
    """The evaluation answers with an error: the round is settled by rule, buyers refunded."""
    round_id = wire.store.create()
    wire.queue.append((round_id, S.OPEN, 0.0))
    while not (wire.sent and wire.sent[0].spec.name == EVALUATION_EVALUATE.name):
        assert wire.one()
    call = wire.sent.pop(0)
    wire.machine.answered(call.call_id, None, "ValueError: the artifact's hash differs")
    wire.deliver()
    rnd = wire.store.load(round_id)
    assert rnd is not None and rnd.state == S.SETTLED_BY_RULE
    assert rnd.rule == "ServiceError: evaluation.evaluate: ValueError: the artifact's hash differs"
    assert wire.path(round_id)[-3:] == ["evaluating", "failed", "settled_by_rule"]
    assert wire.services.settled[-1].refund_buyers


def test_a_lost_training_settles_the_round_by_rule_at_its_deadline(wire: Wire) -> None:
    """The training worker is killed (the call never answers): past the training budget the
    reconciler re-drives the step, the call is lost, and the round is settled by rule."""
    round_id = wire.store.create()
    wire.queue.append((round_id, S.OPEN, 0.0))
    wire.deliver(lambda call: call.spec.name == TRAINING_TRAIN.name)
    assert wire.path(round_id) == ["collecting", "training"]
    wire.clock.now += 301.0
    assert Reconciler(wire.machine.ports).tick() == [round_id]
    wire.deliver()
    rnd = wire.store.load(round_id)
    assert rnd is not None and rnd.state == S.SETTLED_BY_RULE
    assert rnd.rule is not None and "training failed (ServiceUnavailable" in rnd.rule
    assert wire.trainer.calls == []
