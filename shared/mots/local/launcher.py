"""Starting and stopping the platform's processes on one machine (demo, tests, benchmarks).

Each service runs as its own process group (a uvicorn API and/or a Celery worker with
``--pool=solo``); :meth:`Stack.stop` terminates every group and waits, so nothing is left behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, cast

from mots.local.keys import process_secrets
from mots.training.processes import listening, port_free

SERVICES_WITH_API = ("market", "pricing", "orchestration")
PROMETHEUS_BINARY = "/usr/bin/prometheus"
WORKERS = ("market", "pricing", "orchestration", "evaluation", "training")
"""The services to start (an API, a Celery worker or both; the training worker by its name)."""
API_ONLY = ("pricing",)
"""Services without a worker: pricing answers what-if quotes on its API; a round prices in
process (:mod:`mots.platform.quotes`, issue 38)."""
TRAINING_POOL = ("--pool=threads", "--concurrency=3")
"""The training worker trains three rounds at once, one per shipped task (issue 36: each a Flower
run of its own task's federation, :class:`services.orchestration.trainer.Trainer`; with two
slots a third task's round waited for one, 2.3× its round alone in ``make bench-tasks``); every
other worker answers one task at a time."""
WORKER_OF = {"training": ("orchestration", "services.orchestration.training_worker")}
"""A worker that is not its own service: the service whose settings and database it shares, and
its module (the training worker trains the orchestration's rounds on the ``training`` queue)."""


def worker_module(name: str) -> tuple[str, str]:
    """(the service whose environment it gets, the Celery app module) of worker ``name``."""
    return WORKER_OF.get(name, (name, f"services.{name}.worker"))


def exit_on_sigterm() -> None:
    """Turn SIGTERM into SystemExit, so a terminated caller still runs ``Stack.stop`` (finally)."""

    def _exit(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _exit)


def _ephemeral_low() -> int:
    """The low end of the kernel's ephemeral port range (what bind(0) and outgoing connections
    take), 32768 where /proc does not say."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


_handed_out: set[int] = set()


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now that this process has not handed out before.

    Picked at random just below the kernel's ephemeral range, where no outgoing connection can
    take it between the pick and the server's bind, and above the blocks that federations scan
    up from 9600 (:func:`mots.training.processes.free_port_block`); two services of one stack
    never get the same port, even before the first has bound it. Where the ephemeral range
    leaves no room below it, the kernel's choice (bind to port 0), still never handed out twice.
    """
    low = _ephemeral_low()
    for _ in range(500):
        if low >= 12768:
            port = random.randrange(low - 2768, low)
        else:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = int(s.getsockname()[1])
        if port not in _handed_out and port_free(port):
            _handed_out.add(port)
            return port
    raise RuntimeError("no free TCP port on 127.0.0.1 after 500 tries")


def private_log(path: Path) -> IO[bytes]:
    """``path`` opened for appending, created (with its directory) readable by its owner only:
    mode 600, an existing log made so too (logs name clients, rounds and request ids)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.fchmod(fd, 0o600)
    return os.fdopen(fd, "ab")


def drop_redis_keys(redis_url: str, prefix: str) -> int:
    """Delete every Redis key under ``prefix`` (queues, results, rate limits, the revocation
    list, whose durable copy is the market's database); how many. A stopped platform's prefix is
    never used again (each start takes a new one), so its keys would stay forever. Redis that
    cannot be reached drops nothing (a warning; its keys are its own to keep then)."""
    import redis

    client = redis.Redis.from_url(redis_url, socket_timeout=10)
    dropped = 0
    try:
        batch: list[bytes] = []
        for key in client.scan_iter(match=f"{prefix}*", count=1000):
            batch.append(key)
            if len(batch) >= 1000:
                dropped += cast(int, client.unlink(*batch))
                batch.clear()
        if batch:
            dropped += cast(int, client.unlink(*batch))
    except redis.RedisError as exc:
        print(f"Redis: the keys under {prefix} were not dropped: {exc}", file=sys.stderr)
    finally:
        client.close()
    return dropped


REDIS_PERSISTENCE = ("--save", "", "--appendonly", "yes", "--appendfsync", "everysec")
"""Redis as the platform runs it: an append-only file fsynced every second, so queued tasks
survive a restart (at most the last second is lost; the reconciler re-drives what was)."""


@dataclass
class RedisServer:
    """A private redis-server with persistence on a free port; restartable on the same port and
    data directory (a Redis restart in the tests and the soak)."""

    workdir: Path
    port: int = field(default_factory=free_port)
    popen: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The Redis URL of this server."""
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout_s: float = 10.0) -> str:
        """Start the server (its AOF replayed if there is one); its URL once it answers."""
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("Redis: redis-server is not installed (make system)")
        data = self.workdir / "redis"
        log = private_log(data / "redis.log")
        self.popen = subprocess.Popen(
            [binary, "--bind", "127.0.0.1", "--port", str(self.port), "--dir", str(data.resolve()),
             *REDIS_PERSISTENCE],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            umask=0o077,
        )  # fmt: skip
        log.close()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.popen.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.popen.returncode}")
            if listening(self.port):
                return self.url
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("Redis: the private redis-server did not start")

    def stop(self, sig: int = signal.SIGKILL) -> None:
        """Stop the server (SIGKILL by default: a crash, not a clean shutdown)."""
        if self.popen is not None and self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, sig)
            self.popen.wait(timeout=30)

    def restart(self, down_s: float = 0.0) -> None:
        """Crash the server, stay down ``down_s`` seconds, start it again on the same port."""
        self.stop()
        time.sleep(down_s)
        self.start()


