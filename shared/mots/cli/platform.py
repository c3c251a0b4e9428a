"""`mots demo` and `mots platform up|down`: the platform's services on one machine."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Mapping
from pathlib import Path

import click

from mots.cli import platform_ops
from mots.client.config import DEFAULT_WORKDIR, ENDPOINTS_FILE

PIDS_FILE = "pids.json"
SERVICE_NAMES = ("market", "pricing", "orchestration")
FIXED_PORTS = {
    "market": 8101,
    "pricing": 8102,
    "orchestration": 8103,
    "market-worker": 9101,
    "orchestration-worker": 9103,
    "evaluation-worker": 9104,
    "training-worker": 9105,
}
"""The ports monitoring/prometheus.yml scrapes."""


@click.command("demo")
@click.option(
    "--out", "out_dir", type=click.Path(path_type=Path), default=Path("out/demo"), show_default=True
)
@click.option(
    "--nodes",
    "n_nodes",
    type=click.IntRange(1, 64),
    default=20,
    show_default=True,
    help="SuperNodes of the local Flower federation (one per client)",
)
@click.option(
    "--trainer",
    type=click.Choice(["deployment", "inprocess"]),
    default="deployment",
    show_default=True,
    help="Flower's deployment engine, or the in-process engine",
)
@click.option(
    "--train-rounds",
    type=click.IntRange(1, 1000),
    default=5,
    show_default=True,
    help="FedAvg rounds R of the market round's training",
)
def demo(out_dir: Path, n_nodes: int, trainer: str, train_rounds: int) -> None:
    """Run two tasks' market rounds at once (Fashion-MNIST and digits), then stop everything.

    Starts Redis (if none listens on 6379), the four services, their workers, a Flower federation
    and Prometheus as child processes; they stop when the demo ends, and Ctrl-C stops them all.

    \b
    Example:
      mots demo --trainer inprocess --nodes 20    # about 15 s on a laptop
      mots demo --train-rounds 5 --out out/demo   # Flower's deployment engine
    """
    from mots.local.demo import SUMMARY_KEYS, run_demo
    from mots.platform.api.tasks import DEFAULT_TASK

    summary = run_demo(out_dir=out_dir, n_nodes=n_nodes, trainer=trainer, train_rounds=train_rounds)
    for task, one in summary.get("tasks", {DEFAULT_TASK: summary}).items():
        missing = [k for k in SUMMARY_KEYS if one.get(k) is None]
        if one.get("state") != "published" or missing:
            raise click.ClickException(
                f"the {task} round ended {one.get('state')!r}; missing figures: {missing or 'none'}"
            )


@click.group("platform")
def platform() -> None:
    """Run the four services locally (foreground or --detach), see them, stop them.

    \b
    Example:
      mots platform up --detach --free-ports --workdir /tmp/mots  # prints URLs
      mots platform status --workdir /tmp/mots
      mots platform logs market --workdir /tmp/mots
      mots platform down --workdir /tmp/mots         # from any folder
    """


WORKDIR_OPTION = click.option(
    "--workdir",
    type=click.Path(path_type=Path, file_okay=False),
    envvar="MOTS_WORKDIR",
    default=DEFAULT_WORKDIR,
    show_default=True,
    help="the platform's folder: databases, logs, pids.json and endpoints.json (env MOTS_WORKDIR)",
)


@platform.command("up")
@WORKDIR_OPTION
@click.option("--prometheus/--no-prometheus", default=True, show_default=True)
@click.option(
    "--free-ports",
    is_flag=True,
    help="any free ports instead of the fixed ones monitoring/prometheus.yml scrapes, the local"
    " SuperLink's included (several platforms on one machine); kept in WORKDIR/ports.json and"
    " taken again by the next `up` there while free, so URLs and profiles stay valid",
)
@click.option(
    "--detach",
    is_flag=True,
    help="start in the background and return once every service answers (its output in "
    "WORKDIR/logs/platform.log); `mots platform down` stops it",
)
@click.option(
    "--timeout",
    "timeout_s",
    type=click.FloatRange(10, 1800),
    default=300,
    show_default=True,
    help="with --detach: seconds to wait for the platform to answer",
)
def up(workdir: Path, prometheus: bool, free_ports: bool, detach: bool, timeout_s: float) -> None:
    """Start Redis (if needed), the four services and Prometheus; Ctrl-C stops them all
    (with --detach they run in the background until `mots platform down`).

    Prints every service's URL and Prometheus's, and writes them with the operator token to
    WORKDIR/endpoints.json (mode 600), which `mots market` and `mots rounds` read by default.
    The operator token and the key that signs client tokens are generated at the workdir's
    first start into WORKDIR/secrets.env (mode 600; the token is shown that once) and reused
    after: no platform runs with a built-in secret.

    \b
    Example:
      mots platform up --detach --free-ports --workdir /tmp/mots
      mots market config --workdir /tmp/mots
    """
    if _alive(workdir.resolve()):
        _already_running(workdir.resolve())
        return
    if detach:
        platform_ops.detach(workdir.resolve(), prometheus, free_ports, timeout_s)
        return
    _foreground(workdir, prometheus, free_ports)


def _already_running(workdir: Path) -> None:
    """A second `up` on a running work folder is no error (as `docker compose up -d`): it says
    the platform runs, where, and how to stop it; exit 0."""
    try:
        urls = json.loads((workdir / ENDPOINTS_FILE).read_text())
    except (OSError, ValueError):
        urls = {}
    click.echo(f"a platform is already running in {workdir}; nothing started")
    for name in ("market", "pricing", "orchestration", "prometheus"):
        if isinstance(urls.get(name), str):
            click.echo(f"{name:<15} {urls[name]}")
    click.echo(f"(`mots platform down --workdir {workdir}` stops it)")


def _foreground(workdir: Path, prometheus: bool, free_ports: bool) -> None:
    """`mots platform up` in this process: start everything, wait, stop everything."""
    from mots.local.demo import start_redis
    from mots.local.kept_ports import keep_ports, kept_ports
    from mots.local.keys import SECRETS_FILE, workdir_secrets
    from mots.local.launcher import PROMETHEUS_BINARY, Stack, exit_on_sigterm

    exit_on_sigterm()
    workdir = workdir.resolve()
    if _alive(workdir):
        _already_running(workdir)
        return
    (workdir / "logs").mkdir(parents=True, exist_ok=True)
    keys, created = workdir_secrets(workdir)
    redis_url, redis_proc = start_redis(workdir)
    stack = Stack(
        workdir=workdir,
        redis_url=redis_url,
        ports=kept_ports(workdir) if free_ports else dict(FIXED_PORTS),
        extra_env={**keys.env, **({"MOTS_SUPERLINK_PORT": "0"} if free_ports else {})},
    )
    died: list[str] = []
    try:
        stack.start(timeout_s=180)
        urls: dict[str, str | None] = {s: stack.url(s) for s in SERVICE_NAMES}
        urls["prometheus"] = (
            stack.start_prometheus(interval="5s")
            if prometheus and Path(PROMETHEUS_BINARY).exists()
            else None
        )
        pids = [p.popen.pid for p in stack.processes] + ([redis_proc.pid] if redis_proc else [])
        metrics = {job: f"http://{t}/metrics" for job, t in stack.scrape_targets().items()}
        endpoints = {**urls, "operator_token": keys.operator_token, "metrics": metrics}
        if urls["prometheus"] is not None:
            provisioning = platform_ops.write_grafana_provisioning(workdir, urls["prometheus"])
            endpoints["grafana_provisioning"] = str(provisioning)
        if free_ports:
            keep_ports(workdir, stack.ports)
        _write_json(workdir / PIDS_FILE, {"pid": os.getpid(), "pids": pids, "urls": urls})
        _write_json(workdir / ENDPOINTS_FILE, endpoints)
        for name, url in urls.items():
            click.echo(f"{name:<15} {url if url is not None else '-'}")
        shown = keys.operator_token if created else f"in {workdir / SECRETS_FILE}"
        click.echo(f"{'operator_token':<15} {shown}")
        if created:
            click.echo(f"{'':<15} (shown once; kept in {workdir / SECRETS_FILE}, mode 600)")
        click.echo(f"endpoints       {workdir / ENDPOINTS_FILE}")
        click.echo(f"Ctrl-C (or `mots platform down --workdir {workdir}`) stops everything.")
        while all(p.popen.poll() is None for p in stack.processes):
            time.sleep(1)
        died = [p.name for p in stack.processes if p.popen.poll() is not None]
    except (KeyboardInterrupt, SystemExit):  # Ctrl-C, or SIGTERM from `mots platform down`
        pass
    finally:
        stack.stop()
        stack.forget_redis()  # the next start takes a new prefix: these keys would stay forever
        if redis_proc is not None:
            redis_proc.terminate()
            redis_proc.wait(timeout=10)
        (workdir / PIDS_FILE).unlink(missing_ok=True)
        (workdir / ENDPOINTS_FILE).unlink(missing_ok=True)
    if died:
        raise click.ClickException(
            f"{', '.join(died)} exited, so the platform stopped (logs: {workdir / 'logs'})"
        )


@platform.command("down")
@WORKDIR_OPTION
@click.option(
    "--timeout",
    "timeout_s",
    type=click.FloatRange(1, 600),
    default=60,
    show_default=True,
    help="seconds to wait for an orderly stop before killing the process groups",
)
def down(workdir: Path, timeout_s: float) -> None:
    """Stop the platform a `mots platform up --workdir WORKDIR` started, from any folder.

    \b
    Example:
      mots platform down --workdir /tmp/mots
    """
    pidfile = workdir.resolve() / PIDS_FILE
    if not pidfile.exists():  # already down (a second `down` is not an error: issue 26)
        click.echo(f"no platform running in {workdir.resolve()} (nothing to stop)")
        return
    try:
        recorded = json.loads(pidfile.read_text())
    except (OSError, ValueError) as exc:
        raise click.ClickException(f"{pidfile}: not a readable pid record ({exc})") from exc
    leader = recorded.get("pid")
    if isinstance(leader, int) and _signal(leader, signal.SIGTERM):
        deadline = time.monotonic() + timeout_s
        while pidfile.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
    if pidfile.exists():  # the `up` process is gone or stuck: kill it and its children's groups
        if isinstance(leader, int):
            _signal(leader, signal.SIGKILL)
        for pid in recorded.get("pids", []):
            _signal(pid, signal.SIGKILL, group=True)
        pidfile.unlink(missing_ok=True)
        (workdir.resolve() / ENDPOINTS_FILE).unlink(missing_ok=True)
    click.echo(f"stopped the platform of {workdir.resolve()}")


@platform.command("status")
@WORKDIR_OPTION
@click.option("--json", "as_json", is_flag=True, help="one JSON object instead of the table")
def status(workdir: Path, as_json: bool) -> None:
    """Whether WORKDIR's platform runs, and each service's and metrics endpoint's answer.

    Exit status: 0 every process answers, 1 some do not, 3 no platform runs there.

    \b
    Example:
      mots platform status --workdir /tmp/mots --json
    """
    workdir = workdir.resolve()
    platform_ops.status(workdir, _alive(workdir), as_json)


@platform.command("logs")
@WORKDIR_OPTION
@click.argument("name", required=False)
@click.option(
    "-n", "--lines", type=click.IntRange(0, 100_000), default=20, show_default=True,
    help="lines from the end of each log",
)  # fmt: skip
@click.option("-f", "--follow", is_flag=True, help="then print what the logs gain (Ctrl-C ends)")
@click.option("--request", "request_id", help="only the lines naming this request id")
def logs(workdir: Path, name: str | None, lines: int, follow: bool, request_id: str | None) -> None:
    """The end of each process's log (WORKDIR/logs), or of NAME's (market: its API and worker;
    platform: `up --detach`'s own output); with --request ID, the lines of every log that name
    that request (the id a refusal printed, `[request ID]`; exit 1 if none does).

    \b
    Example:
      mots platform logs market-worker -n 50 --workdir /tmp/mots
    """
    files = platform_ops.log_files(workdir.resolve(), name)
    if request_id is not None:
        found = platform_ops.request_lines(files, request_id)
        if not found:
            raise click.ClickException(
                f"request_id: no log line names request {request_id} in {workdir.resolve() / 'logs'}"
            )
        click.echo("\n".join(found))
        return
    if not files:
        click.echo(f"no logs in {workdir.resolve() / 'logs'}")
        return
    platform_ops.show_logs(files, lines, follow)


def _signal(pid: int, sig: int, *, group: bool = False) -> bool:
    """Send ``sig`` to a process (or its group); False when it no longer exists."""
    try:
        (os.killpg if group else os.kill)(pid, sig)
    except ProcessLookupError:
        return False
    return True


def _alive(workdir: Path) -> bool:
    """True when WORKDIR's pids.json names an `up` process that still runs."""
    try:
        leader = json.loads((workdir / PIDS_FILE).read_text()).get("pid")
    except (OSError, ValueError):
        return False
    if not isinstance(leader, int):
        return False
    try:
        os.kill(leader, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _write_json(path: Path, data: Mapping[str, object]) -> None:
    """Write ``data`` atomically (readers never see half a file), readable by its owner only
    (endpoints.json holds the operator token)."""
    from mots.local.keys import write_private

    write_private(path, json.dumps(data, indent=1) + "\n")


commands: list[click.Command] = [demo, platform]
