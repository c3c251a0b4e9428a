"""The edge node started before the platform registered its key (how every deployed node starts:
the orchestration registers the round's participants' keys when training starts) waits for the
SuperLink to admit it, and connects once the key is registered.

Found running docker/compose.yaml on podman: every SuperNode container exited at once with
Flower's code 305 ("Failed to activate SuperNode", ActivateNode refused for an unregistered key);
podman restarted them without pause, and on Kubernetes CrashLoopBackOff would wait up to 5 minutes,
longer than the ServerApp waits for a chosen node (180 s).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from mots.training.control import ControlClient
from mots.training.federation import free_port_block
from mots.training.pki import ensure_node_key
from mots.training.warm_node import not_admitted

ROOT = Path(__file__).resolve().parents[3]
REFUSED = "the SuperLink has not admitted this node's key yet"  # warm_node's line per refusal


def test_only_the_refused_activation_counts_as_not_admitted() -> None:
    """Flower's 412 with code 2004 (FLEET_NODE_ACTIVATION_FAILED) is retried; any other error
    keeps Flower's own policy."""
    request = httpx.Request("POST", "https://superlink:9092/v1/fleet/activate-node")

    def error(status: int, body: str) -> httpx.HTTPStatusError:
        response = httpx.Response(status, text=body, request=request)
        return httpx.HTTPStatusError("refused", request=request, response=response)

    assert not_admitted(error(412, '{"code": 2004, "detail": "Failed to activate SuperNode."}'))
    assert not not_admitted(error(412, '{"code": 2003, "detail": "other"}'))
    assert not not_admitted(error(500, "not json"))
    assert not not_admitted(httpx.ConnectError("refused", request=request))


def _superlink(tmp: Path, fleet: int, control: int) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "mots.training.superlink", "--fleet-host", "127.0.0.1",
            "--fleet-port", str(fleet), "--host", "127.0.0.1", "--port", str(control),
            "--tls-dir", str(tmp / "tls"), "--tls-host", "127.0.0.1", "--enable-supernode-auth",
            "--database", str(tmp / "state.db"), "--disable-runtime-dependency-installation"]  # fmt: skip
    log = (tmp / "superlink.log").open("wb")
    return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=_env(tmp))


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    path = os.pathsep.join([str(ROOT / "shared"), str(ROOT), os.environ.get("PYTHONPATH", "")])
    bin_dir = str(Path(sys.executable).parent)
    return dict(os.environ, PYTHONPATH=path, FLWR_HOME=str(tmp / "flwr"),
                PATH=bin_dir + os.pathsep + os.environ["PATH"], PYTHONUNBUFFERED="1", **extra)  # fmt: skip


def _wait(what: str, ok: object, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not ok():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.5)


@pytest.mark.integration
def test_an_edge_node_waits_until_its_key_is_registered_then_connects(tmp_path: Path) -> None:
    """`python -m edge.agent supernode` (the edge image's command) against a SuperLink with
    SuperNode authentication: still running after two refused activations, online within 15 s of
    its key's registration."""
    fleet = free_port_block(3, start=12600)
    control, health = fleet + 1, fleet + 2
    superlink = _superlink(tmp_path, fleet, control)
    node = None
    try:
        ca = tmp_path / "tls" / "ca.crt"
        _wait("the SuperLink's CA", ca.is_file, 60)
        key = tmp_path / "agent" / "supernode.key"
        env = _env(tmp_path, MOTS_EDGE_CLIENT_TYPE="type-1", MOTS_EDGE_DATA_SIZE="50",
                   MOTS_EDGE_COST="0.5", MOTS_EDGE_CLIENT_INDEX="0", MOTS_EDGE_CLIENT_NAME="e",
                   MOTS_EDGE_SUPERLINK_ADDRESS=f"127.0.0.1:{fleet}",
                   MOTS_EDGE_ROOT_CERTIFICATES=str(ca), MOTS_EDGE_NODE_KEY=str(key),
                   MOTS_EDGE_STATE_DIR=str(tmp_path / "agent"), MOTS_EDGE_HEALTH_PORT=str(health),
                   MOTS_EDGE_DATA_DIR=str(tmp_path / "data"), MOTS_UTILITY='{"kind": "power", "scale": 1.0, "exponent": 8.0}')  # fmt: skip
        log = (tmp_path / "supernode.log").open("wb")
        node = subprocess.Popen([sys.executable, "-m", "edge.agent", "supernode"], env=env,
                                stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
        logged = tmp_path / "supernode.log"

        def refused_twice_or_exited() -> bool:
            return node.poll() is not None or logged.read_text().count(REFUSED) >= 2

        _wait("two refused activations", refused_twice_or_exited, 120)
        out = logged.read_text()
        assert node.poll() is None, f"the node exited {node.returncode}: {out[-1500:]}"
        with ControlClient(f"127.0.0.1:{control}", ca) as ctl:
            node_id = ctl.register(ensure_node_key(key).public_pem, name="e")

            def online() -> bool:
                return {n.node_id: n.status for n in ctl.nodes()}.get(node_id) == "online"

            _wait("the node online", online, 15)
        assert node.poll() is None
    finally:
        for proc in (node, superlink):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
