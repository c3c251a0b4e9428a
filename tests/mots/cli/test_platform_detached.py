"""`mots platform up --detach`, `status`, `logs` and `down` against a real platform (issue 26,
item 7), and, while it is fresh, every metrics endpoint it lists: `promtool check metrics` finds
nothing, and each counter its process moves (those the dashboard rates) is exported at 0 before
it first moves (COUNTERS), an API's refusals and failures included."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import httpx
import pytest
import yaml
from click.testing import CliRunner, Result
from prometheus_client.parser import text_string_to_metric_families

from mots.cli.main import cli
from mots.local.launcher import PROMETHEUS_BINARY
from tests.mots.cli.test_journeys import CLEAN_ENV
from tests.services.orchestration.conftest import stack_env

pytestmark = pytest.mark.integration
PROMTOOL = "/usr/bin/promtool"
COUNTERS = {  # counters a process exports from its start, by metrics endpoint
    "market": ["mots_http_requests_total", "mots_purchases_total"],
    "pricing": ["mots_http_requests_total", "mots_pricing_requests_total"],
    "orchestration": ["mots_http_requests_total"],
    "market-worker": ["mots_tasks_total"],
    "evaluation-worker": ["mots_tasks_total", "mots_evaluations_total"],
    "orchestration-worker": [
        "mots_tasks_total",
        "mots_rounds_total",
        "mots_rounds_redriven_total",
        "mots_round_step_retries_total",
        "mots_round_subsidy_total",
    ],
}


def _mots(*args: str, **env: str | None) -> Result:
    return CliRunner().invoke(cli, list(args), env={**CLEAN_ENV, **env})


def test_a_detached_platform_is_seen_scraped_logged_and_stopped(tmp_path: Path) -> None:
    if not (Path(PROMETHEUS_BINARY).exists() and Path(PROMTOOL).exists()):
        pytest.fail("prometheus/promtool missing: run `make system` (Debian's prometheus)")
    work = tmp_path / "platform"
    env = {**stack_env(), "MOTS_OPERATOR_TOKEN": None}
    try:
        up = _mots("platform", "up", "--detach", "--free-ports", "--workdir", str(work), **env)
        assert up.exit_code == 0, up.output + (work / "logs/platform.log").read_text()
        assert "running in the background" in up.output and "market" in up.output
        assert "Ctrl-C" not in up.output
        assert (work / "logs/platform.log").stat().st_mode & 0o777 == 0o600
        again = _mots("platform", "up", "--detach", "--workdir", str(work))
        assert again.exit_code == 0 and "already running" in again.output, again.output

        shown = _mots("platform", "status", "--workdir", str(work), "--json")
        assert shown.exit_code == 0, shown.output
        state = json.loads(shown.output)
        assert state["running"] and state["healthy"], state
        endpoints = json.loads((work / "endpoints.json").read_text())
        assert {r["name"] for r in state["processes"]} >= {
            "market", "pricing", "orchestration", "prometheus",
            *(f"metrics {job}" for job in endpoints["metrics"]),
        }  # fmt: skip

        for job, url in endpoints["metrics"].items():
            text = httpx.get(url, timeout=10).text
            check = subprocess.run(
                [PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True
            )
            assert check.returncode == 0 and not (check.stdout + check.stderr).strip(), (
                job,
                check.stdout + check.stderr,
            )
            for counter in COUNTERS.get(job, []):
                assert re.search(rf"^{counter}[{{ ]", text, re.MULTILINE), (job, counter)
            if job in ("market", "pricing", "orchestration"):  # refusals and failures at 0 too
                zeros = {
                    s.labels["status"]
                    for family in text_string_to_metric_families(text)
                    for s in family.samples
                    if s.name == "mots_http_requests_total" and s.value == 0
                    and s.labels["service"] == job and s.labels["route"].startswith("/v1/")
                }  # fmt: skip
                assert "500" in zeros and any(z.startswith("4") for z in zeros), (job, zeros)

        prometheus = endpoints["prometheus"]
        assert prometheus and not prometheus.endswith(":9090")  # --free-ports moved it
        provisioning = Path(endpoints["grafana_provisioning"])
        source = yaml.safe_load((provisioning / "datasources/prometheus.yaml").read_text())
        assert source["datasources"][0]["url"] == prometheus
        provider = yaml.safe_load((provisioning / "dashboards/mots.yaml").read_text())
        folder = Path(provider["providers"][0]["options"]["path"])
        assert json.loads((folder / "mots.json").read_text())["uid"] == "mots-platform"

        logs = _mots("platform", "logs", "market", "-n", "3", "--workdir", str(work))
        assert logs.exit_code == 0 and "==> market-api.log <==" in logs.output, logs.output
        assert "==> market-worker.log <==" in logs.output
        unknown = _mots("platform", "logs", "nope", "--workdir", str(work))
        assert unknown.exit_code == 2 and "known: " in unknown.output, unknown.output
    finally:
        down = _mots("platform", "down", "--workdir", str(work))
        assert down.exit_code == 0, down.output
    gone = _mots("platform", "status", "--workdir", str(work))
    assert gone.exit_code == 3 and "no platform running" in gone.output, gone.output
    assert not (work / "pids.json").exists() and not (work / "endpoints.json").exists()
