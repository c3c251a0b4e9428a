"""Issue 24, item 1, attack on the deployment (Flower) engine: a participant revoked
(DELETE /v1/clients/{id}) or departed (DELETE /v1/me) while its round trains on Flower must be
removed from the round: its SuperNode key unregistered at the SuperLink, not asked to train and
its update not averaged from the FedAvg round after the removal, reported dropped (not paid).

Real services throughout: the market's REST API and its node-key read (what the training worker's
``market.node_keys`` asks), a real authenticated, TLS local federation standing for the deployed
SuperLink and two SuperNodes whose keys the two participants registered at the market (with proof
of possession), and the orchestration's Trainer on it through ``flwr run`` with
MarketRemovals. The participant is removed once FedAvg round 0 is in. Revoked on SQLite,
departed on PostgreSQL (the market's part is the same code on both; each run is a federation).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from mots.platform.contracts import Coalition
from mots.platform.db import in_transaction
from mots.training.control import ControlClient
from mots.training.federation import LocalFederation, free_port_block, ports_needed
from mots.training.pki import fingerprint, load_node_key
from mots.training.progress import RoundProgress
from services.market import node_keys, rounds
from services.orchestration.core.config import Settings
from services.orchestration.trainer import MarketRemovals, Trainer
from tests.services.market.test_removed_participants import _remove, joined_round

FASHION = Path("/usr/share/datasets/fashion-mnist")
ROUNDS = 4


def _joined(
    market: TestClient, register: Any, fund: Any, open_round: Any, deployed: LocalFederation
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Two large participants whose registered SuperNode keys are the deployed nodes' keys."""
    stay, go = joined_round(
        market, register, fund, open_round, lambda n: load_node_key(deployed.node_key_path(n))
    )
    in_transaction(market.app.state.sessions, lambda s: rounds.close_round(s, 1))
    return stay, go


@pytest.mark.integration
@pytest.mark.parametrize(
    ("database_url", "how"),
    [("sqlite", "revoked"), ("postgresql", "departed")],
    indirect=["database_url"],
)
def test_removed_while_training_on_flower_is_pruned_and_not_averaged(
    market: TestClient, register: Any, fund: Any, open_round: Any, tmp_path: Path, how: str
) -> None:
    if not (FASHION / "t10k-labels-idx1-ubyte.gz").is_file():
        pytest.skip("Fashion-MNIST missing: apt-get install -y dataset-fashion-mnist")
    port = free_port_block(ports_needed(2))
    with LocalFederation(
        n_nodes=2, node_types=[1, 1], superlink_port=port, workdir=tmp_path / "deployed"
    ) as deployed:
        assert deployed.ca_cert is not None
        stay, go = _joined(market, register, fund, open_round, deployed)

        def fetch(ids: list[int]) -> dict[int, str]:
            with market.app.state.sessions() as session:
                return node_keys.keys_of(session, ids).keys

        keys = fetch([stay["id"], go["id"]])
        assert sorted(keys) == sorted([stay["id"], go["id"]])
        own_port = free_port_block(ports_needed(2), start=port + ports_needed(2))
        (tmp_path / "orchestration" / "tls").mkdir(parents=True)
        shutil.copy(deployed.ca_cert, tmp_path / "orchestration" / "tls" / "ca.crt")
        trainer = Trainer(
            Settings(
                trainer="deployment",
                superlink_address=deployed.address,
                superlink_port=own_port,
                train_rounds=ROUNDS,
                train_local_steps=5,
                train_test_subset=500,
                federation_dir=str(tmp_path / "orchestration"),
                artifact_dir=str(tmp_path / "artifacts"),
            )
        )
        seen: dict[str, Any] = {}

        def progress(p: RoundProgress) -> None:
            if p.partial:
                return
            if p.round == 0 and "removed" not in seen:
                seen["removed"] = True
                _remove(market, how, go)
            if p.round == ROUNDS - 1:  # the run is still on: what the SuperLink admits now
                with ControlClient(deployed.address, deployed.ca_cert) as control:
                    seen["registry"] = {n.fingerprint: n.status for n in control.nodes()}

        removed = MarketRemovals(keys, fetch, interval_s=0.0)
        coalition = Coalition(
            clients=[[], [stay["id"], go["id"]]],
            enrolled=[[], [stay["id"], go["id"]]],
            node_keys=keys,
        )
        try:
            out = trainer.train(
                [0, 2], [100.0, 300.0], [0, 1, 1], 1, progress, coalition=coalition, removed=removed
            )
            if "registry" not in seen:  # the last round's progress came only with the run's end
                with ControlClient(deployed.address, deployed.ca_cert) as control:
                    seen["registry"] = {n.fingerprint: n.status for n in control.nodes()}
        finally:
            trainer.stop()
    status = {p["client_id"]: p for p in out.participants}
    assert status[stay["id"]]["status"] == "verified", status
    gone = status[go["id"]]
    assert gone["status"] == "dropped", status  # not paid at settlement
    assert "removed" in gone["reason"], gone
    left = int(gone["left_in_round"])
    assert 1 <= left < ROUNDS, gone  # removed after round 0, while rounds remained
    node = {(n["type_index"], n["client_index"]): n["node_id"] for n in out.metadata["nodes"]}
    asked = out.metadata["asked_per_round"]
    assert all(node[(1, 1)] in asked[r] for r in range(left))
    assert all(node[(1, 1)] not in asked[r] for r in range(left + 1, ROUNDS)), asked
    row = next(r for r in out.metadata["participant_status"] if r["client_index"] == 1)
    assert [c["round"] for c in row["checks"]] == list(range(left)), row  # round `left` on: unused
    assert out.completed == [0, 1]
    assert removed.removed == {go["id"]}
    # its key is pruned from the SuperLink; the one that stayed is still admitted
    assert seen["registry"][fingerprint(keys[go["id"]].encode())] == "unregistered", seen
    assert seen["registry"][fingerprint(keys[stay["id"]].encode())] != "unregistered", seen
