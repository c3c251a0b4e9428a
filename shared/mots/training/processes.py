"""The processes of a local federation: ports, the process tree, strays, and the supervisor.

Every process a federation starts runs in its own session (pgid == pid) with its working directory
under the federation's ``workdir``; :class:`ProcessSupervisor` starts them (logging to
``<workdir>/logs``, a fresh log per start: the previous one moves to ``NAME.log.1``), waits for
readiness (a condition that probes the process itself, never its log) (restarting a SuperNode that exits before it registers),
and stops whole process groups and every descendant found, so nothing strays. :func:`strays` and
:func:`reap_strays` find and kill what a killed owner left behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

SUPERNODE_START_ATTEMPTS = 3
"""A SuperNode that exits before registering is started again, up to this many attempts in all:
under load Flower 1.42's SuperNode gives up activation after a refused attempt (exit code 305)."""


class FederationError(RuntimeError):
    """The federation could not start, or its state file is missing or unreadable."""


class PlatformFault(FederationError):
    """The platform's own federation failed (it could not start, or its SuperLink, template or
    SuperNodes died): the round failed through no fault of its participants, and says so."""


@dataclass
class ProcessInfo:
    """One process the federation started (its own session: pgid == pid)."""

    role: str
    name: str
    pid: int
    log: str


def bin_dir() -> Path:
    return Path(sys.executable).parent


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def ports_needed(n_nodes: int) -> int:
    """Ports a local federation of ``n_nodes`` takes from its ``superlink_port`` on: the Control
    API, one per SuperNode and the Fleet API."""
    return n_nodes + 2


def free_port_block(n: int, start: int = 9600, stop: int = 30000) -> int:
    """The first port p ≥ start with p..p+n-1 all free (for tests and temporary federations)."""
    p = start
    while p + n < stop:
        if all(port_free(q) for q in range(p, p + n)):
            return p
        p += n
    raise FederationError(f"no block of {n} free ports in {start}..{stop}")


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state letter, parent pid) of a process, or None when it does not exist."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    rest = raw[raw.rfind(")") + 2 :].split()
    return rest[0], int(rest[1])


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    st = _proc_stat(pid)
    return st is not None and st[0] not in ("Z", "X")


