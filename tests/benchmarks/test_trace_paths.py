"""The path tracer's bookkeeping: which files count, and how a window's files are read back."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.trace_paths import ROOT, TRACER, project_file, read_window, split


def test_only_the_repositorys_sources_count() -> None:
    """Library files, the tracer itself and non-Python files are left out."""
    assert project_file(str(ROOT / "services/market/main.py")) == "services/market/main.py"
    assert project_file(str(ROOT / ".venv/lib/python3.11/site-packages/x.py")) is None
    assert project_file(str(TRACER / "sitecustomize.py")) is None
    assert project_file("/usr/lib/python3.11/json/__init__.py") is None
    assert project_file("<frozen importlib._bootstrap>") is None


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


def _wait(path: Path) -> None:
    end = time.monotonic() + 60
    while not path.exists():
        assert time.monotonic() < end, f"{path.name} never appeared"
        time.sleep(0.02)
