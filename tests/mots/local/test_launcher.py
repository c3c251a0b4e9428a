"""The launcher's ports: never handed out twice, and a port served by another process is an
error at start, not a service that answers for another (the 405 seen once from a benchmark's
market port)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mots.local.launcher import Process, Stack, free_port

SERVE_AS = """
import json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
class H(BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"status": "ok", "service": sys.argv[2]}).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body)))
        self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def test_free_port_never_hands_out_a_port_twice() -> None:
    ports = [free_port() for _ in range(300)]
    assert len(set(ports)) == len(ports)


def test_free_port_is_below_the_ephemeral_range() -> None:
    """Outgoing connections take ports from the ephemeral range: a port picked there could be
    taken between the pick and the server's bind."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    assert all(9600 < free_port() < low for _ in range(50))


def _serve_as(stack: Stack, name: str, answers_as: str, log: Path) -> None:
    port = free_port()
    popen = subprocess.Popen(
        [sys.executable, "-c", SERVE_AS, str(port), answers_as], start_new_session=True
    )
    stack.processes.append(
        Process(name, popen, log, f"http://127.0.0.1:{port}/healthz", log.open("ab"))
    )


@pytest.mark.integration
def test_a_port_answered_by_another_service_is_an_error(tmp_path: Path) -> None:
    stack = Stack(workdir=tmp_path)
    _serve_as(stack, "market-api", "pricing", tmp_path / "market.log")
    try:
        with pytest.raises(RuntimeError, match="answers as 'pricing', not 'market'"):
            stack.wait_ready(20)
    finally:
        stack.stop()


@pytest.mark.integration
def test_a_port_answered_by_its_own_service_is_ready(tmp_path: Path) -> None:
    stack = Stack(workdir=tmp_path)
    _serve_as(stack, "market-api", "market", tmp_path / "market.log")
    try:
        stack.wait_ready(20)
    finally:
        stack.stop()


def test_each_start_writes_fresh_logs_and_tells_the_market_where_rounds_are(
    tmp_path: Path,
) -> None:
    """Issue 40: a start moves the previous start's logs to NAME.log.1 (nothing a past run wrote
    is read as this one's), and the market's environment names the orchestration's URL, whose
    port is chosen before any process starts."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "market-api.log").write_text("the previous start\n")
    stack = Stack(workdir=tmp_path)
    stack._fresh_logs(("market", "evaluation"))
    assert (logs / "market-api.log.1").read_text() == "the previous start\n"
    assert not (logs / "market-api.log").exists()
    stack._choose_api_ports(("market", "orchestration", "evaluation"))
    assert set(stack.ports) == {"market", "orchestration"}
    url = stack.env("market")["MOTS_ORCHESTRATION_PUBLIC_URL"]
    assert url == stack.url("orchestration")
    assert "MOTS_ORCHESTRATION_PUBLIC_URL" not in stack.env("pricing")
