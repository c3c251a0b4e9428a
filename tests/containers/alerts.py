"""The alert round trip (issue 39, item 4; the `alerts` part of `make deploy-test`): the compose
deployment with Prometheus, Alertmanager and each device's node-exporter as shipped, three
conditions of monitoring/prometheus/rules caused for real, and each alert seen arriving at a real
webhook receiver (an HTTP server this module runs on the compose host, where the shipped
docker/alertmanager/alertmanager.yml sends it: host.containers.internal:9095) and seen resolved.

The conditions, each caused as an operator would meet it:

- **MotsRoundSubsidyNearBudget**: a round opened with a small subsidy budget (`mots rounds open
  --subsidy-budget 2`) whose settled subsidy uses more than the alert share (0.8) of it; it
  resolves when the next round, opened with the shipped budget, settles.
- **MotsEdgeDeviceDown**: three of the four edge devices stopped (their SuperNode, agent and
  node-exporter containers, as a Pi that loses power); resolved when they start again.
- **MotsFewerEdgeDevicesThanParticipants**: with those three down, one device answers against
  the latest round's two participants; resolved with them.

The ledger is not unbalanced on purpose (nothing honest does that), and a failed verification
spike needs bad updates on purpose; both are checked by promtool's unit tests only
(tests/services/test_prometheus_rules.py).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.containers import compose, images, podman, standins
from tests.docker.images import IMAGES

RECEIVER_PORT = 9095  # docker/alertmanager/alertmanager.yml's webhook, on the compose host
SMALL_BUDGET = "2"  # the short round's subsidy (1.68 in every run so far) is > 0.8 × 2
DOWN = ("1-0", "1-1", "2-0")  # three of the four devices: one answers, the round had two
WAIT_S = 420.0  # for one notification: rule `for` 1m, 15 s scrapes and evaluations, grouping


class Receiver:
    """The operator's webhook: every notification Alertmanager POSTs, with its arrival time."""

    def __init__(self, port: int = RECEIVER_PORT) -> None:
        self.notes: list[tuple[float, dict[str, Any]]] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with receiver._lock:
                    receiver.notes.append((time.monotonic(), json.loads(body)))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("0.0.0.0", port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def seen(self, alertname: str, status: str, since: float = 0.0) -> float | None:
        """When the first notification after ``since`` carried ``alertname`` in ``status``."""
        with self._lock:
            for at, note in self.notes:
                for alert in note.get("alerts", []):
                    if (
                        at >= since
                        and alert["labels"].get("alertname") == alertname
                        and alert["status"] == status
                    ):
                        return at
        return None

    def wait(self, alertname: str, status: str, since: float, timeout: float = WAIT_S) -> float:
        """Seconds from ``since`` until ``alertname`` arrived in ``status``; -1 if it never did."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            at = self.seen(alertname, status, since)
            if at is not None:
                return round(at - since, 1)
            time.sleep(2)
        return -1.0


@contextmanager
def receiving(port: int = RECEIVER_PORT) -> Iterator[Receiver]:
    """A running Receiver, shut down afterwards."""
    receiver = Receiver(port)
    receiver.thread.start()
    try:
        yield receiver
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()


def _stop(devices: tuple[str, ...]) -> None:
    """Stop every container of the devices (a Pi losing power)."""
    names = [compose.container(f"{k}-{d}") for d in devices
             for k in ("supernode", "agent", "node-exporter")]  # fmt: skip
    podman.podman("stop", "--time", "2", *names, timeout=120)


def _start(devices: tuple[str, ...]) -> None:
    names = [compose.container(f"{k}-{d}") for d in devices
             for k in ("node-exporter", "supernode", "agent")]  # fmt: skip
    podman.podman("start", *names, timeout=120)


def _entry(name: str, cause: str, fired: float, resolved: float) -> dict[str, Any]:
    return {
        "name": name,
        "cause": cause,
        "fired": fired >= 0,
        "resolved": resolved >= 0,
        "fired_after_s": fired,
        "resolved_after_s": resolved,
    }


def run(timeout: float = 1500) -> list[dict[str, Any]]:
    """The whole check; ``alerts[{name, fired, resolved}]`` with the seconds each took from its
    cause. Everything created is removed before it returns or raises."""
    standins.build_standins()
    for name in IMAGES:
        images.build(name)  # cached layers: seconds
    env_file, cli = compose.prepare()
    out: list[dict[str, Any]] = []
    with receiving() as receiver:
        try:
            compose.up(env_file, cli, compose.FILES, compose.EDGE)
            # 1. a round that nearly exhausts its own small budget (K = 2 participants)
            t0 = time.monotonic()
            first = compose.drive_round(cli, timeout, "buyer", ("--subsidy-budget", SMALL_BUDGET))
            subsidy = Decimal((first["view"].get("summary") or {}).get("incentive_cost") or 0)
            fired = receiver.wait("MotsRoundSubsidyNearBudget", "firing", t0)
            # 2. three devices lose power: each is down, and fewer answer than that round needed
            t2 = time.monotonic()
            _stop(DOWN)
            fired_down = receiver.wait("MotsEdgeDeviceDown", "firing", t2)
            fired_few = receiver.wait("MotsFewerEdgeDevicesThanParticipants", "firing", t2)
            t3 = time.monotonic()
            _start(DOWN)
            resolved_down = receiver.wait("MotsEdgeDeviceDown", "resolved", t3)
            resolved_few = receiver.wait("MotsFewerEdgeDevicesThanParticipants", "resolved", t3)
            cause = f"devices {', '.join('edge-' + d for d in DOWN)} stopped, then started"
            out.append(_entry("MotsEdgeDeviceDown", cause, fired_down, resolved_down))
            out.append(_entry("MotsFewerEdgeDevicesThanParticipants", cause, fired_few,
                              resolved_few))  # fmt: skip
            # 3. the next round, opened with the shipped budget, settles within its alert share
            t1 = time.monotonic()
            second = compose.drive_round(cli, timeout, "buyer-2")
            resolved = receiver.wait("MotsRoundSubsidyNearBudget", "resolved", t1)
            cause = (
                f"round {first['round_id']} ({first['view']['state']}) subsidy {subsidy} of "
                f"budget {SMALL_BUDGET}; round {second['round_id']} "
                f"({second['view']['state']}) with the shipped budget"
            )
            out.insert(0, _entry("MotsRoundSubsidyNearBudget", cause, fired, resolved))
            return out
        finally:
            (compose.WORK / "alert-notifications.json").write_text(
                json.dumps([n for _, n in receiver.notes], indent=2)
            )
            compose.save_logs()
            compose.down()


def failed(alerts: list[dict[str, Any]]) -> bool:
    """Whether any alert of the part did not both fire and resolve."""
    return not alerts or not all(a["fired"] and a["resolved"] for a in alerts)
