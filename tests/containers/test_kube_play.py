"""The overlay's data tier played as shipped: PostgreSQL (the StatefulSet's template as a Pod:
uid 70, read-only root, the init ConfigMap, its password from the README's `kubectl create
secret` command) and Redis (uid 999, its claim) pass every probe the manifests declare, and
nothing is left behind. This also checks the stand-ins (tests/containers/standins.py) run as
the official images' uids. The full round on the overlay (tests/containers/kube_play.run) needs
every image and runs in `make deploy-test`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

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


def _paid(reward: str, booked: list[str], wallet: str, status: str = "verified") -> dict[str, Any]:
    return {"verification": status, "reward": reward, "booked": booked, "wallet": wallet}


def test_the_two_task_verdict_names_each_failure() -> None:
    """kube_play.problems (make deploy-test's verdict on the kube play rounds): both tasks
    published, downloads verified, K participants each paid its type's reward once, the ledger
    balanced pass; a missing digits round, a participant paid twice, an unverified download and
    an unbalanced ledger are each named."""
    good = {
        "round_state": "published",
        "buyer_download_verified": True,
        "k": 2,
        "participants": {
            "pi-11": _paid("0.360000", ["0.360000"], "0.360000"),
            "pi-01": _paid("0", [], "0"),  # a zero reward books no transaction
        },
    }
    report: dict[str, Any] = {"ledger_balanced": True, "tasks": {t: good for t in kube_play.TASKS}}
    assert kube_play.problems(report) == []
    twice = dict(good, participants={"pi-16": _paid("2.4", ["2.4", "2.4"], "4.8")}, k=1)
    bad = {"ledger_balanced": False, "tasks": {
        "fashion-mnist": dict(good, buyer_download_verified=False), "digits": twice}}  # fmt: skip
    got = kube_play.problems(bad)
    assert got[0] == "the ledger is not balanced"
    assert any(p.startswith("fashion-mnist: published, download verified False") for p in got)
    assert any(p.startswith("digits: pi-16 verified, booked ['2.4', '2.4']") for p in got), got
    missing = kube_play.problems({"ledger_balanced": True, "tasks": {"fashion-mnist": good}})
    assert missing == ["digits: no round"]
