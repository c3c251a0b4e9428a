"""`mots demo` and `mots platform up|down`: the platform's services on one machine."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import click

PIDFILE = Path("out/platform/pids.json")
FIXED_PORTS = {
    "market": 8101,
    "pricing": 8102,
    "orchestration": 8103,
    "market-worker": 9101,
    "pricing-worker": 9102,
    "orchestration-worker": 9103,
    "evaluation-worker": 9104,
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
    """Run one full market cycle on Fashion-MNIST with real training, then stop everything."""
    from mots.local.demo import SUMMARY_KEYS, run_demo

    summary = run_demo(out_dir=out_dir, n_nodes=n_nodes, trainer=trainer, train_rounds=train_rounds)
    missing = [k for k in SUMMARY_KEYS if summary.get(k) is None]
    if summary.get("state") != "published" or missing:
        raise click.ClickException(
            f"the round ended {summary.get('state')!r}; missing figures: {missing or 'none'}"
        )


@click.group("platform")
def platform() -> None:
    """Run the four services locally (foreground)."""


@platform.command("up")
@click.option(
    "--workdir", type=click.Path(path_type=Path), default=Path("out/platform"), show_default=True
)
@click.option("--prometheus/--no-prometheus", default=True, show_default=True)
def up(workdir: Path, prometheus: bool) -> None:
    """Start Redis (if needed), the four services and Prometheus; Ctrl-C stops them all."""
    from mots.local.demo import start_redis
    from mots.local.launcher import PROMETHEUS_BINARY, Stack, exit_on_sigterm

    exit_on_sigterm()
    (workdir / "logs").mkdir(parents=True, exist_ok=True)
    redis_url, redis_proc = start_redis(workdir)
    stack = Stack(workdir=workdir, redis_url=redis_url, ports=dict(FIXED_PORTS))
    stack.start(timeout_s=180)
    try:
        urls = {s: stack.url(s) for s in ("market", "pricing", "orchestration")}
        if prometheus and Path(PROMETHEUS_BINARY).exists():
            urls["prometheus"] = stack.start_prometheus(interval="5s")
        pids = [p.popen.pid for p in stack.processes] + ([redis_proc.pid] if redis_proc else [])
        PIDFILE.parent.mkdir(parents=True, exist_ok=True)
        PIDFILE.write_text(json.dumps({"pids": pids, "urls": urls}))
        for name, url in urls.items():
            click.echo(f"{name:<14} {url}")
        click.echo("Ctrl-C (or `mots platform down`) stops everything.")
        while all(p.popen.poll() is None for p in stack.processes):
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        stack.stop()
        if redis_proc is not None:
            redis_proc.terminate()
            redis_proc.wait(timeout=10)
        PIDFILE.unlink(missing_ok=True)


@platform.command("down")
def down() -> None:
    """Stop the processes a running `mots platform up` started."""
    if not PIDFILE.exists():
        raise click.ClickException(f"{PIDFILE}: no running platform recorded")
    for pid in json.loads(PIDFILE.read_text())["pids"]:
        try:
            os.killpg(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
    click.echo("sent SIGTERM to every process group of the platform")


commands: list[click.Command] = [demo, platform]