def descendants(pids: Sequence[int]) -> set[int]:
    """Every live process below ``pids`` in the parent tree (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            st = _proc_stat(int(entry.name))
            if st is not None:
                children.setdefault(st[1], []).append(int(entry.name))
    out: set[int] = set()
    stack = list(pids)
    while stack:
        for c in children.get(stack.pop(), []):
            if c not in out:
                out.add(c)
                stack.append(c)
    return out


FEDERATION_MARKERS = (
    b"flower-superlink",
    b"flower-supernode",
    b"flower-superexec",
    b"flwr",
    b"mots.training",
)
"""What a federation process's command line holds (SuperLink, SuperNodes, their SuperExecs,
ServerApps, trainers, warm nodes and their template)."""


def strays(workdir: Path) -> list[int]:
    """Live federation processes (not this one) whose working directory is ``workdir`` or below
    it: a federation's SuperLink, SuperNodes, trainers and ServerApps all run there
    (:meth:`ProcessSupervisor._spawn`); other processes there are never counted."""
    root = str(Path(workdir).resolve())
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        inside = cwd == root or cwd.startswith(root + os.sep)
        if inside and any(m in cmdline for m in FEDERATION_MARKERS) and alive(int(entry.name)):
            out.append(int(entry.name))
    return sorted(out)


def reap_strays(workdir: Path, timeout: float = 10.0) -> list[int]:
    """SIGKILL a previous federation's processes left in ``workdir`` (its owner was killed before
    it could stop them: they run in their own sessions, so they outlive it and hold its ports);
    returns the pids killed, once they are gone."""
    killed = strays(workdir)
    for pid in killed:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(alive(p) for p in killed):
        time.sleep(0.05)
    return killed


def rotate_log(log: Path) -> Path:
    """Move ``log`` (a previous start's) to ``log.1``, replacing an older one, and return ``log``:
    every start writes a log of its own, so nothing a previous run wrote is read as this one's
    (issue 40: a restarted federation found the last run's lines and went on too early)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    if log.exists():
        log.replace(log.with_name(log.name + ".1"))
    return log


def unix_socket_accepts(path: Path) -> bool:
    """True when a server accepts connections on the Unix socket ``path`` (the connection is
    closed at once; a warm-fork template takes an empty one for the probe it is)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        try:
            s.connect(str(path))
        except OSError:
            return False
    return True


def rss_mb(pid: int) -> float:
    """Resident memory of a process in MiB (0 when gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0.0


class ProcessSupervisor:
    """Processes started under ``workdir``, each in its own session, logged to ``workdir/logs``.

    :meth:`_spawn` starts one (and remembers how, to restart it), :meth:`_wait` waits for a
    condition while watching them, :meth:`stop` ends them all. Subclasses persist their state in
    :meth:`_save` (called after every start).
    """

    def __init__(self, workdir: Path, start_timeout: float) -> None:
        self.workdir = workdir
        self.start_timeout = start_timeout
        self.processes: list[ProcessInfo] = []
        self._popen: dict[int, subprocess.Popen[bytes]] = {}
        self._launch: dict[str, tuple[str, list[str], Path]] = {}
        self._attempts: dict[str, int] = {}

    def _save(self) -> None:
        """Persist the state (nothing here)."""

    def _env(self, flwr_home: Path) -> dict[str, str]:
        env = dict(os.environ)
        env["PATH"] = f"{bin_dir()}{os.pathsep}{env.get('PATH', '')}"
        env["FLWR_HOME"] = str(flwr_home)
        env.setdefault("FLWR_TELEMETRY_ENABLED", "0")
        env["OMP_NUM_THREADS"] = "1"
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def _spawn(self, role: str, name: str, argv: list[str], flwr_home: Path) -> ProcessInfo:
        log = rotate_log(self.workdir / "logs" / f"{name}.log")
        flwr_home.mkdir(parents=True, exist_ok=True)
        self._launch[name] = (role, argv, flwr_home)
        self._attempts[name] = self._attempts.get(name, 0) + 1
        with log.open("wb") as f:
            proc = subprocess.Popen(
                argv,
                stdout=f,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self._env(flwr_home),
                cwd=self.workdir,
                start_new_session=True,
            )
        info = ProcessInfo(role, name, proc.pid, str(log))
        self._popen[proc.pid] = proc
        self.processes.append(info)
        self._save()
        return info

    def _wait(
        self, ready: Callable[[], bool], what: str, watch: Sequence[str] | None = None
    ) -> None:
        """Wait until ``ready()``; restart a SuperNode that exits before registering (up to
        SUPERNODE_START_ATTEMPTS), fail when another process dies. ``watch`` limits the processes
        looked at to these names (default: all)."""
        deadline = time.monotonic() + self.start_timeout
        while not ready():
            dead = [
                p for p in self.processes if not alive(p.pid) and (watch is None or p.name in watch)
            ]
            retry = [
                p
                for p in dead
                if p.role == "supernode"
                and self._attempts.get(p.name, 0) < SUPERNODE_START_ATTEMPTS
                and "SuperNode ID" not in Path(p.log).read_text(errors="replace")
            ]
            for p in retry:
                self.processes.remove(p)
                self._popen.pop(p.pid, None)
                role, argv, home = self._launch[p.name]
                self._spawn(role, p.name, argv, home)
            dead = [p for p in dead if p not in retry]
            if dead:
                tail = Path(dead[0].log).read_text(errors="replace")[-1500:]
                raise FederationError(
                    f"{dead[0].name} (pid {dead[0].pid}) exited while waiting for {what}:\n{tail}"
                )
            if time.monotonic() > deadline:
                raise FederationError(
                    f"timed out after {self.start_timeout:.0f}s waiting for {what}"
                )
            time.sleep(0.3)

    def stop(self, timeout: float = 15.0) -> list[int]:
        """SIGTERM every process group and descendant, SIGKILL what remains; return survivors."""
        roots = [p.pid for p in self.processes]
        targets = set(roots) | descendants(roots)
        for pid in roots:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGTERM)
        for pid in targets:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._reap()
            targets |= descendants([p for p in targets if alive(p)])
            if not any(alive(p) for p in targets):
                break
            time.sleep(0.2)
        for pid in [p for p in targets if alive(p)]:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        for pid in roots:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline and any(alive(p) for p in targets):
            self._reap()
            time.sleep(0.1)
        self._reap()
        survivors = sorted(p for p in targets if alive(p))
        if not survivors:
            self.processes = []
        return survivors

    def _reap(self) -> None:
        for pid, proc in list(self._popen.items()):
            if proc.poll() is not None:
                del self._popen[pid]

    def all_pids(self) -> set[int]:
        """Our processes and all their live descendants."""
        roots = [p.pid for p in self.processes]
        return {p for p in roots if alive(p)} | descendants(roots)
