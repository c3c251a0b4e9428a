"""Two tasks' rounds at once on one external SuperLink (issue 36), as in compose and k3s: a
SuperLink and three SuperNodes started apart from the trainer (the deployed SuperLink and the
devices), each device one SuperNode with one key holding a data folder per task
(``data-<task>``). The trainer, given only the address, trains a Fashion-MNIST round and a digits
round from two threads: each round registers its own coalition's keys (the SuperLink admits the
union), trains with its own node map, and the two Flower runs overlap in time, the devices in both
coalitions serving both runs' messages in turn.

The type-3 device is removed from its fashion-mnist round (revoked or departed there) once FedAvg
round 0 is in, while its digits round still trains on the same key: it is left out of the
fashion-mnist run and reported dropped (not paid), but its key stays admitted at the SuperLink
and the digits round trains it to the end (the key is unregistered only when no active round
holds it)."""

from __future__ import annotations

import math
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from mots.platform.contracts import Coalition
from mots.tasks.task_file import load_task
from mots.tasks.training import evaluate_model_file
from mots.training.external_superlink import ExternalSuperLink
from mots.training.federation import LocalFederation, free_port_block, ports_needed
from mots.training.progress import RoundProgress
from services.orchestration.core.config import Settings
from services.orchestration.task_trainer import device_folders
from services.orchestration.trainer import Trainer

FASHION = Path("/usr/share/datasets/fashion-mnist")
NODE_TYPES = [0, 1, 2]
"""Three devices, one of each type; each holds both tasks' data."""
FASHION_SIZES = [50.0, 120.0, 300.0]


def _coalition(keys: dict[tuple[int, int], bytes], first_id: int) -> Coalition:
    """The market's view of a task: the devices of types 1 and 3 joined (K = (1, 0, 1)), the
    type-2 device enrolled without joining; client ids of the task's own (``first_id`` on)."""
    ids = [first_id + i for i in range(3)]
    return Coalition(
        clients=[[ids[0]], [], [ids[2]]],
        enrolled=[[ids[0]], [ids[1]], [ids[2]]],
        node_keys={ids[i]: keys[(i, 0)].decode() for i in range(3)},
    )


@pytest.mark.integration
@pytest.mark.slow  # one federation, two Flower runs at once: about a minute
def test_two_tasks_rounds_train_at_once_on_an_external_superlink(tmp_path: Path) -> None:
    """K = (1, 0, 1) of fashion-mnist and of digits, one thread each, on the devices' one key."""
    if not (FASHION / "t10k-labels-idx1-ubyte.gz").is_file():
        pytest.skip("Fashion-MNIST missing: apt-get install -y dataset-fashion-mnist")
    digits_sizes = [float(t.data_size) for t in load_task("digits").economics.scenario.types]
    data = tmp_path / "devices"
    task_data = {
        "fashion-mnist": device_folders("fashion-mnist", data, FASHION_SIZES, NODE_TYPES),
        "digits": device_folders("digits", data, digits_sizes, NODE_TYPES),
    }
    port = free_port_block(ports_needed(3))
    with LocalFederation(
        n_nodes=3,
        node_types=NODE_TYPES,
        superlink_port=port,
        workdir=tmp_path / "deployed",
        fork=True,
        task_data=task_data,
    ) as deployed:
        assert deployed.ca_cert is not None
        (tmp_path / "orchestration" / "tls").mkdir(parents=True)
        shutil.copy(deployed.ca_cert, tmp_path / "orchestration" / "tls" / "ca.crt")
        settings = Settings(
            trainer="deployment",
            train_rounds=3,
            train_local_steps=5,
            train_test_subset=500,
            federation_dir=str(tmp_path / "orchestration"),
            artifact_dir=str(tmp_path / "artifacts"),
            superlink_address=deployed.address,
        )
        trainer = Trainer(settings)
        keys = deployed.participant_keys()
        rounds: dict[str, tuple[list[float], Coalition]] = {
            "fashion-mnist": (FASHION_SIZES, _coalition(keys, 11)),
            "digits": (digits_sizes, _coalition(keys, 111)),
        }
        spans: dict[str, tuple[float, float]] = {}
        results: dict[str, Any] = {}
        gone: set[int] = set()  # fashion-mnist's removed client ids (MarketRemovals' answer)
        seen: dict[str, Any] = {}

        def fashion_progress(p: RoundProgress) -> None:
            if p.partial or p.round != 0 or gone:
                return
            seen["digits_active"] = "digits" not in results
            gone.add(13)  # the type-3 device's fashion-mnist client

        def train(task: str, round_id: int) -> None:
            sizes, coalition = rounds[task]
            fashion = task == "fashion-mnist"
            res = trainer.train(
                [1, 0, 1],
                sizes,
                NODE_TYPES,
                round_id,
                fashion_progress if fashion else None,
                coalition=coalition,
                removed=(lambda: set(gone)) if fashion else None,
                task=task,
            )
            end = time.monotonic()
            # the training's own span: ``seconds`` counts from the task's lock taken, not the
            # wait for it (one lock for both tasks read as overlapping here until 2026-11-29)
            results[task], spans[task] = res, (end - res.seconds, end)

        threads = [
            threading.Thread(target=train, args=(task, r)) for r, task in enumerate(rounds, start=1)
        ]
        try:
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=600)
            assert isinstance(trainer._external, ExternalSuperLink)
            assert trainer._external.active_keys() == set(), "a round kept its keys held"
        finally:
            trainer.stop()
        assert deployed.all_pids(), "the trainer must leave the external SuperLink alone"
        node_ids = {deployed.node_map()[n]: n for n in deployed.node_map()}
    assert set(results) == set(rounds), "a training failed (see the log)"
    (a0, a1), (b0, b1) = spans["fashion-mnist"], spans["digits"]
    overlap = min(a1, b1) - max(a0, b0)
    print(f"spans {spans}: overlap {overlap:.1f} s")
    assert overlap > 0.5 * min(a1 - a0, b1 - b0), spans  # at once, not one after the other
    # removed from fashion-mnist while its digits round trained on the same key: the key stayed
    assert seen["digits_active"], "the digits round ended before the removal: nothing shared"
    status = {p["client_id"]: p for p in results["fashion-mnist"].participants}
    assert status[11]["status"] == "verified", status
    assert status[13]["status"] == "dropped" and "removed" in status[13]["reason"], status
    assert [(p["client_id"], p["status"]) for p in results["digits"].participants] == [
        (111, "verified"),
        (113, "verified"),
    ], results["digits"].participants
    digits_node = {
        (n["type_index"], n["client_index"]): n["node_id"]
        for n in results["digits"].metadata["nodes"]
    }[(2, 0)]
    assert all(digits_node in asked for asked in results["digits"].metadata["asked_per_round"])
    for task, res in results.items():
        # trained on the devices of types 1 and 3 (the same two SuperNodes for both tasks)
        nodes = {n["node_id"]: (n["type_index"], n["client_index"]) for n in res.metadata["nodes"]}
        assert nodes == {node_ids[(0, 0)]: (0, 0), node_ids[(2, 0)]: (2, 0)}, nodes
        assert math.isfinite(res.epsilon) and 0.0 < res.epsilon < math.log(10), (task, res)
        print(f"{task}: epsilon {res.epsilon:.4f}, {res.seconds:.1f} s")
    eps, _ = evaluate_model_file(load_task("digits"), results["digits"].artifact_path)
    assert abs(eps - results["digits"].epsilon) < 1e-5
