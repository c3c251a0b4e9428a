"""`make images`: every image of docker/docker-bake.hcl built with podman from the repository's
own Dockerfiles, with the build args the bake file gives each target (read from it, so they
cannot drift), on the local base (tests/containers/base.py) for linux/amd64 or linux/arm64.

What differs from a `docker buildx bake` on a connected machine is passed in, never written into
the Dockerfiles: PYTHON_IMAGE (the local base), this machine's CA bundle as the build secret
`pip-ca`, and wheels in docker/wheelhouse/ (the Dockerfiles' optional find-links folder): for amd64
this machine's CPU torch wheel (PyTorch's CPU index is unreachable here) with TORCH_VERSION set to
that wheel's version; for arm64 every pin of docker/constraints.txt and the Dockerfile's default
torch as aarch64 wheels, downloaded natively on the host (`pip download --platform`), so that pip
under QEMU only resolves and unpacks (without them its pip step timed out under QEMU). pip takes a find-links
wheel over the index's same file, so the image holds the same packages either way.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
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
CONSTRAINTS = ROOT / "docker" / "constraints.txt"
# The aarch64 wheels' platform tags pip may take for CPython 3.11 on Debian bookworm (glibc 2.36).
AARCH64_TAGS = ("manylinux_2_28_aarch64", "manylinux_2_27_aarch64", "manylinux_2_26_aarch64",
                "manylinux_2_24_aarch64", "manylinux_2_17_aarch64", "manylinux2014_aarch64",
                "linux_aarch64")  # fmt: skip


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


def dockerfile_default(name: str, arg: str) -> str:
    """The default of `ARG arg=...` in the image's Dockerfile (what a real build gets)."""
    match = re.search(rf"^ARG {arg}=(\S+)$", dockerfile_of(name).read_text(), re.MULTILINE)
    if match is None:
        raise ValueError(f"{dockerfile_of(name)} has no default for ARG {arg}")
    return match.group(1)


def aarch64_wheelhouse(name: str) -> list[str]:
    """Download (natively, on the host) every pin of docker/constraints.txt and the Dockerfile's
    default torch as CPython 3.11 aarch64 wheels into docker/wheelhouse; return their names.
    `--no-deps`: the pins are the closure already, and pip would otherwise follow torch's CUDA
    requirements, which are marked x86_64-only but read with this host's markers."""
    pins = [line.split("#")[0].strip() for line in CONSTRAINTS.read_text().splitlines()]
    pins = [p for p in pins if p] + [f"torch=={dockerfile_default(name, 'TORCH_VERSION')}"]
    WHEELHOUSE.mkdir(exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:",
           "--python-version", "3.11", "--implementation", "cp", "--dest", str(WHEELHOUSE)]  # fmt: skip
    for tag in AARCH64_TAGS:
        cmd += ["--platform", tag]
    # --isolated: this host's pip configuration (its x86_64 find-links and local indexes) is not
    # for aarch64; its CA bundle is passed on, as the builds' `pip-ca` secret.
    cmd += ["--isolated", *(["--cert", str(CA_BUNDLE)] if CA_BUNDLE.exists() else [])]
    subprocess.run([*cmd, *pins], check=True, timeout=1800)
    return sorted(p.name for p in WHEELHOUSE.glob("*aarch64*.whl"))


def local_overrides(name: str, arch: str) -> dict[str, str]:
    """What this machine must pass beyond the bake args: the base; for amd64 torch images the
    local CPU wheel's version (put in docker/wheelhouse) with PyPI as the 'CPU index'; for arm64
    the aarch64 wheelhouse (no arg: the Dockerfile's defaults stand)."""
    out = {"PYTHON_IMAGE": ensure_base(arch)}
    if arch == "arm64":
        aarch64_wheelhouse(name)
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
