"""Flower's home in the compose SuperLink stays writable by uid 10001 across a container restart.

Found by the fault rounds (tests/containers/faults.py): after the SuperLink container's restart the
federation did not recover: the next round's Flower run failed at once (its ServerApp task
"Started" and "Finished" together, no result.json) while the SuperNodes had reconnected. Cause:
FLWR_HOME was a tmpfs of its own (/var/lib/mots/flwr); podman 4.3 mounts such a tmpfs 1777 when
it creates the container but root-owned 0755 when it starts it again (``podman restart``, or the
``unless-stopped`` policy after a crash), so the ServerApp could no longer install the run's FAB
there. /tmp keeps 1777 across restarts: compose now puts the SuperLink's FLWR_HOME under it, as
it does the edge's (tests/containers/test_edge_flwr_home.py). The round after a restart being
published is checked by the network part (faults.after_superlink_restart)."""

from __future__ import annotations

import os
import uuid

import yaml

from tests.containers import conftest, images, podman
from tests.containers.base import ROOT

COMPOSE = ROOT / "docker" / "compose.yaml"


def _superlink() -> dict[str, object]:
    service: dict[str, object] = yaml.safe_load(COMPOSE.read_text())["services"]["superlink"]
    return service


def test_the_superlinks_flower_home_is_on_its_tmp() -> None:
    svc = _superlink()
    env = svc["environment"]
    assert isinstance(env, dict) and str(env["FLWR_HOME"]).startswith("/tmp/")
    assert svc["tmpfs"] == ["/tmp"]  # no tmpfs of its own: root-owned 0755 after a restart


def test_flowers_home_is_writable_after_a_restart(runtime: None) -> None:
    """The SuperLink image run as compose runs it (read-only root, its tmpfs and environment):
    uid 10001 writes FLWR_HOME/apps after the start and again after ``podman restart``."""
    ref = images.image_ref("superlink")
    if not podman.image_exists(ref):
        conftest._missing(f"no superlink image {ref} (make images)")
    svc = _superlink()
    env = svc.get("environment") or {}
    home = str(env.get("FLWR_HOME", "/var/lib/mots/flwr")) if isinstance(env, dict) else ""
    tmpfs = [a for t in svc["tmpfs"] for a in ("--tmpfs", t)]  # type: ignore[attr-defined]
    name = f"mots-ct-flwr-home-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    write = ["sh", "-c", f'mkdir -p "{home}/apps" && touch "{home}/apps/x" && id -u']
    podman.podman("run", "-d", "--name", name, "--read-only", *tmpfs, *podman.ULIMITS,
                  "-e", f"FLWR_HOME={home}", "--entrypoint", "sleep", ref, "600")  # fmt: skip
    try:
        first = podman.podman("exec", name, *write, check=False)
        assert first.returncode == 0 and first.stdout.split() == ["10001"], first.stderr
        podman.podman("restart", "--time", "1", name, timeout=120)
        again = podman.podman("exec", name, *write, check=False)
        assert again.returncode == 0, f"FLWR_HOME={home} after a restart: {again.stderr[-500:]}"
    finally:
        podman.podman("rm", "--force", "--time", "1", name, check=False)
