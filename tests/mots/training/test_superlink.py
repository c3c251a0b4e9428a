"""The SuperLink as the platform runs it: TLS on every API, SuperNode authentication, the Fleet
API alone on the port the edge reaches, keys registered through the Control API."""

from __future__ import annotations

import asyncio
import ssl
import stat
from pathlib import Path
from typing import Any

import httpx
import pytest

from mots.training.control import ControlClient, ControlError
from mots.training.federation import LocalFederation, free_port_block, ports_needed
from mots.training.pki import make_node_key
from mots.training.superlink import FleetOnly, fleet_path, split_args


def test_fleet_only_refuses_every_other_path() -> None:
    """Fleet paths and /health pass through; Control and Runtime paths get 404 without reaching
    the app; websockets are dropped."""
    reached: list[str] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        reached.append(scope["path"])

    sent: list[dict[str, Any]] = []

    async def send(msg: dict[str, Any]) -> None:
        sent.append(msg)

    async def receive() -> dict[str, Any]:
        return {}

    wrapper = FleetOnly(app)
    for path in (
        "/v1/fleet/pull-messages",
        "/health",
        "/v1/control/register-node",
        "/v1/runtime/acquire-task",
    ):
        asyncio.run(wrapper({"type": "http", "path": path}, receive, send))
    asyncio.run(wrapper({"type": "websocket", "path": "/v1/fleet/x"}, receive, send))
    assert reached == ["/v1/fleet/pull-messages", "/health"]
    assert [m["status"] for m in sent if m["type"] == "http.response.start"] == [404, 404]
    assert fleet_path("/v1/fleet/") and not fleet_path("/v1/fleetx")
    ours, rest = split_args(["--fleet-port", "9092", "--port", "9093", "--insecure"])
    assert ours.fleet_port == 9092 and rest == ["--port", "9093", "--insecure"]
    with pytest.raises(SystemExit, match="--port"):
        split_args(["--fleet-port", "9092"])


@pytest.mark.integration
def test_secure_superlink_separates_control_and_admits_only_registered_keys(
    tmp_path: Path,
) -> None:
    """One node: TLS everywhere, the Control API answers only on its own port, the registered
    key is online under the id registration gave, and sync() revokes keys."""
    port = free_port_block(ports_needed(1), start=11500)
    with LocalFederation(n_nodes=1, node_types=[0], superlink_port=port, workdir=tmp_path) as fed:
        ca = ssl.create_default_context(cafile=str(fed.ca_cert))
        assert stat.S_IMODE(fed.node_key_path(0).stat().st_mode) == 0o600
        argv = " ".join(
            Path(f"/proc/{p.pid}/cmdline").read_text().replace("\0", " ") for p in fed.processes
        )
        assert "--insecure" not in argv and "--enable-supernode-auth" in argv
        # the edge's port: Fleet API and health only, and only over TLS
        fleet = f"https://{fed.fleet_address}"
        assert httpx.post(f"{fleet}/v1/control/list-nodes", verify=ca).status_code == 404
        assert httpx.post(f"{fleet}/v1/runtime/acquire-task", verify=ca).status_code == 404
        assert httpx.get(f"{fleet}/health", verify=ca).status_code == 200
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"http://{fed.fleet_address}/health", timeout=5)
        with pytest.raises(httpx.HTTPError):  # a certificate from another CA is not trusted
            httpx.get(f"{fleet}/health", timeout=5)
        # the orchestration's port: the Control API
        with ControlClient(fed.address, fed.ca_cert) as control:
            nodes = {n.node_id: n for n in control.nodes()}
            (node_id,) = fed.node_map()
            assert nodes[node_id].status == "online"
            assert control.register(make_node_key(tmp_path / "k").public_pem) not in nodes
            ids = control.sync({"only": make_node_key(tmp_path / "only").public_pem})
            left = {n.node_id: n.status for n in control.nodes()}
            assert left[ids["only"]] == "registered" and left[node_id] == "unregistered"
        with pytest.raises(ControlError, match="list-nodes"):
            ControlClient(fed.fleet_address, fed.ca_cert).nodes()


def test_tls_material_from_a_secret_or_made_once_and_the_ca_published(tmp_path: Path) -> None:
    """--tls-from (a Secret's ca.crt/tls.crt/tls.key) wins; otherwise the files are made once in
    --tls-dir and kept; the CA is copied to every --publish-ca path."""
    from mots.training.pki import make_tls
    from mots.training.superlink import tls_args

    made = tls_args(tmp_path / "state", None, ["superlink"], [tmp_path / "fed" / "tls" / "ca.crt"])
    ca = (tmp_path / "state" / "ca.crt").read_bytes()
    assert made[made.index("--ssl-ca-certfile") + 1] == str(tmp_path / "state" / "ca.crt")
    assert (tmp_path / "fed" / "tls" / "ca.crt").read_bytes() == ca
    assert tls_args(tmp_path / "state", None, ["superlink"], []) == made
    assert (tmp_path / "state" / "ca.crt").read_bytes() == ca  # kept, not remade
    secret = tmp_path / "secret"
    files = make_tls(tmp_path / "other", ["superlink-fleet"])
    secret.mkdir()
    (secret / "ca.crt").write_bytes(files.ca_cert.read_bytes())
    (secret / "tls.crt").write_bytes(files.server_cert.read_bytes())
    (secret / "tls.key").write_bytes(files.server_key.read_bytes())
    tls_args(tmp_path / "state", secret, [], [tmp_path / "fed" / "tls" / "ca.crt"])
    assert (tmp_path / "state" / "server.crt").read_bytes() == files.server_cert.read_bytes()
    assert stat.S_IMODE((tmp_path / "state" / "server.key").stat().st_mode) == 0o600
    assert (tmp_path / "fed" / "tls" / "ca.crt").read_bytes() == files.ca_cert.read_bytes()
    (secret / "tls.key").unlink()
    with pytest.raises(SystemExit, match=r"tls\.key"):
        tls_args(tmp_path / "state", secret, [], [])
