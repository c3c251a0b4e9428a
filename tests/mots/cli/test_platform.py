"""`mots platform up|down --workdir`: what they do before or without starting any service."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from mots.cli.main import cli


def test_up_on_a_workdir_whose_platform_still_runs_starts_nothing(tmp_path: Path) -> None:
    """A second `up` in the same folder says the platform runs (naming `down`) and exits 0, as
    `docker compose up -d` does (issue 40), before it starts anything."""
    (tmp_path / "pids.json").write_text(json.dumps({"pid": os.getpid(), "pids": []}))
    result = CliRunner().invoke(cli, ["platform", "up", "--workdir", str(tmp_path)])
    assert result.exit_code == 0
    assert "already running" in result.output and "mots platform down --workdir" in result.output
    assert not (tmp_path / "logs").exists()


def test_down_stops_the_children_of_a_stuck_up(tmp_path: Path) -> None:
    """When the `up` process does not stop on SIGTERM within --timeout, `down` SIGKILLs it and
    the process groups it recorded and removes the pid and endpoints files, so the next `up` may
    start. (Every process signalled here is this test's own.)"""
    stuck = subprocess.Popen(
        [sys.executable, "-c", STUCK], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True
    )
    try:
        assert stuck.stdout is not None and stuck.stdout.readline().strip() == "ready"
        (tmp_path / "pids.json").write_text(json.dumps({"pid": stuck.pid, "pids": [child.pid]}))
        (tmp_path / "endpoints.json").write_text("{}")
        args = ["platform", "down", "--workdir", str(tmp_path), "--timeout", "1"]
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, result.output
        assert child.wait(timeout=10) == -signal.SIGKILL
        assert stuck.wait(timeout=10) == -signal.SIGKILL
        assert not (tmp_path / "pids.json").exists()
        assert not (tmp_path / "endpoints.json").exists()
    finally:
        for p in (stuck, child):
            if p.poll() is None:
                p.kill()
                p.wait()


STUCK = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('ready', flush=True); time.sleep(60)"
)
