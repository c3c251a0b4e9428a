"""Flower's home in the compose edge containers is writable by the image's uid 10001.

Found running docker/compose.yaml on podman: FLWR_HOME was a tmpfs of its own
(/var/lib/mots/flwr), which podman 4.3 mounts root-owned 0755 whatever mode it is given; the
ClientApp's FAB could not be installed there (PermissionError on /var/lib/mots/flwr/apps), every
train message failed and the round was settled by rule. Compose now puts FLWR_HOME on the /tmp
tmpfs (1777)."""

from __future__ import annotations

import yaml

from tests.containers import conftest, images, podman
from tests.containers.base import ROOT

COMPOSE = ROOT / "docker" / "compose.yaml"


def _edge_services() -> dict[str, dict[str, object]]:
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    return {n: s for n, s in services.items() if n.startswith(("supernode-", "agent-"))}


def test_every_edge_service_keeps_flowers_home_on_its_tmp() -> None:
    edges = _edge_services()
    assert edges
    for name, svc in edges.items():
        env = svc["environment"]
        assert isinstance(env, dict) and str(env["FLWR_HOME"]).startswith("/tmp/"), name
        assert svc["tmpfs"] == ["/tmp"], name  # no root-owned tmpfs where uid 10001 must write


OVERRIDES = sorted(ROOT.glob("tests/containers/compose.*.yaml"))


def test_the_checks_overrides_define_their_edge_devices_as_the_shipped_file_does() -> None:
    """The arm64 and fault overrides add edge pairs written out again (anchors cannot cross
    files): each keeps the shipped edge environment and Flower's home on /tmp. Found running the
    arm64 part: its copy still had the old FLWR_HOME tmpfs, and the arm64 node's every train
    message failed with PermissionError (reported dropped, unpaid)."""
    shipped = yaml.safe_load(COMPOSE.read_text())["x-edge-env"]
    assert len(OVERRIDES) >= 2
    for path in OVERRIDES:
        doc = yaml.safe_load(path.read_text())
        edges = {n: s for n, s in doc.get("services", {}).items()
                 if n.startswith(("supernode-", "agent-"))}  # fmt: skip
        if not edges:
            continue
        for key, value in shipped.items():
            if key != "MOTS_UTILITY":  # the shipped file's is an anchor of its own
                assert doc["x-edge-env"].get(key) == value, (path.name, key)
        for name, svc in edges.items():
            env = svc["environment"]
            assert str(env["FLWR_HOME"]).startswith("/tmp/"), (path.name, name)
            assert svc["tmpfs"] == ["/tmp"], (path.name, name)


def test_the_edge_image_can_write_flowers_home_as_compose_runs_it() -> None:
    conftest.require_runtime()
    ref = images.image_ref("edge")
    if not podman.image_exists(ref):
        conftest._missing(f"no edge image {ref} (make images)")
    svc = _edge_services()["supernode-1-0"]
    home = str(svc["environment"]["FLWR_HOME"])  # type: ignore[index]
    tmpfs = [a for t in svc["tmpfs"] for a in ("--tmpfs", t)]  # type: ignore[attr-defined]
    got = podman.podman(
        "run", "--rm", "--read-only", *tmpfs, *podman.ULIMITS, "--entrypoint", "sh", ref,
        "-c", f'id -u && mkdir -p "{home}/apps" && echo written', check=False, timeout=300,
    )  # fmt: skip
    assert got.returncode == 0, got.stdout + got.stderr
    assert got.stdout.split() == ["10001", "written"]
