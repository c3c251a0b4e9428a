"""The agent's settings, the SuperNode command it builds, and the SuperNode health check."""

from __future__ import annotations

import shlex
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from pydantic import ValidationError

from edge.agent.health import supernode_serving
from edge.agent.settings import AgentSettings
from edge.agent.supernode import node_config, supernode_argv

UTILITY = '{"kind": "power", "scale": 1.0, "exponent": 8.0}'


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """A complete agent environment (tests remove or break one variable at a time)."""
    for key, value in {
        "MOTS_UTILITY": UTILITY,
        "MOTS_EDGE_CLIENT_TYPE": "type-2",
        "MOTS_EDGE_DATA_SIZE": "120",
        "MOTS_EDGE_COST": "1.2",
        "MOTS_EDGE_CLIENT_NAME": 'pi "07"',
        "MOTS_EDGE_SUPERLINK_ADDRESS": "superlink.mots.svc.cluster.local:9092",
        "MOTS_EDGE_NODE_CONFIG": "trainer-socket=/tmp/t.sock",
    }.items():
        monkeypatch.setenv(key, value)
    return monkeypatch


def test_settings_read_the_environment(env: pytest.MonkeyPatch) -> None:
    """MOTS_EDGE_* and MOTS_UTILITY become the device's facts and U(ε)."""
    s = AgentSettings()
    assert (s.client_type, s.data_size, str(s.cost)) == ("type-2", 120, "1.2")
    assert s.utility_model().value(0.5) == pytest.approx(0.5**-8)
    assert s.device_name() == 'pi "07"'


@pytest.mark.parametrize(
    ("var", "value", "message"),
    [
        ("MOTS_EDGE_CLIENT_TYPE", None, "client_type"),
        ("MOTS_EDGE_DATA_SIZE", "0", "data_size"),
        ("MOTS_EDGE_COST", "-1", "cost"),
        ("MOTS_UTILITY", '{"kind": "cubic"}', "MOTS_UTILITY"),
        ("MOTS_EDGE_MARKET_URL", "market:8000", "MOTS_EDGE_MARKET_URL"),
        ("MOTS_EDGE_CLIENT_TYPE", "type 2", "client_type"),
    ],
)
def test_bad_settings_name_the_variable(
    env: pytest.MonkeyPatch, var: str, value: str | None, message: str
) -> None:
    """A missing or invalid variable is refused with its name in the error."""
    if value is None:
        env.delenv(var)
    else:
        env.setenv(var, value)
    with pytest.raises(ValidationError, match=message):
        AgentSettings()


def test_supernode_command_carries_the_facts(env: pytest.MonkeyPatch) -> None:
    """The warm node (Flower's SuperNode in one process) gets the SuperLink, the node config
    (quoted strings) and the health port."""
    env.setenv("MOTS_EDGE_CLIENT_INDEX", "3")
    argv = supernode_argv(AgentSettings())
    assert argv[1:3] == ["-m", "mots.training.warm_node"]
    assert argv[3:5] == ["--superlink", "superlink.mots.svc.cluster.local:9092"]
    assert "--insecure" not in argv
    assert argv[argv.index("--root-certificates") + 1] == "/var/lib/mots/ca/ca.crt"
    assert (
        argv[argv.index("--auth-supernode-private-key") + 1] == "/var/lib/mots/agent/supernode.key"
    )
    assert argv[argv.index("--health-server-address") + 1] == "0.0.0.0:8081"
    config = argv[argv.index("--node-config") + 1]
    pairs = dict(p.split("=", 1) for p in shlex.split(config))
    assert pairs == {
        "client-type": "type-2",
        "client-index": "3",
        "data-dir": "/var/lib/mots/data",
        "client-name": 'pi "07"',
        "trainer-socket": "/tmp/t.sock",
    }


def test_node_config_is_what_the_client_app_reads(env: pytest.MonkeyPatch) -> None:
    """mots.training's node_identity reads (type index, client index) from our node config."""
    from mots.training.flower_messages import node_identity

    env.setenv("MOTS_EDGE_CLIENT_INDEX", "4")
    pairs = dict(p.split("=", 1) for p in shlex.split(node_config(AgentSettings())))
    assert node_identity(pairs) == (1, 4)  # type-2 is the second type (0-based 1)


def test_client_index_comes_from_the_pi_data_directory(
    env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Unset MOTS_EDGE_CLIENT_INDEX: <data_dir>/client-index is read; missing or bad is an error."""
    env.setenv("MOTS_EDGE_DATA_DIR", str(tmp_path))
    with pytest.raises(ValueError, match="MOTS_EDGE_CLIENT_INDEX"):
        node_config(AgentSettings())
    (tmp_path / "client-index").write_text("seven\n")
    with pytest.raises(ValueError, match="integer"):
        node_config(AgentSettings())
    (tmp_path / "client-index").write_text("7\n")
    assert "client-index=7" in node_config(AgentSettings())


def test_extra_node_config_must_be_pairs(env: pytest.MonkeyPatch) -> None:
    """A node-config item without '=' is refused, naming the variable."""
    env.setenv("MOTS_EDGE_CLIENT_INDEX", "0")
    env.setenv("MOTS_EDGE_NODE_CONFIG", "partition-id")
    with pytest.raises(ValueError, match="MOTS_EDGE_NODE_CONFIG"):
        node_config(AgentSettings())


def test_supernode_health_check_speaks_grpc_health(tmp_path: Path) -> None:
    """SERVING → healthy; NOT_SERVING or nothing listening → unhealthy."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        servicer.set("", health_pb2.HealthCheckResponse.SERVING)
        assert supernode_serving(port)
        servicer.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
        assert not supernode_serving(port)
    finally:
        server.stop(grace=None)
    assert not supernode_serving(port, timeout_s=0.5)


def test_the_device_key_is_made_on_the_device_once(env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """node-key makes the key pair on first use (0600, under MOTS_EDGE_NODE_KEY), prints the
    public key, and prints the same key afterwards; exec refuses to start without the CA."""
    import stat

    from click.testing import CliRunner

    from edge.agent.__main__ import main
    from edge.agent.supernode import exec_supernode
    from mots.training.pki import load_node_key

    key = tmp_path / "agent" / "supernode.key"
    env.setenv("MOTS_EDGE_NODE_KEY", str(key))
    env.setenv("MOTS_EDGE_ROOT_CERTIFICATES", str(tmp_path / "missing-ca.crt"))
    first = CliRunner().invoke(main, ["node-key"])
    assert first.exit_code == 0, first.output
    assert first.output.startswith("-----BEGIN PUBLIC KEY-----")
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert load_node_key(key).public_pem.decode() == first.output
    assert CliRunner().invoke(main, ["node-key"]).output == first.output
    with pytest.raises(FileNotFoundError, match="MOTS_EDGE_ROOT_CERTIFICATES"):
        exec_supernode(AgentSettings())
