"""The stand-ins run as the manifests run the official images: Redis as uid 999 with the
manifests' args answers PING; PostgreSQL as uid 70 with the manifests' env creates the three
databases of docker/postgres/init-databases.sql and takes a password login; both read-only."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.containers import podman, stand_ins
from tests.containers.conftest import require_runtime

ROOT = Path(__file__).resolve().parents[2]
PREFIX = f"mots-standin-{os.getpid()}"


def _run(name: str, *args: str) -> None:
    cmd = podman.run_args("-d", "--name", f"{PREFIX}-{name}", "--read-only", *args)
    subprocess.run(cmd, env=podman.env(), check=True, capture_output=True, timeout=120)


def _until(container: str, *cmd: str, timeout_s: float = 60) -> str:
    deadline = time.monotonic() + timeout_s
    while True:
        proc = podman.podman("exec", container, *cmd, check=False)
        if proc.returncode == 0 or time.monotonic() > deadline:
            return proc.stdout + proc.stderr
        time.sleep(1)


def test_redis_and_postgres_stand_ins_run_as_the_manifests_say() -> None:
    require_runtime()
    if not podman.image_exists(stand_ins.base_image("amd64")):
        pytest.skip("no local base image (scripts/ensure_containers.sh)")
    images = stand_ins.images()
    init = ROOT / "docker/postgres/init-databases.sql"
    try:
        _run("redis", "--user", "999:999", "-v", f"{PREFIX}-redis-data:/data",
             images["redis:7.4.2-alpine"], "--save", "", "--appendonly", "yes")  # fmt: skip
        _run("postgres", "--user", "70:70", "-v", f"{PREFIX}-pg-data:/var/lib/postgresql/data",
             "-v", f"{PREFIX}-pg-run:/var/run/postgresql", "-v", f"{PREFIX}-pg-tmp:/tmp",
             "-v", f"{init}:/docker-entrypoint-initdb.d/init.sql:ro",
             "-e", "POSTGRES_USER=mots", "-e", "POSTGRES_DB=market",
             "-e", "POSTGRES_PASSWORD=pw-1", images["postgres:16.6-alpine"])  # fmt: skip
        assert "PONG" in _until(f"{PREFIX}-redis", "redis-cli", "ping")
        assert "accepting" in _until(
            f"{PREFIX}-postgres", "pg_isready", "-U", "mots", "-d", "market"
        )
        sql = "select string_agg(datname, ',' order by datname) from pg_database"
        out = _until(f"{PREFIX}-postgres", "env", "PGPASSWORD=pw-1", "psql", "-h", "127.0.0.1",
                     "-U", "mots", "-d", "market", "-tAc", sql)  # fmt: skip
        assert {"market", "orchestration", "evaluation"} <= set(out.strip().split(",")), out
    finally:
        podman.remove([PREFIX])
