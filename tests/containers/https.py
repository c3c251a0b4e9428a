"""The way in and the shipped settings (issue 39, items 5 and 8; the `https` part of `make
deploy-test`): docker/compose.yaml as shipped, alone (no override: the orchestration's training
settings are the file's, 5 FedAvg rounds of 20 local steps at lr 0.5), its TLS front (service
`front`, nginx; here Debian's nginx built locally, tests/containers/standins/nginx) serving the
deployment's certificate, made as docs/deploy.md says with `python -m mots.training.pki tls`.

Reached the way another machine on the host's network would, at the host's own address (not
127.0.0.1), by host name (TLS SNI and Host, as DNS would send it there):

- ``ok``: the market's /healthz and the operator's /v1/ledger/check, and the orchestration's
  /healthz, answer 200 over HTTPS verified against the deployment's CA; the same handshake
  without that CA (the system's trust store) fails, and a name the front does not serve gets no
  certificate.
- ``plain_refused``: plain HTTP to the front's port is answered 400 by nginx (no service reached)
  and every service port compose publishes on loopback (market, orchestration, Prometheus,
  SuperLink, Alertmanager) refuses the connection at the host's address.

Then a market round runs on the shipped training settings (``shipped_round``), read back from the
training worker's container as it ran. Grafana has no stand-in (tests/containers/compose.py), so
its route is not checked here: the front answers 502 for it and starts without it.
"""

from __future__ import annotations

import http.client
import json
import shutil
import socket
import ssl
import time
from pathlib import Path
from typing import Any

from mots.training.pki import make_tls
from tests.containers import compose, images, podman, standins
from tests.docker.images import IMAGES

HOSTS = {
    "market": "market.mots.example.org",
    "orchestration": "orchestration.mots.example.org",
    "grafana": "grafana.mots.example.org",
}
"""The names docker/front/mots.conf.template serves (the same as the k3s Ingress's)."""
TLS_DIR = compose.SECRETS / "tls"
SHIPPED = (compose.FILES[0],)  # docker/compose.yaml alone: nothing of the file overridden
TRAINING_KEYS = ("MOTS_TRAIN_ROUNDS", "MOTS_TRAIN_LOCAL_STEPS", "MOTS_TRAIN_LR",
                 "MOTS_TRAIN_BATCH_SIZE", "MOTS_TRAIN_TEST_SUBSET", "MOTS_COLLECT_TIMEOUT_S")  # fmt: skip


