"""Flower 1.42's SuperLink with its Fleet API on a port of its own.

Flower 1.42 serves the Fleet API (SuperNodes), the Control API (``flwr run``, node registration)
and the Runtime API (the ServerApp) from one HTTP app on one port. Whoever reaches the Control
API can register a SuperNode key or start a run, and whoever reaches the Runtime API can act as
the ServerApp, so the edge must reach neither. This launcher builds the same Flower app and
serves it twice, with the same TLS certificate: on ``--host``/``--port`` everything (the
orchestration and the SuperLink's own SuperExec use it; a network policy admits only them), and
on ``--fleet-host``/``--fleet-port`` only the Fleet API's paths and ``/health`` (what the
SuperNodes reach). Every other argument is Flower's own (``flower-superlink --help``).

TLS material: ``--tls-dir DIR`` uses ``DIR/{ca.crt,server.crt,server.key}``, copied from
``--tls-from`` (a mounted Secret) when that holds them, else made there on first start for the
``--tls-host`` names (kept on the state volume, so later starts reuse them); ``--publish-ca PATH``
copies the CA certificate where the orchestration and the SuperNodes read it. ``--ssl-*`` may
instead be given as Flower's own arguments.

Run: ``python -m mots.training.superlink --fleet-port 9092 --port 9093 --tls-dir DIR
--tls-host superlink-fleet --enable-supernode-auth``.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

FLEET_PREFIX = "/v1/fleet/"
OPEN_PATHS = frozenset({"/health"})


def fleet_path(path: str) -> bool:
    """True for the paths the Fleet port serves: the Fleet API and the health check."""
    return path.startswith(FLEET_PREFIX) or path in OPEN_PATHS


class FleetOnly:
    """ASGI wrapper answering 404 to every path but the Fleet API's (and ``/health``)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass Fleet requests through; refuse the rest without touching the app."""
        if scope["type"] == "http" and not fleet_path(str(scope.get("path", ""))):
            body = json.dumps(
                {"detail": "not served on the Fleet port (Control and Runtime APIs are internal)"}
            ).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 404,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        if scope["type"] not in ("http", "lifespan"):
            return  # no websockets on the Fleet port
        await self.app(scope, receive, send)


def split_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """(our options, Flower's arguments) of the command line."""
    p = argparse.ArgumentParser(
        description="Flower SuperLink with the Fleet API on its own port", add_help=False
    )
    p.add_argument("--fleet-host", default="0.0.0.0", help="where the SuperNodes connect")
    p.add_argument("--fleet-port", type=int, required=True, help="the Fleet API's own port")
    p.add_argument("--tls-dir", type=Path, help="ca.crt, server.crt, server.key (made if absent)")
    p.add_argument("--tls-from", type=Path, help="a directory (Secret) to take them from")
    p.add_argument("--tls-host", action="append", default=[], help="a name in the certificate")
    p.add_argument("--publish-ca", type=Path, action="append", default=[], help="copy ca.crt here")
    ours, rest = p.parse_known_args(argv)
    if not 1 <= ours.fleet_port <= 65535:
        raise SystemExit(f"--fleet-port must lie in 1..65535, got {ours.fleet_port}")
    if not any(a == "--port" or a.startswith("--port=") for a in rest):
        raise SystemExit("--port (the Control and Runtime APIs' port) is required")
    if ours.tls_dir is not None:
        rest += tls_args(ours.tls_dir, ours.tls_from, ours.tls_host, ours.publish_ca)
    return ours, rest


def tls_args(
    directory: Path, source: Path | None, hosts: list[str], publish: list[Path]
) -> list[str]:
    """Flower's ``--ssl-*`` arguments for the TLS files in ``directory``: copied from ``source``
    when it holds them (Secret keys ``ca.crt``, ``tls.crt``/``server.crt``, ``tls.key``/
    ``server.key``), else kept or made there; the CA certificate copied to each ``publish`` path."""
    from mots.training.pki import TlsFiles, ensure_tls, write_private

    files = TlsFiles(directory / "ca.crt", directory / "server.crt", directory / "server.key")
    if source is not None and (source / "ca.crt").is_file():
        directory.mkdir(parents=True, exist_ok=True)
        for names, target in (
            (("ca.crt",), files.ca_cert),
            (("tls.crt", "server.crt"), files.server_cert),
            (("tls.key", "server.key"), files.server_key),
        ):
            found = next((source / n for n in names if (source / n).is_file()), None)
            if found is None:
                raise SystemExit(f"--tls-from {source}: {' or '.join(names)} is missing")
            if target == files.server_key:
                write_private(target, found.read_bytes())
            else:
                target.write_bytes(found.read_bytes())
    else:
        files = ensure_tls(directory, [*hosts, "localhost", "127.0.0.1"])
    for path in publish:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(files.ca_cert.read_bytes())
        tmp.replace(path)
    return files.superlink_args()


def main(argv: list[str] | None = None) -> None:
    """Start the SuperLink: Control + Runtime on ``--port``, Fleet alone on ``--fleet-port``."""
    import uvicorn
    from flwr.superlink.cli.flower_superlink import (
        SuperLinkLifespan,
        _parse_superlink_lifespan_config,
    )
    from flwr.superlink.main import create_app

    ours, rest = split_args(list(sys.argv[1:] if argv is None else argv))
    sys.argv = ["flower-superlink", *rest]
    config = _parse_superlink_lifespan_config()
    if int(config.port) == ours.fleet_port:
        raise SystemExit("--fleet-port must differ from --port")
    app = create_app(config, SuperLinkLifespan)
    tls: dict[str, Any] = {"ssl_keyfile": config.ssl_keyfile, "ssl_certfile": config.ssl_certfile}
    fleet = uvicorn.Server(
        uvicorn.Config(
            FleetOnly(app),
            host=ours.fleet_host,
            port=ours.fleet_port,
            lifespan="off",
            access_log=False,
            log_level="warning",
            **tls,
        )
    )
    control = uvicorn.Server(
        uvicorn.Config(
            app, host=config.host, port=config.port, lifespan="on", access_log=False, **tls
        )
    )
    thread = threading.Thread(target=fleet.run, name="fleet-api", daemon=True)
    thread.start()
    try:
        control.run()  # the main thread: receives SIGTERM/SIGINT
    finally:
        fleet.should_exit = True
        thread.join(timeout=5.0)


if __name__ == "__main__":
    main()
