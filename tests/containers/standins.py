"""Local stand-ins for the third-party images compose names (no registry is reachable here):
Debian bookworm's packages on the local base, tagged with compose's names so compose runs as
written. Each Containerfile under standins/ says which contract of the official image it keeps."""

from __future__ import annotations

import time
from pathlib import Path

from tests.containers import podman
from tests.containers.base import ensure_base

HERE = Path(__file__).with_name("standins")
# Folder under standins/ -> the image name compose uses (fully qualified, as podman resolves it).
IMAGES = {
    "redis": "docker.io/library/redis:7.4.2-alpine",
    "postgres": "docker.io/library/postgres:16.6-alpine",
    "prometheus": "docker.io/prom/prometheus:v3.1.0",
}
# What each stand-in runs instead of the official image's version.
VERSIONS = {"redis": "Debian redis-server 7.0", "postgres": "Debian PostgreSQL 15",
            "prometheus": "Debian Prometheus 2.42"}  # fmt: skip


def build_standins(arch: str = "amd64") -> dict[str, dict[str, object]]:
    """Build every stand-in (cached layers make an unchanged one instant); return each one's facts
    and build seconds."""
    out: dict[str, dict[str, object]] = {}
    for folder, ref in IMAGES.items():
        started = time.monotonic()
        podman.podman(
            "build", "--format", "docker", "--layers", "--platform", f"linux/{arch}",
            "--build-arg", f"BASE={ensure_base(arch)}", "-t", ref, str(HERE / folder),
        )  # fmt: skip
        facts = podman.image_facts(ref) | {"stands_in_with": VERSIONS[folder]}
        out[ref] = facts | {"build_s": round(time.monotonic() - started, 1)}
    return out
