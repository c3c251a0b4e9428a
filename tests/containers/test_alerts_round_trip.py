"""The alert round trip in the compose deployment (issue 39, item 4; tests/containers/alerts.py,
the `alerts` part of `make deploy-test`): three conditions caused for real, each alert seen at a
real webhook receiver firing and then resolved. Long (two rounds and two device outages, about 7 minutes):
marked ``deploy``, so `make deploy-test` runs it and `make test` does not; it skips locally
without podman, runc or the base (fails under CI=true)."""

from __future__ import annotations

import pytest

from tests.containers import alerts, compose, podman, report
from tests.containers.base import base_image
from tests.containers.conftest import require_base

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(5400)]


@pytest.mark.deploy
def test_three_alerts_reach_the_webhook_and_resolve(runtime: None) -> None:
    require_base(base_image("amd64"))
    try:
        got = alerts.run()
    except Exception as exc:
        report.write_part("alerts", {"error": f"{type(exc).__name__}: {exc}"[:2000]})
        raise
    report.write_part("alerts", got)
    assert podman.leftovers([compose.PROJECT]) == {k: [] for k in podman.KINDS}
    names = {a["name"] for a in got}
    assert names == {
        "MotsRoundSubsidyNearBudget",
        "MotsEdgeDeviceDown",
        "MotsFewerEdgeDevicesThanParticipants",
    }
    for alert in got:
        assert alert["fired"] and alert["resolved"], alert
    assert not alerts.failed(got)


def test_the_receiver_records_what_alertmanager_posts() -> None:
    """The receiver itself: a firing then a resolved notification, as Alertmanager's webhook
    sends them, are told apart and timed; an alert never sent is -1."""
    import json
    import time
    import urllib.request

    with alerts.receiving(port=0) as receiver:
        port = receiver.server.server_address[1]
        since = time.monotonic()
        for status in ("firing", "resolved"):
            body = {"status": status, "alerts": [{"status": status, "labels": {"alertname": "A"}}]}
            req = urllib.request.Request(
                f"http://127.0.0.1:{port}/alerts", json.dumps(body).encode(), method="POST",
                headers={"Content-Type": "application/json"},
            )  # fmt: skip
            urllib.request.urlopen(req, timeout=5).close()
        assert receiver.wait("A", "firing", since, timeout=5) >= 0
        assert receiver.wait("A", "resolved", since, timeout=5) >= 0
        assert receiver.wait("B", "firing", since, timeout=1) == -1
    assert not alerts.failed([{"name": "A", "fired": True, "resolved": True}])
    assert alerts.failed([{"name": "A", "fired": True, "resolved": False}])
