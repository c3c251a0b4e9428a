"""Rounds of several tasks at once, on the machine's in-memory fakes (issue 36): each round prices
its own task's population with its own economics and error model, trains and evaluates its own
task, and a task with no clients fails by rule without touching another task's round."""

from __future__ import annotations

import numpy as np
import pytest

from mots.economics.mechanisms.registry import get_mechanism
from mots.economics.scenario import ClientType, Scenario
from mots.platform.api.base import RoundState
from mots.platform.contracts import (
    CurrentErrorModel,
    DeclarationProgress,
    Population,
    PopulationRequest,
    RoundDecisions,
    RoundRef,
    TaskRef,
)
from mots.tasks.task_file import load_task
from services.orchestration.rounds.ports import RoundInFlight
from tests.services.orchestration.rounds.fakes import LARGE, SMALL, Clock, FakeServices, rig

S = RoundState
FASHION, DIGITS, CANCER = "fashion-mnist", "digits", "breast-cancer"
DIGIT_TYPES = [
    ClientType(name="type-1", count=4, data_size=20, cost=0.05),
    ClientType(name="type-3", count=2, data_size=100, cost=0.25),
]
"""The digits task's registered clients (the fake market's population for it)."""


class TaskMarket(FakeServices):
    """The scripted market with a population per task (breast-cancer has none), and fashion-mnist's
    clients slow to declare: its round collects until its deadline."""

    def __init__(self, clock: Clock) -> None:
        super().__init__(clock)
        self.round_task: dict[int, str] = {}
        self.error_models_asked: list[str] = []

    def population(self, ref: PopulationRequest) -> Population:  # type: ignore[override]
        self.round_task[ref.round_id] = ref.task
        if ref.task == DIGITS:
            self._enter("population")
            return Population(types=DIGIT_TYPES)
        if ref.task == CANCER:
            self._enter("population")
            return Population(types=[])
        return super().population(ref)

    def error_model(self, ref: TaskRef) -> CurrentErrorModel:  # type: ignore[override]
        self.error_models_asked.append(ref.task)
        return super().error_model(ref)

    def _decisions(self, round_id: int) -> RoundDecisions:
        """Digits' own clients (ids 11-16) join and buy in its rounds; fashion-mnist's as scripted."""
        if self.round_task.get(round_id) != DIGITS:
            return super()._decisions(round_id)
        buyers = {"type-1": [11, 12, 13, 14]}
        return RoundDecisions(
            round_id=round_id,
            registered=6,
            declared=6,
            participants={"type-3": [15, 16]},
            buyers=buyers,
            paid_buyers=buyers,
            members={"type-1": [11, 12, 13, 14], "type-3": [15, 16]},
        )

    def close(self, ref: RoundRef) -> RoundDecisions:
        if self.round_task.get(ref.round_id) == DIGITS:
            self._enter("close")
            return self._decisions(ref.round_id)
        return super().close(ref)

    def progress(self, ref: RoundRef) -> DeclarationProgress:
        seen = super().progress(ref)
        if self.round_task.get(ref.round_id) == FASHION:
            return seen.model_copy(update={"declared": 0})
        return seen


def _expected_scenario(task: str, types: list[ClientType]) -> Scenario:
    """The scenario a round of ``task`` must price: the task file's economics (its prior, U(ε),
    ε_req) over the market's population, built here from the file, not by the code under test."""
    spec = load_task(task).economics.scenario
    return Scenario(
        types=types, error_model=spec.error_model, utility=spec.utility, eps_req=spec.eps_req
    )


def test_a_digits_round_publishes_while_a_fashion_mnist_round_collects() -> None:
    """Both tasks' rounds open at once; digits is priced by SWAN on its own scenario (its U(ε)
    and ε prior from its task file), trains and evaluates as digits and publishes while the
    fashion-mnist round still collects, which then publishes on its own terms."""
    r = rig(TaskMarket)
    fashion = r.start()
    digits = r.store.create(task=DIGITS)
    r.queue.append((digits, S.OPEN, 0.0))
    with pytest.raises(RoundInFlight):
        r.store.create(task=DIGITS)
    r.run(max_steps=200)
    done = {rid: r.store.load(rid) for rid in (fashion, digits)}
    assert all(rnd is not None and rnd.state == S.PUBLISHED for rnd in done.values()), done
    moves = [(rid, dst) for rid, _, dst, _, _ in r.store.transitions]
    assert moves.index((digits, S.PUBLISHED)) < moves.index((fashion, S.TRAINING))

    by_task = {q.task: q for q in r.services.opened}
    assert set(by_task) == {FASHION, DIGITS}
    rnd = done[digits]
    assert rnd is not None and rnd.task == DIGITS and rnd.quote is not None
    expected = _expected_scenario(DIGITS, DIGIT_TYPES)
    assert rnd.scenario == expected
    terms = get_mechanism("swan", expected).quote(rnd.quote.participants)
    assert float(rnd.quote.price) == pytest.approx(terms.price, abs=1e-6)  # money: 6 places
    np.testing.assert_allclose([float(x) for x in rnd.quote.rewards], terms.rewards, atol=1e-6)
    fm = done[fashion]
    assert fm is not None and fm.scenario is not None and fm.quote is not None
    assert fm.scenario.utility != rnd.scenario.utility  # the deployment's ε^-8, not digits' 2ε^-2
    assert by_task[DIGITS].price != by_task[FASHION].price
    assert set(by_task[DIGITS].rewards) == {"type-1", "type-3"}
    assert set(by_task[FASHION].rewards) == {SMALL, LARGE}
    assert sorted(r.services.error_models_asked) == [DIGITS, FASHION]
    assert {c.task for c in r.trainer.coalitions if c is not None} == {FASHION, DIGITS}


def test_a_task_with_no_clients_fails_by_rule_and_leaves_the_other_round_alone() -> None:
    """breast-cancer has no registered client: its round is settled by rule before the market
    opens it (nothing to refund), while the fashion-mnist round beside it publishes as usual."""
    r = rig(TaskMarket)
    fashion = r.start()
    cancer = r.store.create(task=CANCER)
    r.queue.append((cancer, S.OPEN, 0.0))
    r.run(max_steps=200)
    failed, fm = r.store.load(cancer), r.store.load(fashion)
    assert failed is not None and failed.state == S.SETTLED_BY_RULE
    assert failed.rule == "no registered clients of task 'breast-cancer': nothing to price"
    assert fm is not None and fm.state == S.PUBLISHED
    assert [q.task for q in r.services.opened] == [FASHION]
    assert [s.round_id for s in r.services.settled] == [fashion]
