"""Loaded by every Python process that ``benchmarks.trace_paths`` starts (this folder is first on
their PYTHONPATH): records which source files' functions are called inside named windows.

The driver opens a window by creating ``<name>.start`` in ``$TRACE_PATHS_DIR`` and closes it with
``<name>.stop``; each process then writes ``<name>.<pid>.files``: its command line, then every
source file one of whose functions was called while the window was open (a profile hook on every
thread, ``sys.setprofile``/``threading.setprofile``).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from types import FrameType
from typing import Any

_DIR = os.environ.get("TRACE_PATHS_DIR")
_active: dict[str, set[str]] = {}


def _profile(frame: FrameType, event: str, _arg: Any) -> None:
    if event == "call" and _active:
        name = frame.f_code.co_filename
        for seen in list(_active.values()):
            seen.add(name)


def _poll(folder: str) -> None:
    done: set[str] = set()
    while True:
        time.sleep(0.05)
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for n in names:
            window, _, mark = n.rpartition(".")
            if mark == "start" and window not in _active and window not in done:
                _active[window] = set()
            elif mark == "stop" and window in _active:
                seen = _active.pop(window)
                done.add(window)
                path = os.path.join(folder, f"{window}.{os.getpid()}.files")
                with open(path, "w") as out:
                    out.write("# " + " ".join(sys.argv) + "\n")
                    out.write("\n".join(sorted(seen)) + "\n")


if _DIR:
    sys.setprofile(_profile)
    threading.setprofile(_profile)
    threading.Thread(target=_poll, args=(_DIR,), name="trace-paths", daemon=True).start()
