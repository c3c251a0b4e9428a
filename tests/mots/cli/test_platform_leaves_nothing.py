"""What `mots platform up` writes and leaves (issue 37, point 7): its SQLite files (with their
``-wal`` and ``-shm``) and logs are mode 600, and `mots platform down` removes every Redis key
under the prefix that start took (a later start takes another, so they would stay forever)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import redis

from benchmarks.integrity.money import stack_env

pytestmark = pytest.mark.integration

MOTS = str(Path(sys.executable).parent / "mots")


def _prefix(workdir: Path) -> str:
    """The Redis key prefix the running platform's services were given."""
    pids = json.loads((workdir / "pids.json").read_text())["pids"]
    environ = Path(f"/proc/{pids[0]}/environ").read_bytes().split(b"\0")
    (prefix,) = [e.split(b"=", 1)[1] for e in environ if e.startswith(b"MOTS_REDIS_KEY_PREFIX=")]
    return prefix.decode()


def _keys(prefix: str) -> int:
    with redis.Redis.from_url("redis://127.0.0.1:6379/0") as r:
        return sum(1 for _ in r.scan_iter(match=f"{prefix}*", count=1000))


def test_platform_files_are_private_and_down_leaves_no_redis_keys(tmp_path: Path) -> None:
    """Up (its own workdir, free ports), a failed code guess (a rate-limit key) and a
    registration; every *.db* file and log under the workdir is mode 600; down: no key left."""
    workdir = tmp_path / "platform"
    env = {k: v for k, v in {**os.environ, **stack_env()}.items() if k != "MOTS_OPERATOR_TOKEN"}
    log = (tmp_path / "up.log").open("wb")
    up = subprocess.Popen(
        [MOTS, "platform", "up", "--workdir", str(workdir), "--free-ports", "--no-prometheus"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 240
        while not (workdir / "endpoints.json").exists():
            assert up.poll() is None and time.monotonic() < deadline, (
                tmp_path / "up.log"
            ).read_text()
            time.sleep(0.5)
        endpoints = json.loads((workdir / "endpoints.json").read_text())
        operator = {"Authorization": f"Bearer {endpoints['operator_token']}"}
        with httpx.Client(base_url=endpoints["market"], timeout=30) as market:
            guess = market.post("/v1/clients", json={"name": "x", "enrolment_code": "nope-nope"})
            assert guess.status_code == 401
            body = {"name": "c", "type_name": "t", "data_size": 50, "cost": "1"}
            market.post("/v1/clients", json=body, headers=operator).raise_for_status()
        prefix = _prefix(workdir)
        assert _keys(prefix) > 0
        written = [*workdir.glob("*.db*"), *(workdir / "logs").glob("*.log")]
        assert any(p.name == "market.db" for p in written) and len(written) >= 6
        modes = {p.name: oct(p.stat().st_mode & 0o777) for p in written}
        assert set(modes.values()) == {"0o600"}, modes
        down = subprocess.run(
            [MOTS, "platform", "down", "--workdir", str(workdir)], capture_output=True, timeout=120
        )
        assert down.returncode == 0, down.stderr
        assert up.wait(timeout=90) == 0, (tmp_path / "up.log").read_text()
        assert _keys(prefix) == 0
    finally:
        if up.poll() is None:
            os.killpg(up.pid, signal.SIGTERM)
            up.wait(timeout=60)
        log.close()
