"""Warm nodes forked from one template (``LocalFederation(fork=True)``): each node is its own
process in its own session, logging to its own file, trains and is verified like a cold node;
killing its stub kills it; stop leaves nothing behind."""

from __future__ import annotations

import os
import signal
import socket
import struct
import time
from pathlib import Path

import numpy as np
import pytest

from mots.training.config import TrainConfig
from mots.training.federation import LocalFederation, free_port_block, ports_needed
from mots.training.processes import alive
from mots.training.runner import train_coalition
from mots.training.warm_fork import _recv_request, forked_pid


def _ppid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_a_request_without_its_three_descriptors_is_refused() -> None:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with a, b:
        payload = b'{"argv": []}'
        a.sendall(struct.pack("!I", len(payload)) + payload)
        with pytest.raises(ValueError, match="three descriptors"):
            _recv_request(b)


@pytest.mark.integration
def test_forked_nodes_train_verified_and_die_with_their_stub(
    fashion_dir: Path, tmp_path: Path
) -> None:
    port = free_port_block(ports_needed(2))
    fed = LocalFederation(
        n_nodes=2, node_types=[0, 0], superlink_port=port, workdir=tmp_path / "fed", fork=True
    )
    fed.start()
    try:
        template = next(p for p in fed.processes if p.role == "template")
        stubs = [p for p in fed.processes if p.role == "supernode"]
        assert fed._fork_socket is not None
        nodes = [forked_pid(fed._fork_socket, s.pid) for s in stubs]
        assert all(n is not None and alive(n) for n in nodes)
        for node in nodes:
            assert node is not None
            assert _ppid(node) == template.pid  # forked by the template, not started cold
            assert os.getsid(node) == node  # a session of its own, like a spawned node
        for s in stubs:
            assert "SuperNode ID" in Path(s.log).read_text()  # its own log, through its stub
        memory = [r["rss_mb"] for r in fed.status()["processes"] if r["role"] == "supernode"]
        assert min(memory) > 100  # the forked node's memory is counted, not only its stub's

        cfg = TrainConfig(data_dir=fashion_dir, rounds=1, local_steps=5, test_subset=200, seed=1)
        res = train_coalition([2, 0, 0], cfg, engine="deployment", federation=fed)
        assert np.isfinite(res.epsilon)
        assert {p["status"] for p in res.metadata["participant_status"]} == {"verified"}

        os.kill(stubs[1].pid, signal.SIGKILL)  # a killed stub is a killed node
        deadline = time.monotonic() + 10
        while nodes[1] is not None and alive(nodes[1]) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert nodes[1] is not None and not alive(nodes[1])
        assert alive(template.pid)
    finally:
        survivors = fed.stop()
    assert survivors == []
    assert not any(n is not None and alive(n) for n in nodes)
    assert fed._fork_socket is None


def test_a_killed_owners_superexec_counts_as_a_stray(tmp_path: Path) -> None:
    """Flower's ``flower-superexec`` (a SuperLink's or a subprocess-layout SuperNode's) runs in the
    federation's directory too; a killed owner's must be reaped with the rest (it was missed: three
    were left after a killed bench-training run)."""
    import subprocess
    import sys

    from mots.training.processes import reap_strays, strays

    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", "/venv/bin/flower-superexec"],
        cwd=tmp_path,
    )
    try:
        assert proc.pid in strays(tmp_path)
        assert proc.pid in reap_strays(tmp_path)
        assert proc.wait(timeout=10) != 0
    finally:
        proc.kill()
