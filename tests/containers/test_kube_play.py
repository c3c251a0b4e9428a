"""The overlay's data tier played as shipped: PostgreSQL (the StatefulSet's template as a Pod:
uid 70, read-only root, the init ConfigMap, its password from the README's `kubectl create
secret` command) and Redis (uid 999, its claim) pass every probe the manifests declare, and
nothing is left behind. This also checks the stand-ins (tests/containers/standins.py) run as
the official images' uids. The full round on the overlay (tests/containers/kube_play.run) needs
every image and runs in `make deploy-test`."""

from __future__ import annotations

import os
from pathlib import Path

from tests.containers import kube_play, podman, standins
from tests.containers.conftest import require_base, require_runtime


def test_postgres_and_redis_pods_run_as_written(tmp_path: Path) -> None:
    require_runtime()
    require_base(standins.base_image("amd64"))
    before = podman.leftovers([kube_play.PREFIX, kube_play.NETWORK])
    probes = kube_play.play_tier(tmp_path / f"kp-{os.getpid()}", {"postgres", "redis"})
    p = kube_play.PREFIX
    assert probes == {
        f"{p}postgres-0/postgres/readinessProbe": "ok",
        f"{p}postgres-0/postgres/livenessProbe": "ok",
        f"{p}redis-pod-0/redis/readinessProbe": "ok",
        f"{p}redis-pod-0/redis/livenessProbe": "ok",
    }
    assert podman.leftovers([kube_play.PREFIX, kube_play.NETWORK]) == before
