"""The real deployment engine: `mots federation up`, Flower training, `mots federation down`.

Starts a real SuperLink and three SuperNodes (warm layout: one process per node) as processes, trains two
rounds of a small config through `flwr run`, checks the result against the in-process engine and the
saved artifact, and checks that stopping leaves no process behind.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from mots.training import artifacts
from mots.training.config import TrainConfig
from mots.training.federation import (
    SUPERNODE_START_ATTEMPTS,
    FederationError,
    LocalFederation,
    alive,
    free_port_block,
    ports_needed,
)
from mots.training.partition import round_sample
from mots.training.runner import train_coalition

MOTS = str(Path(sys.executable).parent / "mots")


def _mots(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([MOTS, *args], capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.integration
def test_federation_trains_like_inprocess_and_leaves_nothing(
    fashion_dir: Path, tmp_path: Path
) -> None:
    """3 SuperNodes (one per type): K = (1, 0, 1) trained on Flower equals the in-process run."""
    port = free_port_block(ports_needed(3))
    workdir = tmp_path / "fed"
    up = _mots(
        "federation",
        "up",
        "--nodes",
        "3",
        "--counts",
        "1,1,1",
        "--port",
        str(port),
        "--workdir",
        str(workdir),
    )
    assert up.returncode == 0, up.stdout + up.stderr
    fed = LocalFederation.attach(workdir)
    pids = fed.all_pids()
    try:
        status = json.loads(
            _mots("federation", "status", "--workdir", str(workdir), "--json").stdout
        )
        roles = sorted(p["role"] for p in status["processes"] if p["alive"])
        assert roles == ["superlink", "supernode", "supernode", "supernode"]  # warm: one each
        cfg = TrainConfig(data_dir=fashion_dir, rounds=2, local_steps=5, test_subset=500)
        seen: list[int] = []
        res = train_coalition(
            [1, 0, 1],
            cfg,
            engine="deployment",
            federation=fed,
            artifact_dir=tmp_path / "art",
            progress=lambda p: None if p.partial else seen.append(p.round),
        )
        ref = train_coalition([1, 0, 1], cfg)
        np.testing.assert_allclose(res.losses, ref.losses, rtol=1e-4)
        assert seen == [0, 1]
        assert res.metadata["engine"] == "deployment"
        assert res.metadata["completed_participants"] == [1, 0, 1]
        assert {p["status"] for p in res.metadata["participant_status"]} == {"verified"}
        assert {n["node_id"] for n in res.metadata["nodes"]} <= set(fed.node_map())
        assert sorted((n["type_index"], n["client_index"]) for n in res.metadata["nodes"]) == [
            (0, 0),
            (2, 0),
        ]
        assert res.artifact_path is not None and res.artifact_sha256 is not None
        assert artifacts.verify(res.artifact_path, res.artifact_sha256)
        pids |= fed.all_pids()  # ServerApp/ClientApp children seen during the run
    finally:
        down = _mots("federation", "down", "--workdir", str(workdir))
    assert down.returncode == 0, down.stdout + down.stderr
    assert [p for p in pids if alive(p)] == []
    with pytest.raises(FederationError, match=r"no federation\.json"):
        LocalFederation.attach(workdir)


@pytest.mark.integration
def test_federation_samples_clients_per_round_like_inprocess(
    fashion_dir: Path, tmp_path: Path
) -> None:
    """Cross-device sampling on the deployment engine: 4 SuperNodes, K = (2, 1, 1), 2 FedAvg
    rounds at fraction_train 0.5. Each round asks only round_sample's 2 of the 4 participants (the
    in-process engines' draw: the losses match the in-process run), and every participant is
    completed (verified whenever asked, paid), whether or not a round drew it."""
    workdir = tmp_path / "fed"
    port = free_port_block(ports_needed(4))
    fed = LocalFederation(
        n_nodes=4,
        node_types=[0, 0, 1, 2],
        superlink_port=port,
        workdir=workdir,
        layout="subprocess",  # Flower's own layout, with resident trainers, stays supported
    )
    fed.start()
    roles = sorted(p.role for p in fed.processes)
    assert roles == ["superlink"] + ["supernode"] * 4 + ["trainer"] * 4
    try:
        cfg = TrainConfig(
            data_dir=fashion_dir,
            rounds=2,
            local_steps=5,
            test_subset=500,
            fraction_train=0.5,
            seed=1,
        )
        res = train_coalition(
            [2, 1, 1], cfg, engine="deployment", federation=fed, artifact_dir=tmp_path / "art"
        )
        ref = train_coalition([2, 1, 1], cfg)
        np.testing.assert_allclose(res.losses, ref.losses, rtol=1e-4)
        where = {n["node_id"]: (n["type_index"], n["client_index"]) for n in res.metadata["nodes"]}
        order = [(0, 0), (0, 1), (1, 0), (2, 0)]  # the coalition in type-major order
        for r, asked in enumerate(res.metadata["asked_per_round"]):
            assert sorted(where[n] for n in asked) == [order[i] for i in round_sample(4, cfg, r)]
        rows = res.metadata["participant_status"]
        assert sum(p["rounds_asked"] for p in rows) == 2 * 2  # 2 of 4 in each of 2 rounds
        assert {p["status"] for p in rows} == {"verified"}
        assert all(p["rounds_verified"] == p["rounds_asked"] for p in rows)
        assert res.metadata["completed_participants"] == [2, 1, 1]
    finally:
        fed.stop()


def test_port_in_use_refused(tmp_path: Path) -> None:
    """A busy port is refused before anything starts, naming superlink_port."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(FederationError, match="superlink_port"):
            LocalFederation(n_nodes=1, superlink_port=port, workdir=tmp_path).start()


