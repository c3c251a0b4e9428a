"""The base images run Python 3.11 with `python` on PATH, like python:3.11-slim-bookworm."""

from __future__ import annotations

import pytest

from tests.containers import podman
from tests.containers.base import ensure_base

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("arch", ["amd64"])
def test_base_runs_python_311(runtime: None, arch: str) -> None:
    ref = ensure_base(arch)
    out = podman.podman(
        "run",
        "--rm",
        *podman.ULIMITS,
        "--arch",
        arch,
        ref,
        "python",
        "-c",
        "import platform, ssl, venv; print(platform.machine(), platform.python_version())",
    ).stdout.split()
    assert out[0] == {"amd64": "x86_64", "arm64": "aarch64"}[arch]
    assert out[1].startswith("3.11.")
    assert podman.image_facts(ref)["arch"] == arch


def test_leftovers_counts_what_a_run_leaves(runtime: None) -> None:
    ref = ensure_base("amd64")
    name = "mots-leftover-probe"
    podman.podman("create", "--name", name, ref, "true")
    try:
        assert podman.leftovers(["mots-leftover-"])["containers"] == [name]
    finally:
        rest = podman.remove(["mots-leftover-"])
    assert all(not v for v in rest.values())
