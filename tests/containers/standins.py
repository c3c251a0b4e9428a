"""Local stand-ins for the third-party images that docker/compose.yaml and the k8s manifests name,
where no registry can be pulled (tests only): Debian bookworm's package of the same server on the
local base, one Containerfile per image under tests/containers/standins/NAME/, each saying which
contract of the official image it keeps (the official uid, entrypoint behaviour for the arguments
and env our files pass, data paths). What differs is the version: Redis 7.0, PostgreSQL 15 and
Prometheus 2.42, Alertmanager 0.25, node-exporter 1.5 and nginx 1.22 (the TLS front) from Debian
against 7.4.2, 16.6, 3.1.0, 0.28.0, 1.8.2 and 1.27.3.

Each is tagged twice: with the name compose uses (fully qualified, as podman resolves it), so that
compose runs as written, and as ``localhost/mots-stand-in/NAME:test``, which kube play's
translation substitutes for the manifests' image. Grafana has no Debian package, so no stand-in:
the parts that would run it say so (NONE_FOR).
"""

from __future__ import annotations

import time
from pathlib import Path

from tests.containers import podman
from tests.containers.base import base_image, ensure_base

HERE = Path(__file__).with_name("standins")
# The image the manifests and compose name -> the stand-in (its folder under standins/).
STAND_INS = {
    "redis:7.4.2-alpine": "redis",
    "postgres:16.6-alpine": "postgres",
    "prom/prometheus:v3.1.0": "prometheus",
    "prom/alertmanager:v0.28.0": "alertmanager",
    "prom/node-exporter:v1.8.2": "node-exporter",
    "nginx:1.27.3-alpine": "nginx",
}
# The name podman resolves compose's short names to (docker.io's library/ for official images).
QUALIFIED = {
    "redis": "docker.io/library/redis:7.4.2-alpine",
    "postgres": "docker.io/library/postgres:16.6-alpine",
    "prometheus": "docker.io/prom/prometheus:v3.1.0",
    "alertmanager": "docker.io/prom/alertmanager:v0.28.0",
    "node-exporter": "docker.io/prom/node-exporter:v1.8.2",
    "nginx": "docker.io/library/nginx:1.27.3-alpine",
}
# What each stand-in runs instead of the official image's version.
VERSIONS = {"redis": "Debian redis-server 7.0", "postgres": "Debian PostgreSQL 15",
            "prometheus": "Debian Prometheus 2.42", "alertmanager": "Debian Alertmanager 0.25",
            "node-exporter": "Debian node-exporter 1.5", "nginx": "Debian nginx 1.22"}  # fmt: skip
NONE_FOR = {"grafana/grafana:11.4.0": "Grafana has no Debian package; no image can be pulled"}
__all__ = ["NONE_FOR", "STAND_INS", "base_image", "build", "build_standins", "images", "ref"]


def ref(name: str) -> str:
    """The local tag of a stand-in (what kube play's translation runs)."""
    return f"localhost/mots-stand-in/{name}:test"


def build(name: str, arch: str = "amd64", timeout: float = 1800) -> dict[str, object]:
    """Build one stand-in with cached layers (an unchanged one takes seconds, an edited
    Containerfile or entrypoint is rebuilt) and tag it with both names; its facts and seconds."""
    started = time.monotonic()
    podman.podman(
        "build", "--format", "docker", "--layers", "--platform", f"linux/{arch}",
        "--build-arg", f"BASE={ensure_base(arch)}", "-t", ref(name), "-t", QUALIFIED[name],
        str(HERE / name), timeout=timeout,
    )  # fmt: skip
    facts = podman.image_facts(ref(name)) | {"stands_in_with": VERSIONS[name]}
    return facts | {"build_s": round(time.monotonic() - started, 1)}


def build_standins(arch: str = "amd64") -> dict[str, dict[str, object]]:
    """Every stand-in (compose's third-party images); each one's facts by compose's name."""
    return {QUALIFIED[name]: build(name, arch) for name in STAND_INS.values()}


def images(only: set[str] | None = None) -> dict[str, str]:
    """Manifest image -> local stand-in tag, each built (only those in ``only``, default all)."""
    chosen = {i: n for i, n in STAND_INS.items() if only is None or n in only}
    for name in chosen.values():
        build(name)
    return {image: ref(name) for image, name in chosen.items()}
