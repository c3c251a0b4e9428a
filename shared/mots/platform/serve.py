"""Several processes of one API on one port, each with a listening socket of its own
(``SO_REUSEPORT``), so that the kernel spreads the connections over them.

``uvicorn --workers`` shares one listening socket: whichever worker wakes first accepts every
connection waiting, so a client that opens its keep-alive connections at once (a load generator,
a proxy's pool) lands them all on one process and the others idle (``make bench-scale`` at
N = 10,000, two workers: 5.3 CPU-seconds of declarations in one, 0.02 in the other). With a socket
each, Linux hashes every new connection to one of them.

    python -m mots.platform.serve services.market.main:create_app --port 8000 --workers 2

One process (``--workers 1``) serves alone; more start that many children of this one, which
forwards SIGTERM and SIGINT to them and exits when they have. Each child finds how many processes
serve beside it in ``MOTS_API_PROCESSES``, so that it can size what they share (the market sizes
its database batch writers by it: :attr:`services.market.core.config.Settings.purchase_writer_count`).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
from types import FrameType

import uvicorn

PROCESSES_ENV = "MOTS_API_PROCESSES"
"""How many processes serve the app on this host, set in each child's environment."""


def reuse_port_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` that other processes may bind too (SO_REUSEPORT)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.set_inheritable(True)
    return sock


def serve_one(app: str, host: str, port: int, log_level: str) -> None:
    """Serve the app factory ``app`` on a socket of this process's own."""
    config = uvicorn.Config(
        app,
        factory=True,
        host=host,
        port=port,
        access_log=False,
        log_level=log_level,
        proxy_headers=False,  # the peer is the socket's: MOTS_TRUSTED_PROXIES decides the rest
    )
    uvicorn.Server(config).run(sockets=[reuse_port_socket(host, port)])


def supervise(argv: list[str], workers: int) -> int:
    """Start ``workers`` single-process servers; forward SIGTERM/SIGINT; the worst exit code (a
    child that uvicorn ended with the signal forwarded to it, as it re-raises it, ended cleanly)."""
    env = os.environ | {PROCESSES_ENV: str(workers)}
    children = [
        subprocess.Popen(
            [sys.executable, "-m", "mots.platform.serve", *argv, "--workers", "1"], env=env
        )
        for _ in range(workers)
    ]

    forwarded: set[int] = set()

    def forward(signum: int, _: FrameType | None) -> None:
        forwarded.add(signum)
        for child in children:
            if child.poll() is None:
                child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    codes = [child.wait() for child in children]
    codes = [0 if -c in forwarded else c for c in codes]
    return max(codes, key=abs, default=0)


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and serve (one process) or supervise (several)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("app", help="the app factory, module:function")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--workers", type=int, default=1, help="processes, one socket each")
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error("--workers: at least 1")
    if args.workers == 1:
        serve_one(args.app, args.host, args.port, args.log_level)
        return 0
    shared = [args.app, "--host", args.host, "--port", str(args.port)]
    return supervise([*shared, "--log-level", args.log_level], args.workers)


if __name__ == "__main__":
    raise SystemExit(main())
