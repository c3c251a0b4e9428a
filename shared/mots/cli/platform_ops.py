"""`mots platform up --detach`, `mots platform status` and `mots platform logs`: a platform that
runs in the background, and how to see it.

``up --detach`` starts the foreground ``mots platform up`` as a process of its own session (so it
outlives the shell), its output in WORKDIR/logs/platform.log (mode 600: it may show the operator
token), waits until WORKDIR/endpoints.json exists and prints what the platform printed;
``status`` asks every service's liveness route and every metrics endpoint, and probes each
process of the platform's local federation (:mod:`mots.cli.platform_federation`); ``logs`` prints the
end of each process's log (WORKDIR/logs/NAME.log) and may follow them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import click
import httpx

from mots.cli.platform_federation import federation_logs, federation_rows
from mots.client.config import ENDPOINTS_FILE

PLATFORM_LOG = "platform.log"
NOT_RUNNING_EXIT = 3
"""`mots platform status`'s exit status when nothing runs (as an LSB init script's status)."""
_READY_LINE = "stops everything."


def detach(workdir: Path, prometheus: bool, free_ports: bool, timeout_s: float) -> None:
    """Start `mots platform up` in the background and return once it serves (or say why not)."""
    logs = workdir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    (workdir / ENDPOINTS_FILE).unlink(missing_ok=True)
    log_path = logs / PLATFORM_LOG
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    argv = [
        sys.executable,
        "-c",
        "from mots.cli.main import cli; cli()",
        "platform",
        "up",
        "--workdir",
        str(workdir),
        "--prometheus" if prometheus else "--no-prometheus",
        *(["--free-ports"] if free_ports else []),
    ]
    with os.fdopen(fd, "wb") as log:
        child = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    deadline = time.monotonic() + timeout_s
    while not _printed(log_path):
        if child.poll() is not None:
            raise click.ClickException(
                f"the platform stopped while starting (exit {child.returncode}); the end of "
                f"{log_path}:\n{_tail(log_path, 15)}"
            )
        if time.monotonic() > deadline:
            os.killpg(child.pid, signal.SIGTERM)
            raise click.ClickException(
                f"the platform did not start within {timeout_s:g} s (stopped); the end of "
                f"{log_path}:\n{_tail(log_path, 15)}"
            )
        time.sleep(0.5)
    for line in log_path.read_text(errors="replace").splitlines():
        if not line.startswith("Ctrl-C"):
            click.echo(line)
    click.echo(
        f"running in the background (pid {child.pid}): `mots platform status|logs|down "
        f"--workdir {workdir}`"
    )


def _printed(log_path: Path) -> bool:
    """Whether `up` has printed its summary (its last line) into the log."""
    try:
        return _READY_LINE in log_path.read_text(errors="replace")
    except OSError:
        return False


def _tail(path: Path, lines: int) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as exc:
        return f"({exc})"


def _probe(url: str) -> str:
    """``ok`` when ``url`` answers 2xx within 3 s, else why not."""
    try:
        r = httpx.get(url, timeout=3)
    except httpx.HTTPError as exc:
        return f"down ({type(exc).__name__})"
    return "ok" if r.is_success else f"down (HTTP {r.status_code})"


def status_rows(endpoints: dict[str, Any]) -> list[dict[str, str]]:
    """One row per service (its ``/healthz``), Prometheus (``/-/ready``) and metrics endpoint."""
    rows = []
    for name in ("market", "pricing", "orchestration", "prometheus"):
        url = endpoints.get(name)
        if isinstance(url, str):
            probe = f"{url}/-/ready" if name == "prometheus" else f"{url}/healthz"
            rows.append({"name": name, "url": url, "state": _probe(probe)})
    for job, url in sorted((endpoints.get("metrics") or {}).items()):
        rows.append({"name": f"metrics {job}", "url": url, "state": _probe(url)})
    return rows


def status(workdir: Path, alive: bool, as_json: bool) -> None:
    """Print the platform's state; exit 0 all answering, 1 some not, 3 nothing running."""
    endpoints_file = workdir / ENDPOINTS_FILE
    if not alive or not endpoints_file.exists():
        if as_json:
            click.echo(json.dumps({"running": False, "workdir": str(workdir)}))
        else:
            click.echo(f"no platform running in {workdir}")
        raise click.exceptions.Exit(NOT_RUNNING_EXIT)
    endpoints = json.loads(endpoints_file.read_text())
    rows = status_rows(endpoints) + federation_rows(workdir)
    healthy = all(r["state"] == "ok" for r in rows)
    if as_json:
        click.echo(json.dumps({"running": True, "healthy": healthy, "processes": rows}))
    else:
        width = max(len(r["name"]) for r in rows)
        click.echo(f"platform of {workdir}: {'running' if healthy else 'DEGRADED'}")
        for r in rows:
            click.echo(f"  {r['name']:<{width}}  {r['state']:<6}  {r.get('doing') or r['url']}")
    if not healthy:
        raise click.exceptions.Exit(1)


