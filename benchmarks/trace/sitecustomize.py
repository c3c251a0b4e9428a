"""Loaded by every Python process that ``benchmarks.trace_paths`` starts (this folder is first on
their PYTHONPATH): records which source files' functions each thread calls inside named windows.

The driver opens a window by creating ``<name>.start`` in ``$TRACE_PATHS_DIR`` and closes it with
``<name>.stop``; each process then writes ``<name>.<pid>.files``: its command line, then for
every thread that ran (by its name when it called) a ``## <thread name>`` line and every source
file one of whose functions that thread called while the window was open (a profile hook on
every thread, ``sys.setprofile``/``threading.setprofile``). The driver tells the path's threads
from background loops by name (``background:`` prefix, set where such a thread is started).
"""

from __future__ import annotations

import atexit
import functools
import os
import sys
import threading
import time
from types import FrameType
from typing import Any

_DIR = os.environ.get("TRACE_PATHS_DIR")
_active: dict[str, dict[str, set[str]]] = {}
_current = threading.current_thread


def _profile(frame: FrameType, event: str, _arg: Any) -> None:
    if event == "call" and _active:
        name = frame.f_code.co_filename
        thread = _current().name
        for seen in list(_active.values()):
            seen.setdefault(thread, set()).add(name)


def _write(folder: str, window: str, seen: dict[str, set[str]]) -> None:
    path = os.path.join(folder, f"{window}.{os.getpid()}.files")
    with open(path, "w") as out:
        out.write("# " + " ".join(sys.argv) + "\n")
        for thread, files in sorted(dict(seen).items()):  # a copy: threads may still add
            out.write(f"## {thread}\n")
            out.write("".join(f + "\n" for f in sorted(files)))


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
                _active[window] = {}
            elif mark == "stop" and window in _active:
                seen = _active.pop(window)
                done.add(window)
                _write(folder, window, seen)


def _flush_at_exit(folder: str) -> None:
    """A process that ends inside a window (Flower's ServerApp process ends with its run)
    writes what it ran so far: the window's stop would find it gone."""
    for window, seen in list(_active.items()):
        _write(folder, window, seen)


def _start_poller(folder: str) -> None:
    threading.Thread(
        target=_poll, args=(folder,), name="background:trace-paths", daemon=True
    ).start()


def _is_fork_template() -> bool:
    """The warm-fork template (``python -m mots.training.warm_fork --socket PATH``) refuses to
    fork while it runs a second thread, so it gets no poller; each node it forks starts its own."""
    try:
        with open("/proc/self/cmdline", "rb") as cmdline:
            args = cmdline.read().split(b"\0")
    except OSError:
        return False
    return b"mots.training.warm_fork" in args and b"--node" not in args


if _DIR:
    sys.setprofile(_profile)
    threading.setprofile(_profile)
    atexit.register(_flush_at_exit, _DIR)
    if _is_fork_template():
        os.register_at_fork(after_in_child=functools.partial(_start_poller, _DIR))
    else:
        _start_poller(_DIR)