def _fake_supernode(tmp_path: Path, failures: int, port: int) -> list[str]:
    """A stand-in process that exits before registering ``failures`` times, then registers (as
    an insecure SuperNode does: it logs its id and listens on its runtime ``port``)."""
    marker = tmp_path / "attempts"
    script = (
        "import pathlib, socket, sys, time\n"
        f"m = pathlib.Path({str(marker)!r})\n"
        "n = int(m.read_text()) if m.exists() else 0\n"
        "m.write_text(str(n + 1))\n"
        f"if n < {failures}:\n"
        "    print('Exit Code: 305', flush=True); sys.exit(1)\n"
        "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
        "s.bind(('127.0.0.1', "
        f"{port})); s.listen()\n"
        "print('SuperNode ID: 7', flush=True)\n"
        "time.sleep(60)\n"
    )
    return [sys.executable, "-c", script]


def _fake_federation(tmp_path: Path) -> LocalFederation:
    """One insecure node's federation whose SuperNode the test starts itself."""
    fed = LocalFederation(
        n_nodes=1,
        superlink_port=free_port_block(ports_needed(1)),
        workdir=tmp_path / "fed",
        start_timeout=30,
        layout="subprocess",
        secure=False,
    )
    (tmp_path / "fed" / "logs").mkdir(parents=True)
    return fed


def test_supernode_that_fails_to_activate_is_started_again(tmp_path: Path) -> None:
    """A SuperNode exiting before it registers is restarted (up to SUPERNODE_START_ATTEMPTS)."""
    fed = _fake_federation(tmp_path)
    try:
        argv = _fake_supernode(tmp_path, 1, fed.nodes[0]["port"])
        fed._spawn("supernode", "supernode-00", argv, tmp_path / "home")
        fed._wait(fed._all_registered, "1 SuperNode to register")
        assert fed._attempts["supernode-00"] == 2
        assert len([p for p in fed.processes if p.role == "supernode"]) == 1
    finally:
        assert fed.stop() == []


def test_supernode_that_keeps_failing_is_reported(tmp_path: Path) -> None:
    """After SUPERNODE_START_ATTEMPTS failures the start fails, naming the node and its log."""
    fed = _fake_federation(tmp_path)
    try:
        argv = _fake_supernode(tmp_path, 99, fed.nodes[0]["port"])
        fed._spawn("supernode", "supernode-00", argv, tmp_path / "home")
        with pytest.raises(FederationError, match=r"(?s)supernode-00 .* exited .*Exit Code: 305"):
            fed._wait(fed._all_registered, "1 SuperNode to register")
        assert fed._attempts["supernode-00"] == SUPERNODE_START_ATTEMPTS
    finally:
        fed.stop()


def test_a_killed_owners_federation_is_reaped_and_nothing_else(tmp_path: Path) -> None:
    """A federation process left in the workdir by an owner that was SIGKILLed (its own session,
    so it outlived the owner) is killed before a new federation starts there; a process in the
    workdir that is not a federation's is left alone, as is one elsewhere."""
    import subprocess

    from mots.training.federation import reap_strays, strays

    work = tmp_path / "fed"
    work.mkdir()
    elsewhere = tmp_path / "other"
    elsewhere.mkdir()
    sleep = [sys.executable, "-c", "import time; time.sleep(120)"]

    def spawn(argv: list[str], cwd: Path) -> subprocess.Popen[bytes]:
        return subprocess.Popen(argv, cwd=cwd, start_new_session=True)

    stale = spawn([*sleep, "flower-supernode", "--insecure"], work)
    bystander = spawn([*sleep, "something-else"], work)
    other = spawn([*sleep, "flower-supernode"], elsewhere)
    try:
        deadline = time.monotonic() + 10
        while stale.pid not in strays(work) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert strays(work) == [stale.pid]
        assert reap_strays(work) == [stale.pid]
        assert stale.wait(timeout=10) == -signal.SIGKILL
        assert bystander.poll() is None and other.poll() is None
        assert strays(work) == []
    finally:
        for p in (stale, bystander, other):
            p.kill()
            p.wait()
