"""The compose round in `make test` (issue 23, item 3): docker/compose.yaml started with
podman-compose from the images built here (cached layers: a source change rebuilds only the
source layers), every health check passing, a market round driven with the `mots` CLI as the
operator and a buyer would, trained on the SuperNode containers over TLS with SuperNode
authentication (tests/containers/compose.py). Without podman, runc or the local base it skips
locally and fails under CI=true (tests/containers/conftest.py).

Two tasks (issue 36): the operator enrols the types in fashion-mnist and in digits (a code per
type and task, the compose secrets), each device's agent registers as one client per task and
trains both on its one SuperNode from its host's folders; a round of each task is opened at once
(on the one SuperLink they train at once, each run with its own coalition's node map), each with a
buyer of its own task.

Asserted for each task's round: published; every participant one of the four devices, verified
and paid exactly the reward SWAN set for its type, once, read per client from the operator's
ledger routes (`mots market transactions --round`, `mots market accounts`: `ledger-check` totals
wallets by category); the buyer's download's SHA-256 recomputed here. And: the ledger balanced
across both; every Prometheus target up; nothing of the project left in podman. The result is
out/deploy/report.json's `compose` key (``tasks``: each task's round), as `make deploy-test`
writes it.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from tests.containers import compose, podman, report
from tests.containers.base import base_image
from tests.containers.conftest import require_base

# Cold image builds took 35-40 min at this machine's load; cached ones and the round about 5 min.
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(5400)]


def _run() -> dict[str, Any]:
    """The compose check; its result (or its error) written into the report either way."""
    try:
        result = compose.run_round()
    except Exception as exc:
        report.write_part("compose", {"error": f"{type(exc).__name__}: {exc}"[:2000]})
        raise
    report.write_part("compose", result)
    return result


def test_compose_round_publishes_and_pays(runtime: None) -> None:
    require_base(base_image("amd64"))
    got = _run()
    assert podman.leftovers([compose.PROJECT]) == {k: [] for k in podman.KINDS}
    assert got["ledger_balanced"], got["ledger"]  # exact across both tasks' rounds
    assert got["prometheus_targets"] > 0
    assert got["prometheus_targets_up"] == got["prometheus_targets"]
    assert sorted(got["tasks"]) == sorted(compose.TASKS)
    devices = {f"edge-{d}" for d in compose.DEVICES}
    for task, rnd in got["tasks"].items():
        assert rnd["round_state"] == "published", (task, rnd["summary"])
        assert 0 < rnd["round_calls"] <= 7, (task, rnd["summary"])  # issue 38, its call log
        download = rnd["download"]
        assert download["verified"], (task, download)
        assert download["size"] > 0
        participants = rnd["participants"]
        k = sum(rnd["summary"]["participants"].values())
        assert k > 0 and len(participants) == k, (task, rnd["summary"]["participants"])
        assert set(participants) <= devices, (task, participants)  # the same devices, per task
        for name, p in participants.items():
            assert p["verification"] == "verified", (task, name, p)
            reward = Decimal(p["reward"])
            once = [reward] if reward else []  # a zero reward books no transaction
            assert [Decimal(a) for a in p["booked"]] == once, (task, name, p)  # paid once, as set
            assert Decimal(p["wallet"]) == reward, (task, name, p)  # its task's wallet: no more
    assert got["round_state"] == got["tasks"][compose.DEFAULT_TASK]["round_state"]
