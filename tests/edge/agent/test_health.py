"""The edge containers' health checks (`python -m edge.agent.health agent|supernode`, what compose,
the edge image's HEALTHCHECK and the k3s DaemonSet run): light enough for a busy Pi, reading the
same settings with the same defaults as the agent.

Found running docker/compose.yaml on podman: `python -m edge.agent health agent` imported the
whole agent (3.7 s in the edge container on the loaded host) and timed out against compose's 5 s,
so agents that polled every 5 s were reported unhealthy and the round never started."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from edge.agent import health
from mots.platform.settings.edge import EdgeDevice

ROOT = Path(__file__).resolve().parents[3]
HEAVY = ("pydantic", "pydantic_settings", "httpx", "numpy", "click", "mots", "torch", "flwr")


def _run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join([str(ROOT / "shared"), str(ROOT)])
    return subprocess.run(
        [sys.executable, *args], env=dict(os.environ, PYTHONPATH=path, **env),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_the_defaults_are_the_registrys() -> None:
    fields = EdgeDevice.model_fields
    assert fields["state_dir"].default == health.STATE_DIR
    assert fields["poll_interval_s"].default == health.POLL_INTERVAL_S
    assert fields["health_port"].default == health.HEALTH_PORT


def test_the_check_loads_none_of_the_agents_imports() -> None:
    probe = (
        f"import sys, edge.agent.health\nprint(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    got = _run("-c", probe)
    assert got.returncode == 0, got.stderr
    assert got.stdout.strip() == ""


def test_agent_check_follows_the_heartbeat(tmp_path: Path) -> None:
    state = str(tmp_path)
    assert _run("-m", "edge.agent.health", "agent", MOTS_EDGE_STATE_DIR=state).returncode == 1
    (tmp_path / "heartbeat").write_text(f"{time.time():.3f}\n")
    fresh = _run("-m", "edge.agent.health", "agent", MOTS_EDGE_STATE_DIR=state)
    assert fresh.returncode == 0, fresh.stderr
    (tmp_path / "heartbeat").write_text(f"{time.time() - 31:.3f}\n")  # 3 × 5 s, at least 30 s
    stale = _run("-m", "edge.agent.health", "agent", MOTS_EDGE_STATE_DIR=state)
    assert stale.returncode == 1 and "agent: unhealthy" in stale.stderr
    slow = _run("-m", "edge.agent.health", "agent", MOTS_EDGE_STATE_DIR=state,
                MOTS_EDGE_POLL_INTERVAL_S="20")  # fmt: skip
    assert slow.returncode == 0
    assert _run("-m", "edge.agent.health", "bogus").returncode == 2


def test_supernode_check_asks_the_configured_port() -> None:
    with pytest.raises(ValueError, match="unknown check"):
        health.check("bogus", {})
    # nothing serves on this port: unhealthy, promptly
    started = time.monotonic()
    assert not health.check("supernode", {"MOTS_EDGE_HEALTH_PORT": "9"})
    assert time.monotonic() - started < 10


def test_every_shipped_check_is_the_light_one() -> None:
    compose = yaml.safe_load((ROOT / "docker/compose.yaml").read_text())
    agents = [s for n, s in compose["services"].items() if n.startswith("agent-")]
    assert agents and all(
        s["healthcheck"]["test"] == ["CMD", "python", "-m", "edge.agent.health", "agent"]
        for s in agents
    )
    dockerfile = (ROOT / "docker/edge/Dockerfile").read_text()
    assert 'CMD ["python", "-m", "edge.agent.health", "supernode"]' in dockerfile
    ds = (ROOT / "k8s/overlays/k3s-pi/edge/supernode/daemonset.yaml").read_text()
    assert "[python, -m, edge.agent.health, agent]" in ds and "edge.agent, health" not in ds
