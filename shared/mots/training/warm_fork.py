"""Many warm nodes on one host: a template process that has imported Flower, torch and the
ClientApp once forks every node of a local federation.

A warm node (:mod:`mots.training.warm_node`) spends about 6 CPU-seconds importing Flower's
SuperNode and torch before its first task. On an edge device that is paid once per boot; a local
federation (``make demo``, the platform's own federation, tests) starts 20 of them on the same
cores, 120 CPU-seconds, most of ``make demo``'s time. With ``LocalFederation(fork=True)`` the
federation starts one **template** (``python -m mots.training.warm_fork --socket PATH``): it
imports what a node needs and waits, single-threaded, on a Unix socket (mode 600, in a 700
directory). Each node is still started as its own command (``python -m mots.training.warm_fork
--socket PATH --node ARGS``: a small **stub** that imports nothing heavy), so the
federation's process supervision (logs, restarts, SIGTERM/SIGKILL, strays) is unchanged: the stub
hands the template its argv, working directory, environment and its stdin/stdout/stderr (file
descriptors over the socket); the template forks; the child makes its own session, takes those
descriptors, directory and environment, and runs :func:`mots.training.warm_node.main` (its
SuperExec secret, TLS contexts and Flower state are all made after the fork, per node). The stub
forwards SIGTERM, SIGINT and SIGHUP to its node and exits with the node's exit code; the node
SIGKILLs itself when its stub goes away (a SIGKILLed stub is a SIGKILLed node).

What is shared is what a cold start reads from the same files: imported modules, copy-on-write.
Random state that a fork would copy is reseeded: Python's ``random`` (by CPython at fork) and
NumPy's legacy global generator here (torch's default generator has a fixed seed in every fresh
process, so a copy is what a cold start has). An edge device runs its one node cold; this is for
hosts that run many.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import socket
import struct
import sys
import threading
import traceback
from pathlib import Path
from typing import Any

READY_LINE = "warm fork template: ready"
_MAX_REQUEST = 1 << 20


def socket_path() -> Path:
    """A new template's socket, in a fresh private directory (short: a Unix socket's path is at
    most 107 bytes, and federations' work directories can be long)."""
    import tempfile

    return Path(tempfile.mkdtemp(prefix="mots-fork-")) / "template.sock"


def stub(path: str, argv: list[str]) -> int:
    """The node's own command: have the template fork the node, relay signals to it, return its
    exit code (1 when it ended without one, e.g. killed)."""
    payload = json.dumps({"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(path)
    socket.send_fds(conn, [struct.pack("!I", len(payload)) + payload], [0, 1, 2])
    replies = conn.makefile("rb")
    first = replies.readline()
    if not first:
        return 1
    pid = int(json.loads(first)["pid"])
    (Path(path).parent / f"{os.getpid()}.pid").write_text(str(pid))

    def relay(signum: int, _frame: Any) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, relay)
    last = replies.readline()
    return int(json.loads(last)["exit"]) if last else 1


def forked_pid(socket_path: Path, stub_pid: int) -> int | None:
    """The node a stub had forked (for memory accounting), when it did."""
    try:
        return int((socket_path.parent / f"{stub_pid}.pid").read_text())
    except (FileNotFoundError, ValueError):
        return None


class Probe(Exception):
    """A connection that sent nothing and closed: a readiness probe
    (:func:`mots.training.processes.unix_socket_accepts`), not a request."""


def _recv_request(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    data, fds, _flags, _addr = socket.recv_fds(conn, 65536, 3)
    if not data and not fds:
        raise Probe
    if len(data) < 4 or len(fds) != 3:
        for fd in fds:
            os.close(fd)
        raise ValueError("bad request: a length and three descriptors expected")
    (size,) = struct.unpack("!I", data[:4])
    if size > _MAX_REQUEST:
        raise ValueError("bad request: too long")
    body = bytearray(data[4:])
    while len(body) < size:
        chunk = conn.recv(size - len(body))
        if not chunk:
            raise ValueError("bad request: cut short")
        body.extend(chunk)
    return json.loads(bytes(body)), list(fds)


def _die_with_stub(conn: socket.socket) -> None:
    """The node's watch: its stub closed the connection (it exited or was killed)."""
    with contextlib.suppress(OSError):
        while conn.recv(1):
            pass
    os.kill(os.getpid(), signal.SIGKILL)


def _child(conn: socket.socket, request: dict[str, Any], fds: list[int]) -> None:
    """In the forked process: become the node the stub asked for; never returns."""
    code = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.setsid()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update({str(k): str(v) for k, v in request["env"].items()})
        _reseed()
        conn.sendall(json.dumps({"pid": os.getpid()}).encode() + b"\n")
        threading.Thread(target=_die_with_stub, args=(conn,), daemon=True).start()
        from mots.training import warm_node

        warm_node.main([str(a) for a in request["argv"]])
        code = 0
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
        if not isinstance(done.code, int | None):
            print(done.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(BaseException):
            atexit._run_exitfuncs()
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        with contextlib.suppress(OSError):
            conn.sendall(json.dumps({"exit": code}).encode() + b"\n")
        os._exit(code)


def _reseed() -> None:
    """Give the node fresh NumPy global randomness (Python's ``random`` CPython reseeds)."""
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed(int.from_bytes(os.urandom(4), "little"))


def serve(path: Path) -> None:
    """Import what a node needs, then fork a node per request on ``path`` until terminated."""
    import flwr.supernode.cli  # noqa: F401 - the SuperNode's own imports

    from mots.training import warm_node

    warm_node.preload()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.parent.chmod(0o700)
    path.unlink(missing_ok=True)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    path.chmod(0o600)
    server.listen(64)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # nodes are reaped by the kernel
    print(READY_LINE, flush=True)
    while True:
        conn, _ = server.accept()
        try:
            request, fds = _recv_request(conn)
        except Probe:
            conn.close()
            continue
        except (OSError, ValueError) as err:
            print(f"warm fork template: refused a request: {err}", file=sys.stderr, flush=True)
            conn.close()
            continue
        if threading.active_count() != 1:  # forking a threaded process copies held locks
            raise RuntimeError("the template must stay single-threaded to fork")
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            server.close()
            _child(conn, request, fds)
        conn.close()
        for fd in fds:
            os.close(fd)


def main(argv: list[str] | None = None) -> None:
    """``python -m mots.training.warm_fork --socket PATH`` (the template) or
    ``python -m mots.training.warm_fork --socket PATH --node WARM_NODE_ARGS...`` (a node's stub)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2 or args[0] != "--socket":
        raise SystemExit("usage: python -m mots.training.warm_fork --socket PATH [--node ARGS...]")
    path, rest = Path(args[1]).resolve(), args[2:]
    if rest[:1] == ["--node"]:
        raise SystemExit(stub(str(path), rest[1:]))
    if rest:
        raise SystemExit(f"unexpected arguments: {rest}")
    serve(path)


if __name__ == "__main__":
    main()
