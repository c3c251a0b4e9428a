"""Podman as the container checks call it: one place for this host's settings and the queries
the harness needs (image facts, what a run left behind, cleanup).

Every call runs with CONTAINERS_CONF=tests/containers/containers.conf (runc, cgroupfs, ulimits at
the host's), so podman-compose's own podman calls get the same settings; the runtime flags are
passed explicitly as well so a copied command line works without the environment.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

CONF = Path(__file__).with_name("containers.conf")
FLAGS = ("--runtime", "runc", "--cgroup-manager", "cgroupfs")
ULIMITS = ("--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024")
# The kinds of object a run can leave behind, as `podman <kind> ls` names them.
KINDS = ("containers", "pods", "volumes", "networks")


class PodmanError(RuntimeError):
    """A podman command failed; the message carries its command line and its output's tail."""


def env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for podman and podman-compose: this host's containers.conf named."""
    out = dict(os.environ, CONTAINERS_CONF=str(CONF))
    out.update(extra or {})
    return out


def missing() -> str | None:
    """Why containers cannot run here (a missing tool), or None when podman and runc are present."""
    for tool in ("podman", "runc"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (bash scripts/ensure_containers.sh installs it)"
    return None


def podman(
    *args: str,
    check: bool = True,
    timeout: float | None = 600,
    input_text: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run `podman --runtime runc --cgroup-manager cgroupfs ARGS`; raise PodmanError on failure."""
    cmd = ["podman", *FLAGS, *args]
    proc = subprocess.run(
        cmd, env=env(), capture_output=True, text=True, timeout=timeout, input=input_text
    )
    if check and proc.returncode != 0:
        raise PodmanError(
            f"{' '.join(cmd)} exited {proc.returncode}: {proc.stdout[-1500:]}{proc.stderr[-2000:]}"
        )
    return proc


def run_args(*args: str) -> list[str]:
    """The argument list of `podman run` with this host's ulimits (for callers that Popen it)."""
    return ["podman", *FLAGS, "run", *ULIMITS, *args]


def image_exists(ref: str) -> bool:
    """Whether the local store holds the image `ref`."""
    return podman("image", "exists", ref, check=False).returncode == 0


def image_facts(ref: str) -> dict[str, object]:
    """The image's architecture and size in MiB (as `podman image inspect` reports them)."""
    info = json.loads(podman("image", "inspect", ref).stdout)[0]
    return {"arch": info["Architecture"], "size_mib": round(info["Size"] / 2**20, 1)}


def _names(kind: str) -> list[str]:
    """Names of every object of a kind (containers, pods, volumes, networks) in the store."""
    fmt = {"containers": "{{.Names}}", "pods": "{{.Name}}", "volumes": "{{.Name}}"}
    args = {"containers": ("ps", "-a"), "pods": ("pod", "ps"), "volumes": ("volume", "ls")}
    if kind == "networks":
        out = podman("network", "ls", "--format", "{{.Name}}").stdout
    else:
        out = podman(*args[kind], "--format", fmt[kind]).stdout
    return [n for n in out.split() if n]


def leftovers(prefixes: Sequence[str]) -> dict[str, list[str]]:
    """Objects whose names start with any of `prefixes`, per kind: what a run left behind."""
    return {k: [n for n in _names(k) if n.startswith(tuple(prefixes))] for k in KINDS}


def remove(prefixes: Sequence[str]) -> dict[str, list[str]]:
    """Remove every container, pod, volume and network named with `prefixes`; return the rest."""
    found = leftovers(prefixes)
    if found["pods"]:
        podman("pod", "rm", "--force", "--time", "2", *found["pods"], check=False)
    for _ in range(5):  # a container others require is refused while they exist: pass again
        containers = leftovers(prefixes)["containers"]
        if not containers:
            break
        podman("rm", "--force", "--volumes", "--time", "2", *containers, check=False)
    found = leftovers(prefixes)
    if found["volumes"]:
        podman("volume", "rm", "--force", *found["volumes"], check=False)
    if found["networks"]:
        podman("network", "rm", "--force", *found["networks"], check=False)
    return leftovers(prefixes)
