"""Local stand-ins for the third-party images the manifests name, where no registry can be pulled.

Each is built from tests/containers/stand_ins/NAME.Containerfile on the local base with Debian's
package of the same server, run as the official image's uid with the official entrypoint's
behaviour for the arguments and env our manifests pass (what differs is the version: Redis 7.0,
PostgreSQL 15, Prometheus 2.42 from Debian bookworm, against 7.4.2, 16.6 and 3.1.0). Grafana has
no Debian package, so no stand-in: the parts that would run it say so.
"""

from __future__ import annotations

import time
from pathlib import Path

from tests.containers import podman
from tests.containers.base import base_image, ensure_base

HERE = Path(__file__).with_name("stand_ins")
# The image a manifest names -> the stand-in's name (tests/containers/stand_ins/NAME.Containerfile).
STAND_INS = {
    "redis:7.4.2-alpine": "redis",
    "postgres:16.6-alpine": "postgres",
    "prom/prometheus:v3.1.0": "prometheus",
}
__all__ = ["NONE_FOR", "STAND_INS", "base_image", "ensure", "images", "ref"]
NONE_FOR = {"grafana/grafana:11.4.0": "Grafana has no Debian package; no image can be pulled"}


def ref(name: str) -> str:
    """The local tag of a stand-in."""
    return f"localhost/mots-stand-in/{name}:test"


def ensure(name: str, timeout: float = 1800) -> dict[str, object]:
    """Build the stand-in unless the store has it; its facts and build seconds (0 when kept)."""
    started = time.monotonic()
    if not podman.image_exists(ref(name)):
        base = ensure_base("amd64")
        podman.podman(
            "build", "--format", "docker", "--build-arg", f"BASE={base}",
            "-f", str(HERE / f"{name}.Containerfile"), "-t", ref(name), str(HERE),
            timeout=timeout,
        )  # fmt: skip
    return podman.image_facts(ref(name)) | {"build_s": round(time.monotonic() - started, 1)}


def images(only: set[str] | None = None) -> dict[str, str]:
    """Manifest image -> local stand-in tag, each built if missing (only those in ``only``)."""
    chosen = {i: n for i, n in STAND_INS.items() if only is None or n in only}
    for name in chosen.values():
        ensure(name)
    return {image: ref(name) for image, name in chosen.items()}
