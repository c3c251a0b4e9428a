"""The orchestration trainer on an external SuperLink (MOTS_SUPERLINK_ADDRESS), as in compose/k3s.

A real SuperLink and two SuperNodes are started apart from the trainer (standing in for the deployed
SuperLink and the Pis); the trainer, given only that address, must train on them through
`flwr run` (TLS, verified by the CA the SuperLink publishes on the shared work directory) and start
no federation of its own. Before training it registers with the SuperLink the SuperNode keys the
clients registered at the market; which node is which participant comes from those keys.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from mots.platform.contracts import Coalition
from mots.training import artifacts
from mots.training.federation import (
    ExternalSuperLink,
    LocalFederation,
    descendants,
    free_port_block,
    ports_needed,
)
from services.orchestration.core.config import Settings
from services.orchestration.trainer import Trainer

FASHION = Path("/usr/share/datasets/fashion-mnist")


def _settings(tmp_path: Path, **extra: object) -> Settings:
    base: dict[str, object] = {
        "trainer": "deployment",
        "train_rounds": 1,
        "train_local_steps": 5,
        "train_test_subset": 500,
        "federation_dir": str(tmp_path / "orchestration"),
        "artifact_dir": str(tmp_path / "artifacts"),
    }
    return Settings(**{**base, **extra})  # type: ignore[arg-type]


def test_superlink_address_empty_means_local_and_bad_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Empty or unset: a local federation; not host:port: an error naming the variable."""
    monkeypatch.setenv("MOTS_SUPERLINK_ADDRESS", "")
    assert Settings().superlink_address is None
    monkeypatch.setenv("MOTS_SUPERLINK_ADDRESS", " superlink:9092 ")
    assert Settings().superlink_address == "superlink:9092"
    for bad in ("superlink", "superlink:", "superlink:http", ":9092", "superlink:70000"):
        monkeypatch.setenv("MOTS_SUPERLINK_ADDRESS", bad)
        with pytest.raises(ValidationError, match="MOTS_SUPERLINK_ADDRESS: expected host:port"):
            Settings()


def test_tasks_on_an_external_superlink_do_not_wait_for_each_other(tmp_path: Path) -> None:
    """Issue 36: two tasks' rounds on one external SuperLink each take their own task's lock (one
    round per task at a time), not one lock for all, and share the one link (its key sync)."""
    from mots.platform.api.tasks import DEFAULT_TASK

    settings = _settings(tmp_path, superlink_address="superlink:9093")
    (tmp_path / "orchestration" / "tls").mkdir(parents=True)
    (tmp_path / "orchestration" / "tls" / "ca.crt").write_text("the SuperLink's CA")
    trainer = Trainer(settings)
    default, digits = trainer._state(DEFAULT_TASK), trainer._state("digits")
    assert default is not digits and default.lock is not digits.lock
    assert trainer._state("digits") is digits
    link = trainer._external_link()
    assert isinstance(link, ExternalSuperLink) and trainer._external_link() is link


@pytest.mark.integration
def test_trainer_trains_on_an_external_superlink(tmp_path: Path) -> None:
    """K = (1, 1) on an externally started SuperLink + 2 SuperNodes equals the in-process run;
    the trainer starts no federation of its own."""
    if not (FASHION / "t10k-labels-idx1-ubyte.gz").is_file():
        pytest.skip("Fashion-MNIST missing: apt-get install -y dataset-fashion-mnist")
    port = free_port_block(ports_needed(2))
    with LocalFederation(
        n_nodes=2, node_types=[0, 1], superlink_port=port, workdir=tmp_path / "deployed"
    ) as deployed:
        own_port = free_port_block(ports_needed(2), start=port + ports_needed(2))
        settings = _settings(tmp_path, superlink_address=deployed.address, superlink_port=own_port)
        assert deployed.ca_cert is not None  # published where the orchestration reads it
        (tmp_path / "orchestration" / "tls").mkdir(parents=True)
        shutil.copy(deployed.ca_cert, tmp_path / "orchestration" / "tls" / "ca.crt")
        trainer = Trainer(settings)
        before = descendants([os.getpid()])
        try:
            # the market's view: clients 11 (type 1) and 21 (type 2) joined and registered the
            # public keys of their devices (the deployed nodes); client 12 enrolled without a key
            keys = deployed.participant_keys()
            coalition = Coalition(
                clients=[[11], [21]],
                enrolled=[[11, 12], [21]],
                node_keys={11: keys[(0, 0)].decode(), 21: keys[(1, 0)].decode()},
            )
            outcome = trainer.train(
                [1, 1], [50.0, 300.0], [0, 0, 0, 1, 1], round_id=7, coalition=coalition
            )
            assert [(p["client_id"], p["status"]) for p in outcome.participants] == [
                (11, "verified"),
                (21, "verified"),
            ]
            assert isinstance(trainer._federation, ExternalSuperLink)
            spawned = descendants([os.getpid()]) - before - deployed.all_pids()
        finally:
            trainer.stop()
        assert deployed.all_pids(), "stopping the trainer must leave the external SuperLink alone"
    # trained on the deployed nodes: one node of each type, one FedAvg round, a verified artifact
    assert len(outcome.losses) == 1 and outcome.epsilon == outcome.losses[-1]
    reference = Trainer(_settings(tmp_path / "ref", trainer="inprocess")).train(
        [1, 1], [50.0, 300.0], [0, 0, 0, 1, 1], round_id=7
    )
    np.testing.assert_allclose(outcome.losses, reference.losses, rtol=1e-4)
    nodes = sorted((n["type_index"], n["client_index"]) for n in outcome.metadata["nodes"])
    assert nodes == [(0, 0), (1, 0)]
    assert outcome.completed == [1, 1]
    assert Path(outcome.artifact_path).is_relative_to(tmp_path / "artifacts" / "round-7")
    assert artifacts.verify(Path(outcome.artifact_path), outcome.artifact_sha256)
    # the run went through the worker's own connection to that address, and nothing else started
    run_dir = Path(outcome.metadata["run_dir"])
    assert run_dir.is_relative_to(tmp_path / "orchestration" / "runs")
    config = (tmp_path / "orchestration" / "flwr-home" / "config.toml").read_text()
    assert f'address = "{deployed.address}"' in config
    assert not (tmp_path / "orchestration" / "federation.json").exists()
    assert not (tmp_path / "orchestration" / "logs").exists()
    assert spawned == set(), f"the trainer left processes running: {spawned}"
