"""The compose deployment's way in (issue 39, item 5) and its shipped training settings (item 8):
the TLS front is the only port published beyond loopback and serves the Ingress's names over TLS
only; the checker of tests/containers/https.py tells HTTPS with the CA from everything else (run
against a local TLS server); and the `https` part of `make deploy-test` (marked ``deploy``: the
whole compose stack as shipped and a round on it, about 10 minutes)."""

from __future__ import annotations

import ipaddress
import re
import socket
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from mots.training.pki import make_tls
from tests.containers import compose, https, podman, report
from tests.containers.base import ROOT, base_image
from tests.containers.conftest import require_base

TEMPLATE = ROOT / "docker/front/mots.conf.template"
INGRESS = ROOT / "k8s/overlays/k3s-pi/ingress.yaml"


@pytest.fixture(scope="module")
def services() -> dict[str, Any]:
    return dict(yaml.safe_load((ROOT / "docker/compose.yaml").read_text())["services"])


def test_only_the_front_is_published_beyond_loopback(services: dict[str, Any]) -> None:
    """Every other published port is bound to 127.0.0.1 (the operator on the host); the front
    publishes its TLS port on every address, and nothing else of the front."""
    wide = {
        name: [str(p) for p in svc.get("ports", []) if not str(p).startswith("127.0.0.1:")]
        for name, svc in services.items()
    }
    assert {n: p for n, p in wide.items() if p} == {"front": ["${MOTS_HTTPS_PORT:-443}:8443"]}


def test_the_front_serves_the_ingress_names_over_tls_only(services: dict[str, Any]) -> None:
    """The template's names are the Ingress's (and https.HOSTS, what the check asks for); every
    listener outside the container's loopback speaks TLS; each name proxies to its service."""
    text = TEMPLATE.read_text()
    names = set(re.findall(r"server_name\s+([^;]+);", text))
    ingress = yaml.safe_load(INGRESS.read_text())
    assert names == {r["host"] for r in ingress["spec"]["rules"]} == set(https.HOSTS.values())
    listens = re.findall(r"listen\s+([^;]+);", text)
    assert listens and all(
        re.fullmatch(r"8443 ssl( default_server)?", x) or x.startswith("127.0.0.1:")
        for x in listens
    ), listens
    for service, name in https.HOSTS.items():
        block = text.split(f"server_name {name};")[1].split("}")[0]
        assert re.search(rf"http://{service}:\d+;", block), name
    front = services["front"]
    assert front["networks"]["front"]["ipv4_address"] in str(
        services["market"]["environment"]["MOTS_TRUSTED_PROXIES"]
    )
    for service in https.HOSTS:
        assert "front" in services[service]["networks"], service
    # nginx asks its resolvers in turn: only the network's own DNS (its gateway) knows the
    # services (the first run here answered the orchestration 502, "could not be resolved")
    networks = yaml.safe_load((ROOT / "docker/compose.yaml").read_text())["networks"]
    (subnet,) = [c["subnet"] for c in networks["front"]["ipam"]["config"]]
    assert front["dns"] == [str(next(ipaddress.ip_network(subnet).hosts()))]


def test_the_shipped_check_would_see_an_override() -> None:
    """The `https` part runs docker/compose.yaml alone; the compose round's override changes
    the training settings, so a run with it would not read as the shipped ones."""
    assert https.SHIPPED == (ROOT / "docker/compose.yaml",)
    override = yaml.safe_load(compose.FILES[1].read_text())["x-small-round"]
    shipped = https.shipped_settings()
    assert {k: v for k, v in override.items() if k in shipped} != {
        k: shipped[k] for k in override if k in shipped
    }


class _Ok(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """A local HTTPS server with a certificate for the market's name from a fresh CA."""
    files = make_tls(tmp_path, [https.HOSTS["market"]])
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(files.server_cert, files.server_key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1]), files.ca_cert
    finally:
        server.shutdown()
        server.server_close()


def test_the_checker_tells_https_with_the_ca_from_the_rest(tls_server: tuple[int, Path]) -> None:
    """With the CA: 200; without it, or as another name: the handshake fails; plain HTTP to
    the TLS port gets no 200; a closed port reads as refused."""
    port, ca = tls_server
    market = https.HOSTS["market"]
    assert https.https_get("127.0.0.1", port, market, "/healthz", ca)[0] == 200
    assert https.handshake_error("127.0.0.1", port, market, ca) is None
    assert https.handshake_error("127.0.0.1", port, market, None) is not None
    assert https.handshake_error("127.0.0.1", port, "nobody.example.org", ca) is not None
    assert https.plain_get("127.0.0.1", port, market) != 200
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    assert https.plain_get("127.0.0.1", closed, market) == "refused"


@pytest.mark.deploy
@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_the_market_over_https_and_a_round_on_the_shipped_settings(runtime: None) -> None:
    require_base(base_image("amd64"))
    try:
        got = https.run()
    except Exception as exc:
        report.write_part("https", {"error": f"{type(exc).__name__}: {exc}"[:2000]})
        raise
    report.write_part("https", got)
    assert podman.leftovers([compose.PROJECT]) == {k: [] for k in podman.KINDS}
    assert got["ok"] and got["plain_refused"], got
    assert got["shipped_round"]["ok"], got["shipped_round"]
