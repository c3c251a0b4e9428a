"""``make soak`` at a small size: six rounds with a worker SIGKILLed, Redis restarted and the
PostgreSQL connections terminated; every round ends, the report has the issue's shape."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from benchmarks.soak import kill_a_supernode

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
ROW_KEYS = {
    "index", "state", "seconds", "platform_seconds", "waiting_seconds",
    "deadline_overrun_seconds", "predicted_epsilon", "measured_epsilon", "price", "rss_mib",
    "participants", "calls", "resent",
}  # fmt: skip


def test_a_small_soak_survives_its_faults(tmp_path: Path) -> None:
    """Rounds 3-5 each take a fault; every round ends (published or by rule) in time, the
    ledger is exact after each, nothing is left running."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.soak", "--rounds", "6", "--train-rounds", "1",
         "--local-steps", "2", "--collect-timeout", "10", "--out", str(tmp_path),
         "--kinds", "kill:orchestration-worker,redis-restart,postgres-terminate"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())
    rows = report["rounds"]
    assert [r["index"] for r in rows] == [1, 2, 3, 4, 5, 6]
    assert all(set(r) == ROW_KEYS for r in rows)
    assert all(r["state"] in ("published", "settled_by_rule") for r in rows), rows
    assert sum(r["state"] == "published" for r in rows) >= 5
    assert max(r["deadline_overrun_seconds"] for r in rows) <= 30.0
    assert report["ledger_balanced_after_every_round"] is True
    assert report["orphan_processes"] == 0
    assert 0 < report["max_round_calls"] <= 7, [r["calls"] for r in rows]  # issue 38
    kinds = [f["kind"] for f in report["faults"]]
    assert kinds == ["kill:orchestration-worker", "redis-restart", "postgres-terminate"]
    assert all(f["outcome"].startswith("round ") for f in report["faults"]), report["faults"]
    assert "soak: targets" in done.stdout


def _stand_in_supernode(cmdline_path: Path) -> subprocess.Popen[bytes]:
    """A sleeping process whose command line reads like a SuperNode of the federation there."""
    return subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)", "flower-supernode",
         "--node-config", f'trainer-socket="{cmdline_path}"'],
    )  # fmt: skip


def test_the_supernode_kill_kills_one_of_the_soaks_own_supernodes(tmp_path: Path) -> None:
    """SIGKILLs the SuperNode under the soak's federation workdir, not one of another soak."""
    ours = _stand_in_supernode(tmp_path / "federation" / "node-00" / "trainer.sock")
    other = _stand_in_supernode(tmp_path / "elsewhere" / "federation" / "node-00" / "t.sock")
    try:
        time.sleep(0.2)  # the children's command lines are readable once they exec
        soak = SimpleNamespace(stack=SimpleNamespace(workdir=tmp_path))
        assert kill_a_supernode(soak) == ours.pid  # type: ignore[arg-type]
        assert ours.wait(timeout=10) == -9
        assert other.poll() is None
    finally:
        for p in (ours, other):
            p.kill()
            p.wait()


def test_the_supernode_kill_fails_when_no_supernode_runs(tmp_path: Path) -> None:
    """With no SuperNode to kill the fault is reported as failed, never as a kill that
    happened (the soak records the exception as "injection failed")."""
    soak = SimpleNamespace(stack=SimpleNamespace(workdir=tmp_path))
    with pytest.raises(RuntimeError, match="no SuperNode"):
        kill_a_supernode(soak)  # type: ignore[arg-type]
