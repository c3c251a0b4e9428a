"""A node dropping out mid-round: the round completes and the stated rule settles the dropout.

The state machine runs in this process against the real market, pricing and evaluation workers;
its trainer trains the coalition without the node that left (real in-process FedAvg on
Fashion-MNIST) and reports that node as not completed, as the Flower engine would.
"""

from __future__ import annotations

import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from mots.economics.utility import PowerUtility
from mots.local.agents import act, choose, register_population, wait_for_quote
from mots.local.launcher import Stack
from mots.platform.api.base import RoundState, Strategy
from mots.platform.celery_app import make_celery
from mots.platform.contracts import TRAINING_TRAIN, TaskSpec, TrainRequest, TrainResult, send
from mots.platform.db import make_engine, make_sessionmaker
from mots.platform.settings import DEV_OPERATOR_TOKEN
from services.orchestration.core.config import Settings
from services.orchestration.migrations import upgrade
from services.orchestration.rounds.calls import CallPort
from services.orchestration.rounds.machine import RoundMachine
from services.orchestration.rounds.ports import RoundPorts
from services.orchestration.rounds.prometheus import progress_recorder
from services.orchestration.rounds.sql_store import SqlCallLog, SqlRoundStore
from services.orchestration.trainer import Trainer
from tests.services.orchestration.conftest import OPERATOR, TYPES, UTILITY, stack_env

pytestmark = pytest.mark.integration


class LeavingNodeTrainer:
    """Trains without the last participant of the last type, which left mid-round; each FedAvg
    round's progress is noted on the round as the training worker notes it."""

    def __init__(self, settings: Settings, store: SqlRoundStore) -> None:
        self.trainer, self.store = Trainer(settings), store

    def train(self, request: TrainRequest) -> TrainResult:
        stayed = list(request.participants)
        stayed[-1] -= 1
        progress = progress_recorder(self.store, request.round_id)
        outcome = self.trainer.train(
            stayed, request.sizes, request.node_types, request.round_id, progress
        )
        return outcome.model_copy(update={"completed": stayed})


def test_dropout_forfeits_reward_and_model(redis_url: str, tmp_path: Path) -> None:
    """The round publishes; the dropout gets no reward, no charge and no model; ledger balances."""
    stack = Stack(workdir=tmp_path / "stack", redis_url=redis_url, extra_env=stack_env())
    stack.start(services=("market", "pricing", "evaluation"), timeout_s=120)
    try:
        market = httpx.Client(base_url=stack.url("market"), timeout=60)
        agents = register_population(market, TYPES, DEV_OPERATOR_TOKEN, deposit="10")
        settings = Settings(
            database_url=f"sqlite:///{tmp_path / 'orchestration.db'}",
            redis_url=redis_url,
            redis_key_prefix=stack.key_prefix,
            trainer="inprocess",
            train_rounds=2,
            train_local_steps=2,
            train_test_subset=500,
            utility=UTILITY,
            artifact_dir=str(tmp_path / "stack" / "artifacts"),
        )
        upgrade(settings.database_url)
        engine = make_engine(settings.database_url)
        store = SqlRoundStore(make_sessionmaker(engine))
        celery = make_celery("orchestration", redis_url, stack.key_prefix)
        calls = SqlCallLog(make_sessionmaker(engine))
        sent: list[tuple[TaskSpec[Any, Any], Any, str]] = []
        port = CallPort(lambda *call: sent.append(call), calls, settings.task_timeout_s)
        trainer = LeavingNodeTrainer(settings, store)

        def call(spec: TaskSpec[Any, Any], payload: Any, timeout_s: float | None = None) -> Any:
            """Training runs here (the node that left); the other tasks go to the workers."""
            if spec is TRAINING_TRAIN:
                return trainer.train(payload)
            return port.call(spec, payload, timeout_s or 120.0)

        machine = RoundMachine(
            RoundPorts(
                call=call,
                notify=lambda spec, payload: send(celery, spec, payload),
                store=store,
                schedule=lambda *_: None,  # this test runs the steps itself
                settings=settings,
                calls=calls,
            )
        )
        round_id = store.create()
        state: RoundState | None = RoundState.OPEN
        choices: dict[int, Strategy] = {}
        while state is not None:
            step = machine.step(round_id, state)
            if step.waiting:  # the step sent a call: this test (no task) carries it and its reply
                spec, payload, call_id = sent.pop(0)
                task = celery.signature(spec.name, args=[spec.body(payload)], queue=spec.queue)
                calls.answer(call_id, task.apply_async().get(timeout=120))
                continue
            if step.state == RoundState.COLLECTING and not choices:
                quote = wait_for_quote(market, agents[0], round_id)
                choices = choose(agents, quote, PowerUtility.model_validate(UTILITY))
                act(market, agents, round_id, choices)
            time.sleep(step.countdown)
            state = step.state
        rnd = store.load(round_id)
        assert rnd is not None and rnd.state == "published", rnd
        # The training's last report stays on the round: both FedAvg rounds, every client done.
        progress = rnd.training_progress
        assert progress is not None
        assert progress.fedavg_round == progress.fedavg_rounds == 2
        assert progress.clients_done == progress.clients == 1  # the other one left
        assert progress.in_progress is False
        assert progress.epsilon is not None and progress.epsilon > 0
        joined = sorted(a.id for a in agents if choices[a.id] == Strategy.JOIN)
        assert len(joined) == 2
        stayed_id, left_id = joined
        summary = rnd.summary
        assert summary is not None and summary.dropped == [left_id]
        by_id = {a.id: a for a in agents}
        reward = Decimal(str(summary.rewards["type-3"])).quantize(Decimal("0.000001"))

        def bal(a: object) -> Decimal:
            r = market.get("/v1/me/balance", headers=a.auth)  # type: ignore[attr-defined]
            return Decimal(r.json()["balance"])

        assert bal(by_id[stayed_id]) == Decimal(10) + reward
        assert bal(by_id[left_id]) == Decimal(10)
        assert (
            market.get(f"/v1/rounds/{round_id}/model", headers=by_id[stayed_id].auth).status_code
            == 200
        )
        assert (
            market.get(f"/v1/rounds/{round_id}/model", headers=by_id[left_id].auth).status_code
            == 403
        )
        check = market.get("/v1/ledger/check", headers=OPERATOR).json()
        assert check["unbalanced_transactions"] == 0 and Decimal(check["total"]) == 0
        assert Decimal(check["accounts"]["round_pools"]) == 0
        market.close()
        engine.dispose()
    finally:
        stack.stop()