def host_address() -> str:
    """This host's address on its network (the one other machines reach it by), not loopback:
    the source address of its default route (a UDP connect sends nothing)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("198.51.100.1", 9))  # TEST-NET-2: only the route is looked up
        address = str(s.getsockname()[0])
    if address.startswith("127."):
        raise RuntimeError("no address but loopback: the check needs the host's own address")
    return address


def free_port() -> int:
    """A TCP port free on every address now (the front's published port for the run)."""
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        return int(s.getsockname()[1])


def https_get(
    address: str, port: int, name: str, path: str, ca: Path | None,
    headers: dict[str, str] | None = None,
) -> tuple[int, bytes]:  # fmt: skip
    """GET ``path`` over TLS from ``address:port`` as ``https://name:port`` (SNI and Host
    ``name``), the certificate verified against ``ca`` (None: the system's trust store);
    (status, body). A failed handshake raises ssl.SSLError."""
    context = ssl.create_default_context(cafile=str(ca) if ca else None)
    with (
        socket.create_connection((address, port), timeout=15) as raw,
        context.wrap_socket(raw, server_hostname=name) as tls,
    ):
        conn = http.client.HTTPConnection(name, port, timeout=15)
        conn.sock = tls
        conn.request("GET", path, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read()


def plain_get(address: str, port: int, name: str, path: str = "/healthz") -> int | str:
    """GET over plain HTTP: the status, or ``"refused"`` when nothing accepts the connection,
    or the error's name when the connection is cut."""
    conn = http.client.HTTPConnection(address, port, timeout=10)
    try:
        conn.request("GET", path, headers={"Host": name})
        return conn.getresponse().status
    except ConnectionRefusedError:
        return "refused"
    except (OSError, http.client.HTTPException) as exc:
        return type(exc).__name__
    finally:
        conn.close()


def handshake_error(address: str, port: int, name: str, ca: Path | None) -> str | None:
    """Why a verified TLS handshake as ``name`` fails (None when it succeeds)."""
    try:
        https_get(address, port, name, "/healthz", ca)
    except (ssl.SSLError, ConnectionError) as exc:
        return f"{type(exc).__name__}: {exc}"[:200]
    return None


def check(address: str, port: int, ca: Path, operator_token: str) -> dict[str, Any]:
    """The way in, seen from ``address``: what answered over HTTPS with the CA, what failed
    without it, and what plain HTTP got; ``ok`` and ``plain_refused`` as the module says."""
    auth = {"Authorization": f"Bearer {operator_token}"}
    answers = {
        "market /healthz": https_get(address, port, HOSTS["market"], "/healthz", ca),
        "market /v1/ledger/check": https_get(
            address, port, HOSTS["market"], "/v1/ledger/check", ca, auth
        ),
        "orchestration /healthz": https_get(address, port, HOSTS["orchestration"], "/healthz", ca),
    }
    status = {k: s for k, (s, _) in answers.items()}
    ledger = json.loads(answers["market /v1/ledger/check"][1] or b"{}")
    without_ca = handshake_error(address, port, HOSTS["market"], None)
    unknown_name = handshake_error(address, port, "nobody.mots.example.org", ca)
    plain = {"front": plain_get(address, port, HOSTS["market"])}
    for service, published in compose.PORTS.items():
        plain[f"{service}:{published}"] = plain_get(address, published, HOSTS["market"])
    ok = (
        all(s == 200 for s in status.values())
        and "unbalanced_transactions" in ledger
        and without_ca is not None
        and unknown_name is not None
    )
    plain_refused = plain["front"] == 400 and all(
        v == "refused" for k, v in plain.items() if k != "front"
    )
    return {
        "ok": ok,
        "plain_refused": plain_refused,
        "address": address,
        "port": port,
        "https_status": status,
        "without_ca": without_ca,
        "unknown_name": unknown_name,
        "plain_http": plain,
    }


def running_settings(service: str = "training-worker") -> dict[str, str]:
    """The training settings in the running container's environment (what the round ran on)."""
    out = podman.podman("inspect", compose.container(service), "--format", "{{json .Config.Env}}")
    env = dict(e.split("=", 1) for e in json.loads(out.stdout))
    return {k: env.get(k, "") for k in TRAINING_KEYS}


def shipped_settings() -> dict[str, str]:
    """The training settings docker/compose.yaml ships (its orchestration environment)."""
    import yaml

    shipped = yaml.safe_load(SHIPPED[0].read_text())["services"]["training-worker"]
    return {k: str(shipped["environment"].get(k, "")) for k in TRAINING_KEYS}


def run(timeout: float = 1800) -> dict[str, Any]:
    """The whole check; everything it created (containers, volumes, the TLS files and codes) is
    removed before it returns or raises."""
    started = time.monotonic()
    standins.build_standins()
    built = {name: images.build(name)["build_s"] for name in IMAGES}
    env_file, cli = compose.prepare()
    port = free_port()
    with env_file.open("a") as f:
        f.write(f"MOTS_HTTPS_PORT={port}\n")
    tls = make_tls(TLS_DIR, list(HOSTS.values()), common_name="mots-front")
    try:
        health = compose.up(env_file, cli, SHIPPED, compose.EDGE)
        compose.compose("up", "-d", "front", env_file=env_file, files=SHIPPED)
        health |= compose.wait_healthy(("front",), 180)
        way_in = check(host_address(), port, tls.ca_cert, cli["MOTS_OPERATOR_TOKEN"])
        ran_with = running_settings()
        result = compose.drive_round(cli, timeout)
        books = compose.ledger(cli)
        view = result["view"]
        summary = view.get("summary") or {}
        paid = compose.payouts(cli, result["round_id"], summary)
        shipped = {
            "state": view["state"],
            "settings": ran_with,
            "unmodified": ran_with == shipped_settings(),
            "ledger_balanced": books["balanced"],
            "paid": {n: p["booked"] for n, p in paid["participants"].items()},
            "download_verified": result["download"].get("verified", False),
            "summary": summary,
        }
        shipped["ok"] = (
            shipped["state"] == "published"
            and shipped["unmodified"]
            and shipped["ledger_balanced"]
            and shipped["download_verified"]
        )
        return way_in | {
            "shipped_round": shipped,
            "failed": not (way_in["ok"] and way_in["plain_refused"] and shipped["ok"]),
            "healthy_after_s": health,
            "image_build_s": built,
            "seconds": round(time.monotonic() - started, 1),
            "left_out": {"grafana": compose.LEFT_OUT["grafana"]},
        }
    finally:
        compose.save_logs()
        compose.down()
        shutil.rmtree(TLS_DIR, ignore_errors=True)
