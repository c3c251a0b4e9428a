"""A real Prometheus scrapes every service during a round trained on Flower's deployment engine
(a SuperLink and one SuperNode per client, as processes); every dashboard query returns data."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import httpx
import pytest

from mots.economics.utility import PowerUtility
from mots.local.agents import act, choose, register_population, wait_for_quote
from mots.local.demo import wait_round
from mots.local.launcher import PROMETHEUS_BINARY, Stack
from mots.platform.settings import DEV_OPERATOR_TOKEN
from tests.services.orchestration.conftest import OPERATOR, UTILITY, stack_env

pytestmark = pytest.mark.integration
TYPES = [  # three clients, so the federation starts three SuperNodes
    {"name": "type-1", "count": 2, "data_size": 50, "cost": "0.5"},
    {"name": "type-3", "count": 1, "data_size": 300, "cost": "3.0"},
]
DASHBOARD = Path(__file__).parents[2] / "monitoring" / "grafana" / "dashboards" / "mots.json"


DEVICE_JOB = 'job="mots-edge-nodes"'
"""The fleet row's queries read the edge devices' node-exporters, which the compose and k3s
deployments run beside each SuperNode and a local platform does not (its SuperNodes are this
machine's processes): tests/containers/alerts.py sees those series in the compose deployment."""


def _queries() -> list[tuple[str, str]]:
    """(panel title, query) of every panel a local platform feeds (all but the fleet row's)."""
    dash = json.loads(DASHBOARD.read_text())
    return [
        (p["title"], t["expr"].replace("$job", ".*").replace("$task", ".*"))  # variables at All
        for p in dash["panels"]
        for t in p.get("targets", [])
        if DEVICE_JOB not in t["expr"]
    ]


def test_dashboard_has_a_panel_per_required_metric() -> None:
    """Each metric the issue names appears in some panel's query."""
    exprs = " ".join(e for _, e in _queries())
    for name in (
        "mots_social_welfare",
        "mots_incentive_cost",
        "mots_round_duration_seconds",
        "mots_model_price",
        "mots_reward",
        "mots_participants",
        "mots_buyers",
        "mots_generalization_error",
        "mots_ledger_balance",
        "mots_http_requests_total",
        "mots_http_request_duration_seconds",
    ):
        assert name in exprs, name


def test_prometheus_scrapes_services_and_every_panel_has_data(
    redis_url: str, tmp_path: Path
) -> None:
    """Run a round under a real Prometheus, then evaluate each dashboard query against it."""
    if not Path(PROMETHEUS_BINARY).exists():
        pytest.fail(f"{PROMETHEUS_BINARY} is missing: run `make system` (Debian's prometheus)")
    from mots.local.launcher import free_port

    env = stack_env(
        MOTS_TRAINER="deployment",
        MOTS_SUPERLINK_PORT=str(20000 + free_port() % 20000),
        # 2 FedAvg rounds of E = 2 overshoot (ε ≈ 5) far beyond what the prior prices: let the
        # quality gate publish this test's model anyway
        MOTS_TRAIN_POLICY='{"quality_factor": 50}',
    )
    stack = Stack(workdir=tmp_path / "stack", redis_url=redis_url, extra_env=env)
    stack.start(timeout_s=120)
    try:
        prom = stack.start_prometheus(interval="1s")
        market = httpx.Client(base_url=stack.url("market"), timeout=60)
        orchestration = httpx.Client(
            base_url=stack.url("orchestration"), timeout=60, headers=OPERATOR
        )
        agents = register_population(market, TYPES, DEV_OPERATOR_TOKEN, deposit="10")
        round_id = orchestration.post("/v1/rounds", headers=OPERATOR).json()["round_id"]
        quote = wait_for_quote(market, agents[0], round_id)
        act(market, agents, round_id, choose(agents, quote, PowerUtility.model_validate(UTILITY)))
        body = wait_round(orchestration, round_id, 400)
        assert body["state"] == "published", body
        assert body["summary"]["training_round_seconds"], "the deployment engine reported no rounds"
        for _ in range(5):  # traffic after the round, so rate() windows see it
            market.get("/v1/quote", headers=agents[0].auth)
            time.sleep(0.5)
        up = httpx.get(f"{prom}/api/v1/query", params={"query": "up"}).json()["data"]["result"]
        assert {r["metric"]["job"] for r in up if r["value"][1] == "1"} == set(
            stack.scrape_targets()
        )
        empty: list[str] = []
        deadline = time.monotonic() + 30
        while True:
            empty = []
            for title, expr in _queries():
                body = httpx.get(f"{prom}/api/v1/query", params={"query": expr}).json()
                assert body["status"] == "success", (title, body)
                values = [float(r["value"][1]) for r in body["data"]["result"]]
                # a kind exported at zero from the start has no quantile yet (NaN): a panel needs
                # one finite series, not all
                if not any(math.isfinite(v) for v in values):
                    empty.append(f"{title}: {expr} -> {values}")
            if not empty or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert not empty, "\n".join(empty)
        nodes = httpx.get(f"{prom}/api/v1/query", params={"query": "mots_supernodes_connected"})
        per_type = {
            (r["metric"]["task"], r["metric"]["type"]): float(r["value"][1])
            for r in nodes.json()["data"]["result"]
        }  # the round named no task: fashion-mnist's (issue 36)
        assert per_type == {("fashion-mnist", t["name"]): t["count"] for t in TYPES}, per_type
        market.close()
        orchestration.close()
    finally:
        stack.stop()
