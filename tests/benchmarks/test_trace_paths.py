"""The path tracer's bookkeeping: which files count, and how a window's files are read back."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.trace_paths import (
    ROOT,
    TRACER,
    project_file,
    read_window,
    sequence_diagram,
    split,
)
from mots.platform.contracts import (
    MARKET_CLOSE_ROUND,
    MARKET_DECLARATION_PROGRESS,
    MARKET_SETTLE_ROUND,
    TRAINING_TRAIN,
)


def test_only_the_repositorys_sources_count() -> None:
    """Library files, the tracer itself and non-Python files are left out."""
    assert project_file(str(ROOT / "services/market/main.py")) == "services/market/main.py"
    assert project_file(str(ROOT / ".venv/lib/python3.11/site-packages/x.py")) is None
    assert project_file(str(TRACER / "sitecustomize.py")) is None
    assert project_file("/usr/lib/python3.11/json/__init__.py") is None
    assert project_file("<frozen importlib._bootstrap>") is None


def test_flowers_installed_copies_of_the_app_count_as_its_source() -> None:
    """Flower runs the app from its own install (one per SuperLink and SuperNode home, under the
    run's folder in ``out/``): those files are ``edge/flower_app``'s, counted once."""
    home = ROOT / "out/trace/run/federation/nodes/node-10/apps/mots.mots-fedavg.1.0.0.56a21f37"
    link = ROOT / "out/trace/run/federation/superlink-home/apps/mots.mots-fedavg.1.0.0.5a/x"
    assert project_file(str(home / "client_app.py")) == "edge/flower_app/client_app.py"
    assert project_file(str(link.parent / "server_app.py")) == "edge/flower_app/server_app.py"
    assert project_file(str(ROOT / "out/trace/run/other.py")) == "out/trace/run/other.py"


def test_a_traced_process_reports_what_ran_inside_the_window(tmp_path: Path) -> None:
    """A child with the tracer on its path writes the files whose functions ran in the window:
    the call made inside it counts, the one made before it does not, and a thread named as a
    background loop is reported apart from the path."""
    code = f"""
import glob, os, threading, time
from mots.economics import utility
from mots.platform import paging
utility.PowerUtility(scale=1.0, exponent=2.0).value(0.5)
def wait(pattern):
    end = time.time() + 60
    while not glob.glob(os.path.join({str(tmp_path)!r}, pattern)) and time.time() < end:
        time.sleep(0.02)
open(os.path.join({str(tmp_path)!r}, "begun"), "w").close()
wait("w.start")
time.sleep(0.3)
from mots.platform import money
money.to_micros(1)
loop = threading.Thread(target=paging.encode_cursor, args=(3,), name="background:loop")
loop.start()
loop.join()
open(os.path.join({str(tmp_path)!r}, "called"), "w").close()
wait("w.*.files")
"""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(TRACER), str(ROOT / "shared"), str(ROOT)]),
        "TRACE_PATHS_DIR": str(tmp_path),
    }
    child = subprocess.Popen([sys.executable, "-c", code], env=env)
    _wait(tmp_path / "begun")
    (tmp_path / "w.start").touch()
    _wait(tmp_path / "called")
    (tmp_path / "w.stop").touch()
    assert child.wait(timeout=60) == 0
    window = read_window(tmp_path, "w")
    ((path,),) = [t.values() for t in split(window, background=False).values()]
    ((background,),) = [t.values() for t in split(window, background=True).values()]
    assert "shared/mots/platform/money.py" in path
    assert "shared/mots/economics/utility.py" not in path
    assert "shared/mots/platform/paging.py" not in path  # a background loop's, listed apart
    assert background == ["shared/mots/platform/paging.py"]


def _traced(tmp_path: Path, code: str, *args: str) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(TRACER), str(ROOT / "shared"), str(ROOT)]),
        "TRACE_PATHS_DIR": str(tmp_path),
    }
    return subprocess.Popen([sys.executable, "-c", code, *args], env=env)


def test_a_process_that_ends_inside_the_window_reports_what_it_ran(tmp_path: Path) -> None:
    """Flower's ServerApp process ends with its run, before the window closes: it writes its
    files as it exits, or the trace would never see the strategy run."""
    code = f"""
import os, time
from mots.platform import money
end = time.time() + 60
while not os.path.exists(os.path.join({str(tmp_path)!r}, "w.start")) and time.time() < end:
    time.sleep(0.02)
time.sleep(0.3)
money.to_micros(1)
"""
    child = _traced(tmp_path, code)
    (tmp_path / "w.start").touch()
    assert child.wait(timeout=60) == 0
    window = read_window(tmp_path, "w")
    ((path,),) = [t.values() for t in split(window, background=False).values()]
    assert "shared/mots/platform/money.py" in path


def test_the_warm_fork_template_stays_single_threaded_and_its_nodes_report(
    tmp_path: Path,
) -> None:
    """The warm-fork template refuses to fork with a second thread running, so the tracer starts
    no poller there; each node it forks starts its own and reports what it ran."""
    code = f"""
import os, sys, threading, time
assert threading.active_count() == 1, threading.enumerate()
from mots.platform import money
pid = os.fork()
if pid == 0:
    end = time.time() + 60
    while not os.path.exists(os.path.join({str(tmp_path)!r}, "w.start")) and time.time() < end:
        time.sleep(0.02)
    time.sleep(0.3)
    money.to_micros(1)
    sys.exit(0)
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""
    child = _traced(tmp_path, code, "-m", "mots.training.warm_fork", "--socket", "x")
    (tmp_path / "w.start").touch()
    assert child.wait(timeout=60) == 0
    window = read_window(tmp_path, "w")
    assert len(window) == 1  # the forked node; the template ran no poller
    ((path,),) = [t.values() for t in split(window, background=False).values()]
    assert "shared/mots/platform/money.py" in path


def _wait(path: Path) -> None:
    end = time.monotonic() + 60
    while not path.exists():
        assert time.monotonic() < end, f"{path.name} never appeared"
        time.sleep(0.02)


def test_the_round_sequence_has_one_request_and_reply_per_call_and_folds_the_polls() -> None:
    """Three calls and two polls between them: three request/reply pairs, one poll loop, and
    the publication event after the settlement."""
    poll = MARKET_DECLARATION_PROGRESS.name
    calls = [poll, poll, MARKET_CLOSE_ROUND.name, TRAINING_TRAIN.name, MARKET_SETTLE_ROUND.name]
    lines = sequence_diagram(calls).splitlines()
    assert lines[0] == "sequenceDiagram"
    requests = [line for line in lines if "orchestration->>" in line]
    assert len(requests) == 4  # three calls and the poll, once
    assert "  loop 2 polls while clients decide" in lines
    assert "orchestration->>training: training.train (TrainRequest)" in lines[-5]
    assert lines[-1].endswith("evaluation.published (RoundRef), event")
