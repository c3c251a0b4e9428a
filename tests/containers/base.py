"""The local base images (docker/base/build-base.sh): Debian bookworm + Python 3.11 imported with
podman, the stand-in for python:3.11.14-slim-bookworm that the Dockerfiles take as PYTHON_IMAGE."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.containers import podman

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "docker" / "base" / "build-base.sh"
REPO = "localhost/mots/python"


def base_image(arch: str) -> str:
    """The base image's reference for an architecture (amd64, arm64)."""
    return f"{REPO}:3.11-bookworm-{arch}"


def ensure_base(arch: str, *, force: bool = False, timeout: float = 1800) -> str:
    """Build the base for `arch` unless the store has it (arm64: registers QEMU's binfmt first)."""
    ref = base_image(arch)
    if force or not podman.image_exists(ref):
        args = ["bash", str(SCRIPT), "--arch", arch, *(["--force"] if force else [])]
        subprocess.run(args, check=True, env=podman.env(), timeout=timeout)
    return ref
