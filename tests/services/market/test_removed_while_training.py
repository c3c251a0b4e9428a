"""Issue 24, item 1, attack: a participant revoked (DELETE /v1/clients/{id}) or departed
(DELETE /v1/me) while its round trains must not have its update averaged into the model, on
SQLite and PostgreSQL, with the in-process engine (the default of `mots platform up`).

The real market (its REST API and its node-key read, the one the training worker's
``market.node_keys`` task runs) and the orchestration's real Trainer (in-process FedAvg on
Fashion-MNIST): the participant is removed after FedAvg round 0; from round 1 on the model must
be the one trained without it, and the participant reported dropped in round 1.
The deployment (Flower) engine is not covered here: it does not take removals yet.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from mots.platform.contracts import Coalition
from mots.platform.db import in_transaction
from mots.training.progress import RoundProgress
from services.market import node_keys, rounds
from services.orchestration.core.config import Settings
from services.orchestration.trainer import MarketRemovals, Trainer
from tests.services.market.test_removed_participants import _joined_round, _remove


def _trainer(tmp_path: Path) -> Trainer:
    return Trainer(
        Settings(
            trainer="inprocess",
            artifact_dir=str(tmp_path / "artifacts"),
            train_rounds=3,
            train_local_steps=5,
            train_batch_size=16,
            train_test_subset=500,
        )
    )


@pytest.mark.parametrize("how", ["revoked", "departed"])
def test_removed_while_training_is_not_averaged(
    market: TestClient, register: Any, fund: Any, open_round: Any, tmp_path: Path, how: str
) -> None:
    stay, go = _joined_round(market, register, fund, open_round, tmp_path)
    in_transaction(market.app.state.sessions, lambda s: rounds.close_round(s, 1))

    def fetch(ids: list[int]) -> dict[int, str]:
        with market.app.state.sessions() as session:
            return node_keys.keys_of(session, ids).keys

    keys = fetch([stay["id"], go["id"]])
    assert sorted(keys) == sorted([stay["id"], go["id"]])
    coalition = Coalition(clients=[[], [stay["id"], go["id"]]], node_keys=keys)
    trainer, sizes = _trainer(tmp_path), [100.0, 300.0]
    both = trainer.train([0, 2], sizes, [0, 1, 1], 1, coalition=coalition)

    def leave_after_round_0(p: RoundProgress) -> None:
        if p.round == 0 and p.clients_done == 2:
            _remove(market, how, go)

    removed = MarketRemovals(keys, fetch, interval_s=0.0)
    out = trainer.train(
        [0, 2],
        sizes,
        [0, 1, 1],
        2,
        leave_after_round_0,
        coalition=coalition,
        removed=removed,
    )
    assert removed.removed == {go["id"]}
    assert out.losses[0] == both.losses[0]  # round 0: both trained, before the removal
    assert out.losses[1:] != both.losses[1:]  # its later updates are not averaged in
    status = {p["client_id"]: p for p in out.participants}
    assert status[stay["id"]]["status"] == "verified"
    assert status[go["id"]]["status"] == "dropped" and status[go["id"]]["left_in_round"] == 1
    assert out.completed == [0, 1]
