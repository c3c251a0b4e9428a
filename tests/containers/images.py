"""`make images`: every image of docker/docker-bake.hcl built with podman from the repository's
own Dockerfiles, with the build args the bake file gives each target (read from it, so they
cannot drift), on the local base (tests/containers/base.py) for linux/amd64 or linux/arm64.

What differs from a `docker buildx bake` on a connected machine is passed in, never written into
the Dockerfiles: PYTHON_IMAGE (the local base), this machine's CA bundle as the build secret
`pip-ca`, and for amd64 this machine's CPU torch wheel in docker/wheelhouse/ (PyTorch's CPU index
is unreachable here) with TORCH_VERSION set to that wheel's version.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

from tests.containers import podman
from tests.containers.base import ensure_base
from tests.docker.images import IMAGES, ROOT, dockerfile_of, load_bake, resolved_target

WHEELHOUSE = ROOT / "docker" / "wheelhouse"
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
WHEEL_DIRS = (*os.environ.get("PIP_FIND_LINKS", "").split(), "/opt/wheels")
PREFIX = "localhost/mots"
TORCH_IMAGES = ("orchestration", "evaluation", "superlink", "edge")


def image_ref(name: str, arch: str = "amd64") -> str:
    """The local tag of an image: compose's `mots/NAME:dev` for amd64, `:dev-ARCH` otherwise."""
    return f"{PREFIX}/{name}:dev" + ("" if arch == "amd64" else f"-{arch}")


def bake_args(name: str) -> dict[str, str]:
    """The build args docker/docker-bake.hcl gives the image's target."""
    return dict(resolved_target(load_bake(), name).get("args", {}))


def local_torch_wheel() -> Path:
    """This machine's x86_64 CPU torch wheel (pip's find-links folders), for amd64 builds."""
    for folder in WHEEL_DIRS:
        found = sorted(Path(folder).glob("torch-*+cpu-cp311-cp311-*x86_64.whl"))
        if found:
            return found[-1]
    raise FileNotFoundError(f"no CPU torch wheel for cp311 x86_64 in {WHEEL_DIRS}")


def local_overrides(name: str, arch: str) -> dict[str, str]:
    """What this machine must pass beyond the bake args: the base, and for amd64 torch images the
    local CPU wheel's version (put in docker/wheelhouse) with PyPI as the 'CPU index'."""
    out = {"PYTHON_IMAGE": ensure_base(arch)}
    if arch == "amd64" and name in TORCH_IMAGES:
        wheel = local_torch_wheel()
        WHEELHOUSE.mkdir(exist_ok=True)
        target = WHEELHOUSE / wheel.name
        if not target.exists():
            shutil.copy2(wheel, target)
        match = re.match(r"torch-(\d+\.\d+\.\d+)\+cpu", wheel.name)
        assert match, wheel.name
        out |= {"TORCH_VERSION": match.group(1), "TORCH_CPU_INDEX": "https://pypi.org/simple"}
    return out


def build(name: str, arch: str = "amd64", *, timeout: float = 3600) -> dict[str, object]:
    """Build one image from its own Dockerfile; return its arch, size (MiB) and build seconds."""
    if name not in IMAGES:
        raise ValueError(f"unknown image {name!r}: one of {IMAGES}")
    args = bake_args(name) | local_overrides(name, arch)
    # docker format: OCI images drop SHELL and HEALTHCHECK, which the Dockerfiles use.
    cmd = ["build", "--format", "docker", "--platform", f"linux/{arch}", "--layers"]
    cmd += ["-f", str(dockerfile_of(name)), "-t", image_ref(name, arch)]
    for key, value in args.items():
        cmd += ["--build-arg", f"{key}={value}"]
    if CA_BUNDLE.exists():
        cmd += ["--secret", f"id=pip-ca,src={CA_BUNDLE}"]
    started = time.monotonic()
    podman.podman(*cmd, str(ROOT), timeout=timeout)
    facts = podman.image_facts(image_ref(name, arch))
    return facts | {"build_s": round(time.monotonic() - started, 1)}


def build_all(arm64: tuple[str, ...] = ("edge",)) -> dict[str, dict[str, object]]:
    """Every bake image for amd64, and `arm64`'s for arm64 (keys NAME and NAME-arm64)."""
    out = {name: build(name, "amd64") for name in IMAGES}
    for name in arm64:
        out[f"{name}-arm64"] = build(name, "arm64")
    return out
