"""The market keeps publishing whatever the operator adds (issue 37): rounds run through the real
round machine and the real evaluation worker (its refit and posterior on SQLite and PostgreSQL)
while a client type is added before every round; a round that cannot be evaluated settles by rule
and the rounds after it publish. The market and trainer are the machine's fakes (pricing is the
orchestration's own library call), the model's test loss is Eq. (3)'s at the round's coalition
(no model is trained)."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from types import ModuleType

import numpy as np
import pytest

from mots.economics.error import generalization_error
from mots.economics.scenario import ClientType, ErrorModel
from mots.platform.api.base import RoundState
from mots.platform.contracts import (
    CurrentErrorModel,
    EvaluationRequest,
    EvaluationResult,
    Population,
    RoundRef,
    TaskRef,
)
from tests.services.orchestration.rounds.fakes import (
    LARGE,
    SMALL,
    Clock,
    FakeServices,
    Rig,
    rig,
)

TRUE = ErrorModel(d_gamma2=40.0, sigma2=0.05, eps0=0.6)
"""The error model the measured losses follow."""


@pytest.fixture
def worker(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The evaluation worker module on a fresh migrated database (SQLite or PostgreSQL)."""
    from services.evaluation.core import config
    from services.evaluation.migrations import upgrade

    monkeypatch.setenv("MOTS_DATABASE_URL", database_url)
    config.get_settings.cache_clear()
    upgrade(database_url)
    import services.evaluation.worker as module

    module = importlib.reload(module)
    yield module
    module.sessions.kw["bind"].dispose()
    config.get_settings.cache_clear()


class EvaluatedMarket(FakeServices):
    """The fake market and pricing, with the types the operator has added, in front of the real
    evaluation worker; ``unmeasurable`` rounds' artifacts do not verify."""

    def __init__(self, clock: Clock, worker: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
        super().__init__(clock)
        self.worker, self.monkeypatch = worker, monkeypatch
        self.sizes: dict[str, int] = {SMALL: 50, LARGE: 300}
        self.unmeasurable: set[int] = set()
        self.real_measure = worker.measure

    def add_type(self, name: str, size: int, clients: list[int]) -> None:
        """The operator adds a type whose clients all join the next round."""
        self.sizes[name] = size
        self.clients[name] = list(clients)
        self.joined = {**self.joined, name: list(clients)}

    def population(self, ref: RoundRef) -> Population:
        self._enter("population")
        types = [
            ClientType(name=n, data_size=self.sizes[n], cost=1.0, count=len(ids))
            for n, ids in self.clients.items()
            if ids
        ]  # in non-decreasing data size, as the market's population
        return Population(types=sorted(types, key=lambda t: (t.data_size, t.name)))

    def error_model(self, _: TaskRef) -> CurrentErrorModel:
        self._enter("error_model")
        result: CurrentErrorModel = self.worker.error_model(TaskRef())
        return result

    def evaluate(self, request: EvaluationRequest) -> EvaluationResult:
        self._enter("evaluate")
        loss = float(
            generalization_error(np.array(request.participants), np.array(request.sizes), TRUE)
        )
        if request.round_id in self.unmeasurable:
            measure = self.real_measure  # the real check: the artifact's digest differs
        else:
            measure = lambda *_: (loss, 0.7)  # noqa: E731
        self.monkeypatch.setattr(self.worker, "measure", measure)
        result: EvaluationResult = self.worker.evaluate(request)
        return result

    def measurement_published(self, ref: RoundRef) -> None:
        self._enter("measurement_published")
        self.worker.published(ref)


def _rig(worker: ModuleType, monkeypatch: pytest.MonkeyPatch, _artifacts: str) -> Rig:
    return rig(lambda clock: EvaluatedMarket(clock, worker, monkeypatch))


def _states(r: Rig, round_ids: list[int]) -> list[RoundState]:
    states = []
    for rid in round_ids:
        rnd = r.store.load(rid)
        assert rnd is not None
        states.append(rnd.state)
    return states


def test_a_type_added_before_each_of_8_rounds_and_all_8_publish(
    worker: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    """Before every round the operator adds a type (its own D, two clients): 8 of 8 rounds
    publish, and the refit over 8 measurements of 3 to 10 types recovers Eq. 3's parameters."""
    r = _rig(worker, monkeypatch, str(tmp_path))
    assert isinstance(r.services, EvaluatedMarket)
    rounds = []
    for n in range(8):
        r.services.add_type(f"added-{n}", 40 + 70 * n, [100 + 2 * n, 101 + 2 * n])
        rounds.append(r.start())
        r.run()
    assert _states(r, rounds) == [RoundState.PUBLISHED] * 8, [
        (r.store.load(rid) or r).__dict__.get("rule") for rid in rounds
    ]
    current = worker.error_model(TaskRef())
    assert current.posterior.points == 8
    assert current.fit is not None and current.fit.points == 8
    assert current.fit.eps0 == pytest.approx(TRUE.eps0, rel=1e-6)
    assert current.fit.d_gamma2 == pytest.approx(TRUE.d_gamma2, rel=1e-6)
    assert current.fit.sigma2 == pytest.approx(TRUE.sigma2, rel=1e-6)


def test_types_retired_and_resized_between_rounds_still_publish(
    worker: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    """The operator retires a type, then changes another's D, between rounds: every round
    publishes and the posterior counts each with its own round's sizes."""
    r = _rig(worker, monkeypatch, str(tmp_path))
    assert isinstance(r.services, EvaluatedMarket)
    rounds = []
    for n in range(6):
        if n % 2 == 0:
            r.services.add_type(f"t{n}", 60 + 30 * n, [200 + n])
        else:
            retired = f"t{n - 1}"
            r.services.clients[retired] = []
            r.services.joined = {k: v for k, v in r.services.joined.items() if k != retired}
            r.services.sizes[LARGE] = 300 + 50 * n
        rounds.append(r.start())
        r.run()
    assert _states(r, rounds) == [RoundState.PUBLISHED] * 6
    assert worker.error_model(TaskRef()).posterior.points == 6


def test_a_round_that_cannot_be_evaluated_settles_by_rule_and_the_next_ones_publish(
    worker: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    """Round 3's artifact does not match its digest: it settles by rule (buyers refunded), and
    rounds 4 to 6, one with a new type, publish; the failed round never counts in the model."""
    r = _rig(worker, monkeypatch, str(tmp_path))
    assert isinstance(r.services, EvaluatedMarket)
    r.services.unmeasurable = {3}  # the third round (ids start at 1)
    rounds = []
    for n in range(6):
        if n == 4:
            r.services.add_type("late", 90, [300, 301])
        rounds.append(r.start())
        r.run()
    expected = [RoundState.PUBLISHED] * 6
    expected[2] = RoundState.SETTLED_BY_RULE
    assert _states(r, rounds) == expected
    failed = r.store.load(rounds[2])
    assert failed is not None and "does not match its published digest" in (failed.rule or "")
    assert [p.refund_buyers for p in r.services.settled].count(True) == 1
    assert worker.error_model(TaskRef()).posterior.points == 5