def _answers(url: str, service: str | None = None) -> bool:
    """``url`` answers 200 (and, for a service's ``/healthz``, as ``service``: a port that another
    process serves is an error, not a ready service)."""
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            body = response.read()
            if response.status != 200:
                return False
    except OSError:
        return False
    if service is not None:
        with contextlib.suppress(ValueError):
            answered = json.loads(body).get("service")
            if answered != service:
                raise RuntimeError(f"{url} answers as {answered!r}, not {service!r}: another "
                                   "process serves that port")  # fmt: skip
    return True


@dataclass
class Process:
    """One started process, its log file and the URL that answers once it is ready."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path
    ready_url: str
    log: IO[bytes]


@dataclass
class Stack:
    """The four services on local ports, with their databases and logs under ``workdir``."""

    workdir: Path
    redis_url: str = "redis://127.0.0.1:6379/0"
    key_prefix: str = field(default_factory=lambda: f"mots-{os.getpid()}-{time.time_ns()}:")
    database_urls: dict[str, str] = field(default_factory=dict)
    extra_env: dict[str, str] = field(default_factory=dict)
    service_env: dict[str, dict[str, str]] = field(default_factory=dict)
    api_workers: dict[str, int] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)
    processes: list[Process] = field(default_factory=list)
    python: str = sys.executable

    @property
    def operator_token(self) -> str:
        """The operator token its services run with."""
        return self.env("market")["MOTS_OPERATOR_TOKEN"]

    def url(self, service: str) -> str:
        """Base URL of a service's API (``market``, ``pricing``, ``orchestration``)."""
        return f"http://127.0.0.1:{self.ports[service]}"

    def metrics_url(self, name: str) -> str:
        """The /metrics URL of an API (``market``) or a worker (``market-worker``)."""
        return f"http://127.0.0.1:{self.ports[name]}/metrics"

    def env(self, service: str) -> dict[str, str]:
        """The environment a service's processes get."""
        env = dict(os.environ)
        env.update(process_secrets().env)
        env.update(
            {
                "MOTS_REDIS_URL": self.redis_url,
                "MOTS_REDIS_KEY_PREFIX": self.key_prefix,
                "MOTS_ARTIFACT_DIR": str((self.workdir / "artifacts").resolve()),
                "MOTS_FEDERATION_DIR": str((self.workdir / "federation").resolve()),
                "PYTHONUNBUFFERED": "1",
            }
        )
        db = self.database_urls.get(service) or (
            f"sqlite:///{(self.workdir / f'{service}.db').resolve()}"
        )
        env["MOTS_DATABASE_URL"] = db
        env.update(self._discovery_env(service))
        env.update(self.extra_env)
        env.update(self.service_env.get(service, {}))
        return env

    def _discovery_env(self, service: str) -> dict[str, str]:
        """The market is told the orchestration's URL (``GET /v1/platform`` hands it to clients,
        so a client needs one URL), once the orchestration's port is chosen; the orchestration
        and the evaluation the market's (a task created only there is read from it)."""
        if service == "market" and "orchestration" in self.ports:
            return {"MOTS_ORCHESTRATION_PUBLIC_URL": self.url("orchestration")}
        if service in ("orchestration", "evaluation") and "market" in self.ports:
            return {"MOTS_MARKET_INTERNAL_URL": self.url("market")}
        return {}

    def _fresh_logs(self, services: tuple[str, ...]) -> None:
        """Each start of the platform writes its processes' logs afresh, the previous start's
        kept as ``NAME.log.1`` (a process restarted within one start appends to its own)."""
        from mots.training.processes import rotate_log

        for service in services:
            names = [f"{service}-api"] if service in SERVICES_WITH_API else []
            workers = [] if service in API_ONLY else [f"{service}-worker"]
            for name in [*names, *workers]:
                rotate_log(self.workdir / "logs" / f"{name}.log")

    def _choose_api_ports(self, services: tuple[str, ...]) -> None:
        """Every API's port before any process starts, so each can be told the others'."""
        for service in services:
            if service in SERVICES_WITH_API:
                self.ports.setdefault(service, free_port())

    def _spawn(self, name: str, argv: list[str], env: dict[str, str], ready_url: str) -> None:
        log_path = self.workdir / "logs" / f"{name}.log"
        log = private_log(log_path)
        popen = subprocess.Popen(
            argv,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            umask=0o077,  # what the services write (databases, artifacts, logs): owner only
        )
        self.processes.append(Process(name, popen, log_path, ready_url, log))

    def start(self, timeout_s: float = 120.0, services: tuple[str, ...] = WORKERS) -> None:
        """Start the APIs and workers of ``services`` and wait until each answers."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._choose_api_ports(services)
        self._fresh_logs(services)
        try:
            for service in services:
                owner, module = worker_module(service)
                env = self.env(owner)
                if service in SERVICES_WITH_API:
                    port = self.ports.setdefault(service, free_port())
                    argv = [
                        self.python, "-m", "uvicorn", "--factory",
                        f"services.{service}.main:create_app",
                        "--host", "127.0.0.1", "--port", str(port),
                        "--no-access-log", "--no-proxy-headers", "--log-level", "warning",
                    ]  # fmt: skip
                    workers = self.api_workers.get(service, 1)
                    if workers > 1:  # a socket each (SO_REUSEPORT): the kernel spreads connections
                        argv = [
                            self.python, "-m", "mots.platform.serve",
                            f"services.{service}.main:create_app",
                            "--host", "127.0.0.1", "--port", str(port), "--workers", str(workers),
                        ]  # fmt: skip
                    self._spawn(f"{service}-api", argv, env, f"{self.url(service)}/healthz")
                if service in API_ONLY:
                    continue
                mport = self.ports.setdefault(f"{service}-worker", free_port())
                wenv = {**env, "MOTS_METRICS_PORT": str(mport)}
                pool = (
                    TRAINING_POOL if service == "training" else ("--pool=solo", "--concurrency=1")
                )
                argv = [
                    self.python, "-m", "celery", "-A", module, "worker",
                    "-Q", service, *pool, "-n", f"{service}@%h",
                    "--without-gossip", "--without-mingle", "--without-heartbeat",
                    "--loglevel", "INFO",
                ]  # fmt: skip
                self._spawn(f"{service}-worker", argv, wenv, f"http://127.0.0.1:{mport}/metrics")
            self.wait_ready(timeout_s)
        except BaseException:
            self.stop()
            raise

    def scrape_targets(self) -> dict[str, str]:
        """Prometheus jobs: every API and worker of this stack, by process name."""
        targets = {}
        for p in self.processes:
            if p.name.endswith("-api"):
                targets[p.name[: -len("-api")]] = f"127.0.0.1:{self.ports[p.name[: -len('-api')]]}"
            elif p.name.endswith("-worker"):
                targets[p.name] = f"127.0.0.1:{self.ports[p.name]}"
        return targets

    def start_prometheus(
        self, binary: str = PROMETHEUS_BINARY, interval: str = "1s", timeout_s: float = 60.0
    ) -> str:
        """Start a Prometheus server scraping this stack; returns its base URL."""
        jobs = "\n".join(
            f"  - job_name: {job}\n    static_configs: [{{targets: ['{target}']}}]"
            for job, target in self.scrape_targets().items()
        )
        config = self.workdir / "prometheus.yml"
        config.write_text(
            f"global:\n  scrape_interval: {interval}\n  evaluation_interval: {interval}\n"
            f"scrape_configs:\n{jobs}\n"
        )
        port = self.ports.setdefault("prometheus", free_port())
        argv = [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={self.workdir / 'prometheus-data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ]
        url = f"http://127.0.0.1:{port}"
        self._spawn("prometheus", argv, dict(os.environ), f"{url}/-/ready")
        self.wait_ready(timeout_s)
        self._wait_scraped(url, set(self.scrape_targets()), timeout_s)
        return url

    @staticmethod
    def _wait_scraped(url: str, jobs: set[str], timeout_s: float) -> None:
        """Block until Prometheus has scraped every job once: a counter's first event after that
        is counted by increase() and rate() (an event before the first scrape is not)."""
        query = f"{url}/api/v1/query?query=up%3D%3D1"
        deadline = time.monotonic() + timeout_s
        while True:
            with contextlib.suppress(OSError, ValueError, KeyError):
                with urllib.request.urlopen(query, timeout=2) as response:
                    result = json.loads(response.read())["data"]["result"]
                if jobs <= {r["metric"]["job"] for r in result}:
                    return
            if time.monotonic() > deadline:
                raise TimeoutError(f"Prometheus did not scrape every job in {timeout_s:.0f}s")
            time.sleep(0.5)

    def wait_ready(self, timeout_s: float) -> None:
        """Block until every process's ready URL answers; raise with its log tail if one dies."""
        deadline = time.monotonic() + timeout_s
        pending = list(self.processes)
        while pending:
            for p in list(pending):
                if p.popen.poll() is not None:
                    raise RuntimeError(
                        f"{p.name} exited with {p.popen.returncode}:\n{self.tail(p.name)}"
                    )
                api = p.name.removesuffix("-api") if p.name.endswith("-api") else None
                if _answers(p.ready_url, api):
                    pending.remove(p)
            if pending and time.monotonic() > deadline:
                names = ", ".join(p.name for p in pending)
                raise TimeoutError(f"not ready after {timeout_s:.0f}s: {names}")
            if pending:
                time.sleep(0.2)

    def tail(self, name: str, lines: int = 40) -> str:
        """The last lines of a process's log."""
        for p in self.processes:
            if p.name == name and p.log_path.exists():
                return "\n".join(p.log_path.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Kill one process group (tests of crash recovery)."""
        for p in self.processes:
            if p.name == name and p.popen.poll() is None:
                os.killpg(p.popen.pid, sig)
                p.popen.wait(timeout=30)

    def restart(self, name: str, timeout_s: float = 60.0) -> None:
        """Start a killed process again with the same command and environment."""
        for i, p in enumerate(self.processes):
            if p.name == name:
                p.log.close()
                argv = [str(a) for a in p.popen.args]  # type: ignore[union-attr]
                del self.processes[i]
                env = self.env(worker_module(name.split("-")[0])[0])
                if name.endswith("-worker"):
                    env["MOTS_METRICS_PORT"] = str(self.ports[name])
                self._spawn(name, argv, env, p.ready_url)
                break
        self.wait_ready(timeout_s)

    def stop(self, timeout_s: float = 20.0) -> None:
        """Terminate every process group (SIGTERM, then SIGKILL) and wait for each."""
        for p in self.processes:
            if p.popen.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.popen.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for p in self.processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.popen.wait(timeout=max(0.1, deadline - time.monotonic()))
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.popen.pid, signal.SIGKILL)
            p.popen.wait()
            p.log.close()
        self.processes.clear()

    def forget_redis(self) -> int:
        """Delete this stack's Redis keys (after :meth:`stop`: ``mots platform down``)."""
        return drop_redis_keys(self.redis_url, self.key_prefix)

    def __enter__(self) -> Stack:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()
