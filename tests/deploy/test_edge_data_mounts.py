"""Each edge device trains on its own data, mounted read-only from its host (issue 36): the compose
devices and the k3s edge pod run both edge containers with ``--data TASK=/data/TASK`` for every
task the devices hold, each folder a read-only mount of the device host's own folder, and no
container mounts the public Fashion-MNIST set (the ``client-index`` slice layout is gone).

Read from the shipped files (docker/compose.yaml, the rendered k3s-pi overlay): no container runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.kustomize import render

ROOT = Path(__file__).resolve().parents[2]
TASKS = ("fashion-mnist", "digits")
DATA_ARGS = [a for t in TASKS for a in ("--data", f"{t}=/data/{t}")]
"""What each edge container's command ends with: one ``--data`` per task the devices hold."""


def _edge_services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n: s for n, s in compose["services"].items() if n.startswith(("supernode-", "agent-"))}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "docker/compose.yaml").read_text())


def test_every_compose_device_mounts_its_own_folders_read_only(
    compose: dict[str, Any], minimum: int = 8
) -> None:
    """Both containers of a device: ``--data`` per task, each /data/TASK the device's host folder
    ``${MOTS_EDGE_DATA_ROOT:-/srv/mots}/<device>/<task>`` read-only, the pair mounting the same."""
    edge = _edge_services(compose)
    assert len(edge) >= minimum
    for name, svc in edge.items():
        command = svc["command"]
        assert command[0] == ("supernode" if name.startswith("supernode-") else "run"), name
        assert command[1:] == DATA_ARGS, name
        device = svc["environment"]["MOTS_EDGE_CLIENT_NAME"]
        mounts = [v for v in svc["volumes"] if isinstance(v, str) and ":/data/" in v]
        assert mounts == [
            f"${{MOTS_EDGE_DATA_ROOT:-/srv/mots}}/{device}/{t}:/data/{t}:ro" for t in TASKS
        ], name


@pytest.mark.parametrize("name", ["compose.faults.yaml", "compose.arm64.yaml"])
def test_the_container_checks_extra_devices_mount_their_own_folders(name: str) -> None:
    """The devices `make deploy-test`'s overrides add are laid out as the shipped ones, and the
    compose check prepares a folder for each (tests/containers/compose.py)."""
    from tests.containers.compose import OVERRIDE_DEVICES

    override = yaml.safe_load((ROOT / "tests/containers" / name).read_text())
    test_every_compose_device_mounts_its_own_folders_read_only(override, minimum=2)
    test_no_compose_container_mounts_the_public_set(override)
    for svc in _edge_services(override).values():
        assert svc["environment"]["MOTS_EDGE_CLIENT_NAME"] in OVERRIDE_DEVICES


def test_no_compose_container_mounts_the_public_set(compose: dict[str, Any]) -> None:
    """The public Fashion-MNIST set reaches no edge container (no /var/lib/mots/data mount, no
    MOTS_EDGE_DATA variable): a device trains on what its host holds for it alone."""
    for name, svc in _edge_services(compose).items():
        for v in svc.get("volumes", []):
            source, target = (
                str(v).split(":")[:2] if isinstance(v, str) else (v["source"], v["target"])
            )
            assert target != "/var/lib/mots/data" and "datasets" not in source, name
            assert "MOTS_EDGE_DATA:" not in source, name


def test_the_edge_image_copies_no_data_set() -> None:
    """The edge image holds the code and the venv only: no COPY or ADD of a data set."""
    dockerfile = (ROOT / "docker/edge/Dockerfile").read_text()
    steps = [ln for ln in dockerfile.splitlines() if ln.startswith(("COPY", "ADD"))]
    for step in steps:
        assert "dataset" not in step and "fashion" not in step and ".npz" not in step, step


def test_the_k3s_edge_pod_mounts_each_task_folder_of_its_pi() -> None:
    """The DaemonSet: a hostPath per task (/srv/mots/<task> on the Pi, made empty if the Pi holds
    nothing for it: the device then refuses that task's rounds, saying why), mounted read-only at
    /data/<task> in both edge containers, whose args end with ``--data`` per task; the Pi's
    /var/lib/mots/data (the public set and its client-index) is no longer mounted."""
    overlay = render(ROOT / "k8s/overlays/k3s-pi")
    (daemonset,) = [r for r in overlay if r["kind"] == "DaemonSet"]
    spec = daemonset["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    for t in TASKS:
        assert volumes[f"data-{t}"]["hostPath"] == {
            "path": f"/srv/mots/{t}",
            "type": "DirectoryOrCreate",
        }
    assert "data" not in volumes
    for c in spec["containers"]:
        if c["name"] == "node-exporter":
            continue
        assert c["args"][-len(DATA_ARGS) :] == DATA_ARGS, c["name"]
        mounts = [m for m in c["volumeMounts"] if m["name"].startswith("data")]
        assert mounts == [
            {"name": f"data-{t}", "mountPath": f"/data/{t}", "readOnly": True} for t in TASKS
        ], c["name"]