def log_files(workdir: Path, name: str | None) -> list[Path]:
    """WORKDIR/logs/*.log and the local federation's (WORKDIR/federation/logs: ``superlink``,
    ``supernode-00``, ...), or those of process ``name`` (``market``: market-api, market-worker;
    ``supernode``: every SuperNode)."""
    logs = sorted((workdir / "logs").glob("*.log")) + federation_logs(workdir)
    if name is None:
        return logs
    chosen = [p for p in logs if p.stem == name or p.stem.startswith(f"{name}-")]
    if not chosen:
        known = ", ".join(p.stem for p in logs) or "none yet"
        raise click.BadParameter(f"no log named {name!r} in {workdir / 'logs'} (known: {known})")
    return chosen


def request_lines(files: list[Path], rid: str) -> list[str]:
    """Every line of ``files`` that names request ``rid`` (``request_id=RID``, as the services
    log each refused or failed request), as ``file: line`` (issue 40: a refusal a client
    reports, with the id the CLI printed, is found in the services' logs)."""
    needle = f"request_id={rid}"
    found = []
    for path in files:
        for line in path.read_text(errors="replace").splitlines():
            if needle in line:
                found.append(f"{path.stem}: {line}")
    return found


def show_logs(files: list[Path], lines: int, follow: bool) -> None:
    """The last ``lines`` lines of each file; with ``follow``, then what they gain (Ctrl-C)."""
    offsets = {}
    for path in files:
        if len(files) > 1:
            click.echo(f"==> {path.name} <==")
        text = path.read_text(errors="replace")
        for line in text.splitlines()[-lines:] if lines else []:
            click.echo(line)
        offsets[path] = path.stat().st_size
    try:
        while follow:
            time.sleep(0.5)
            for path in files:
                size = path.stat().st_size
                if size > offsets[path]:
                    with path.open("rb") as f:
                        f.seek(offsets[path])
                        chunk = f.read(size - offsets[path]).decode(errors="replace")
                    prefix = f"{path.stem}: " if len(files) > 1 else ""
                    for line in chunk.splitlines():
                        click.echo(prefix + line)
                    offsets[path] = size
    except KeyboardInterrupt:
        pass


GRAFANA_DIR = "grafana"
DASHBOARD = Path(__file__).resolve().parents[3] / "monitoring/grafana/dashboards/mots.json"
"""The generated dashboard (monitoring/grafana/build_dashboard.py) in a source checkout."""


def write_grafana_provisioning(workdir: Path, prometheus_url: str) -> Path:
    """WORKDIR/grafana/provisioning for a local Grafana: a Prometheus data source at the address
    this platform's Prometheus really has (``--free-ports`` moves it off :9090) and a dashboard
    provider loading WORKDIR/grafana/dashboards (the dashboard copied there). Start Grafana with
    ``GF_PATHS_PROVISIONING=WORKDIR/grafana/provisioning``; returns that folder."""
    root = workdir / GRAFANA_DIR
    provisioning = root / "provisioning"
    (provisioning / "datasources").mkdir(parents=True, exist_ok=True)
    (provisioning / "dashboards").mkdir(parents=True, exist_ok=True)
    dashboards = root / "dashboards"
    dashboards.mkdir(exist_ok=True)
    if DASHBOARD.exists():
        (dashboards / DASHBOARD.name).write_text(DASHBOARD.read_text())
    (provisioning / "datasources" / "prometheus.yaml").write_text(
        "# Written by `mots platform up`: this platform's Prometheus, wherever its port is.\n"
        "apiVersion: 1\n"
        "datasources:\n"
        "  - name: Prometheus\n"
        "    type: prometheus\n"
        "    access: proxy\n"
        f"    url: {prometheus_url}\n"
        "    isDefault: true\n"
    )
    (provisioning / "dashboards" / "mots.yaml").write_text(
        "# Written by `mots platform up`: the MoTS dashboard, copied beside this folder.\n"
        "apiVersion: 1\n"
        "providers:\n"
        "  - name: mots\n"
        "    folder: MoTS\n"
        "    type: file\n"
        "    options:\n"
        f"      path: {dashboards}\n"
    )
    return provisioning
