"""A worker's /metrics endpoint binds the interface MOTS_METRICS_HOST names."""

from __future__ import annotations

import socket
import urllib.request
from pathlib import Path

import pytest

from mots.platform.metrics import serve_worker_metrics
from mots.platform.settings import PlatformSettings


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _listen_address(port: int) -> str:
    """The local IPv4 address of the socket listening on ``port`` (from /proc/net/tcp)."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, _, state = line.split()[1:4]
        hex_ip, hex_port = local.split(":")
        if int(hex_port, 16) == port and state == "0A":  # 0A = LISTEN
            raw = bytes.fromhex(hex_ip)[::-1]
            return socket.inet_ntoa(raw)
    raise AssertionError(f"nothing listens on port {port}")


def test_default_is_loopback_for_the_local_demo(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unset, the endpoint stays on 127.0.0.1; the variable changes it."""
    monkeypatch.delenv("MOTS_METRICS_HOST", raising=False)
    assert PlatformSettings().metrics_host == "127.0.0.1"
    monkeypatch.setenv("MOTS_METRICS_HOST", "0.0.0.0")
    assert PlatformSettings().metrics_host == "0.0.0.0"


@pytest.mark.parametrize(("host", "env"), [("0.0.0.0", None), (None, "0.0.0.0"), (None, None)])
def test_endpoint_binds_the_configured_interface(
    host: str | None, env: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An explicit host, else MOTS_METRICS_HOST, else 127.0.0.1 is the listening address."""
    if env is None:
        monkeypatch.delenv("MOTS_METRICS_HOST", raising=False)
    else:
        monkeypatch.setenv("MOTS_METRICS_HOST", env)
    port = _free_port()
    server = serve_worker_metrics(port, host)
    assert server is not None
    try:
        expected = host or env or "127.0.0.1"
        assert _listen_address(port) == expected
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
            assert reply.status == 200
            assert b"# HELP" in reply.read()
    finally:
        server.shutdown()
        server.server_close()


def test_port_zero_serves_nothing() -> None:
    """MOTS_METRICS_PORT=0 (the APIs) starts no server."""
    assert serve_worker_metrics(0, "0.0.0.0") is None


def test_an_api_with_a_metrics_port_serves_metrics_only_there() -> None:
    """MOTS_METRICS_PORT set on an API: /metrics answers on that port (Prometheus's), not on the
    API's port (its clients'), while the app runs; unset, on the API's port."""
    from fastapi.testclient import TestClient

    from mots.local.launcher import free_port
    from mots.platform.settings import PlatformSettings
    from mots.platform.web import service_app

    port = free_port()
    app = service_app("demo", "A demonstration.", PlatformSettings(metrics_port=port), [])
    with TestClient(app) as client:
        assert client.get("/metrics").status_code == 404
        assert client.get("/healthz").status_code == 200
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
            assert reply.status == 200 and b"mots_http_requests_total" in reply.read()
    plain = service_app("demo", "A demonstration.", PlatformSettings(), [])
    with TestClient(plain) as client:
        assert client.get("/metrics").status_code == 200
