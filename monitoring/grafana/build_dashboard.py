"""The MoTS Grafana dashboard, generated from this one Python source.

Run ``python monitoring/grafana/build_dashboard.py`` (or ``make dashboards``) after editing a panel:
it writes ``monitoring/grafana/dashboards/mots.json`` and the identical copy Kubernetes ships,
``k8s/base/grafana/dashboards/mots.json``; ``tests/monitoring/test_dashboard.py`` fails while
either file differs from what this module builds, and while a metric the services export has no
panel. To add a panel, append a :class:`Panel` to the section it belongs to in :func:`sections`.

Rules every panel follows (checked by the test): a title, a unit, a legend naming the labels its
series differ by, and a window (``rate``/``increase``/``histogram_quantile`` over ``[W]``) wherever a
person wants "lately" rather than "since the process started". Round-level figures use
``ROUND_WINDOW`` (rounds last minutes), request-level ones ``RATE_WINDOW``.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
OUTPUTS = (
    ROOT / "monitoring/grafana/dashboards/mots.json",
    ROOT / "k8s/base/grafana/dashboards/mots.json",
)
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
"""Every panel reads the dashboard's ``datasource`` variable, never a fixed uid: imported into any
Grafana (its ``__inputs`` asks for a Prometheus) or provisioned, the panels follow the choice."""
JOB_MATCHER = 'job=~"$job"'
"""Every series selector is narrowed to the ``job`` variable (All: every scraped process)."""
TASK_MATCHER = 'task=~"$task"'
"""Every selector of a per-task series is narrowed to the ``task`` variable (issue 36; All: every
task, and the ledger's accounts of no task)."""
TASK_METRICS = frozenset(
    {
        "mots_social_welfare", "mots_incentive_cost", "mots_model_price", "mots_reward",
        "mots_participants", "mots_buyers", "mots_generalization_error",
        "mots_error_model_parameter", "mots_ledger_balance", "mots_latest_round_subsidy",
        "mots_round_subsidy_budget", "mots_round_subsidy_alert_share", "mots_round_subsidy_total",
        "mots_round_duration_seconds", "mots_round_waiting_seconds", "mots_round_platform_seconds",
        "mots_round_phase_duration_seconds", "mots_platform_overhead_ratio",
        "mots_supernodes_connected", "mots_training_fedavg_round", "mots_training_fedavg_rounds",
        "mots_rounds_total", "mots_rounds_redriven_total", "mots_round_step_retries_total",
        "mots_evaluations_total", "mots_participant_verifications_total", "mots_purchases_total",
    }
)  # fmt: skip
"""The families that carry the market's ``task`` label (mots.platform.metrics; the test checks
this list against the services' registries)."""
_SELECTOR = re.compile(r"\b(mots_[a-z0-9_]+)(\{)?")


def family(series: str) -> str:
    """The family a series name belongs to (a histogram's ``_bucket``, ``_sum``, ``_count``)."""
    return re.sub(r"_(bucket|sum|count)$", "", series)


def scoped(expr: str) -> str:
    """``expr`` with :data:`JOB_MATCHER` in each of its ``mots_*`` series selectors, and
    :data:`TASK_MATCHER` in those of :data:`TASK_METRICS`."""

    def one(m: re.Match[str]) -> str:
        matchers = JOB_MATCHER + ("," + TASK_MATCHER if family(m.group(1)) in TASK_METRICS else "")
        return f"{m.group(1)}{{{matchers}" + ("," if m.group(2) else "}")

    return _SELECTOR.sub(one, expr)


def templating() -> dict[str, Any]:
    """The dashboard's variables: the Prometheus data source, the scrape jobs and the market's
    tasks to show (every task's round counters exist from its first round on)."""
    return {
        "list": [
            {
                "name": "datasource",
                "label": "Prometheus",
                "type": "datasource",
                "query": "prometheus",
                "current": {"text": "${DS_PROMETHEUS}", "value": "${DS_PROMETHEUS}"},
                "hide": 0,
                "refresh": 1,
                "regex": "",
                "options": [],
            },
            {
                "name": "job",
                "label": "Process (job)",
                "type": "query",
                "datasource": DATASOURCE,
                "query": {"query": "label_values(up, job)", "refId": "jobs"},
                "definition": "label_values(up, job)",
                "refresh": 2,
                "multi": True,
                "includeAll": True,
                "allValue": ".*",
                "current": {"text": ["All"], "value": ["$__all"]},
                "sort": 1,
                "hide": 0,
                "options": [],
            },
            {
                "name": "task",
                "label": "Task",
                "type": "query",
                "datasource": DATASOURCE,
                "query": {"query": "label_values(mots_rounds_total, task)", "refId": "tasks"},
                "definition": "label_values(mots_rounds_total, task)",
                "refresh": 2,
                "multi": True,
                "includeAll": True,
                "allValue": ".*",
                "current": {"text": ["All"], "value": ["$__all"]},
                "sort": 1,
                "hide": 0,
                "options": [],
            },
        ]
    }


INPUTS = [
    {
        "name": "DS_PROMETHEUS",
        "label": "Prometheus",
        "description": "the Prometheus that scrapes the MoTS services",
        "type": "datasource",
        "pluginId": "prometheus",
        "pluginName": "Prometheus",
    }
]
"""What Grafana's import dialog asks for: the Prometheus data source (it fills ``${DS_PROMETHEUS}``,
the ``datasource`` variable's initial choice; provisioned, the variable takes the default one)."""
ROUND_WINDOW = "1h"
"""The window of round-level figures: rounds last seconds to minutes, so an hour holds several."""
RATE_WINDOW = "5m"
"""The window of request-level rates and latencies."""
WIDTH = 24
"""Grafana's grid width."""


@dataclass(frozen=True)
class Target:
    """One PromQL query of a panel and the legend of its series (``{{label}}`` for each label the
    series differ by; a fixed name when the query yields one series). A query of per-task series
    keeps the task apart (``{{task}}`` in its legend) unless ``across_tasks`` says it
    deliberately aggregates over every task."""

    expr: str
    legend: str
    across_tasks: bool = False


@dataclass(frozen=True)
class Panel:
    """A panel: its title, Grafana unit (``s``, ``percentunit``, ``currencyUSD``, ``reqps``, ``none``
    …), what it shows and why (the description), its queries and its kind and width."""

    title: str
    unit: str
    description: str
    targets: tuple[Target, ...]
    kind: str = "timeseries"
    width: int = 12
    height: int = 7
    decimals: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _t(expr: str, legend: str, across_tasks: bool = False) -> Target:
    return Target(expr, legend, across_tasks)


def market_panels() -> list[Panel]:
    """The latest round's market: SWAN's terms, welfare, the population and the ledger."""
    return [
        Panel(
            "Social welfare W_MoTS (Eq. 5), latest round",
            "none",
            "W_MoTS(K, B) of each task's latest finished round, in utility units (Eq. 5).",
            (_t("mots_social_welfare", "W_MoTS {{task}}"),),
            kind="stat",
            width=6,
        ),
        Panel(
            "Model price p, latest round",
            "currencyUSD",
            "SWAN's price p(K) of each task's latest finished round.",
            (_t("mots_model_price", "p {{task}}"),),
            kind="stat",
            width=6,
        ),
        Panel(
            "Incentive cost (platform subsidy), latest round",
            "currencyUSD",
            "The subsidy [Σ K_i r_i − Σ B_i p]⁺ the ledger booked for each task's latest finished round.",
            (_t("mots_incentive_cost", "subsidy {{task}}"),),
            kind="stat",
            width=6,
        ),
        Panel(
            "Generalization error ε: predicted vs measured",
            "none",
            "ε of each task's latest rounds by source: predicted (the quote's ε(K*), Eq. 3 with the error "
            "model's estimate at the open), training (the engine's ε after each FedAvg round), "
            "measured (the evaluation service's test loss), each from the service (job) exporting it.",
            (_t("mots_generalization_error", "{{task}} {{source}} ({{job}})"),),
            width=6,
        ),
        Panel(
            "Reward r_i per type, latest round",
            "currencyUSD",
            "Participation reward r_i(K) of each type in each task's latest finished round.",
            (_t("mots_reward", "{{task}} {{type}}"),),
            kind="bargauge",
            width=8,
        ),
        Panel(
            "Participants K_i per type, latest round",
            "none",
            "Clients of each type that joined each task's latest finished round's training.",
            (_t("mots_participants", "{{task}} {{type}}"),),
            kind="bargauge",
            width=8,
            decimals=0,
        ),
        Panel(
            "Buyers B_i per type, latest round",
            "none",
            "Clients of each type that bought each task's latest finished round's model.",
            (_t("mots_buyers", "{{task}} {{type}}"),),
            kind="bargauge",
            width=8,
            decimals=0,
        ),
        Panel(
            "Ledger totals by account",
            "currencyUSD",
            "Σ balances per account category and task (a round pool's task; wallets and the "
            "platform's accounts belong to none), read from the market's ledger at each scrape "
            "(Σ over all is 0 with every task shown: one ledger).",
            (_t("mots_ledger_balance", "{{account}} {{task}}"),),
            kind="bargauge",
        ),
        Panel(
            "Subsidy vs budget",
            "currencyUSD",
            "Each task's latest settled round's subsidy from platform:subsidy against its budget "
            "(MOTS_ROUND_SUBSIDY_BUDGET or the round's own; payouts beyond it are scaled down at "
            "settlement) and the alert threshold (MOTS_SUBSIDY_ALERT_SHARE of the budget, rule "
            "MotsRoundSubsidyNearBudget); and the subsidy paid over the last "
            f"{ROUND_WINDOW}.",
            (
                _t("mots_latest_round_subsidy", "{{task}} subsidy, latest round"),
                _t("mots_round_subsidy_budget", "{{task}} budget"),
                _t(
                    "mots_round_subsidy_alert_share * mots_round_subsidy_budget",
                    "{{task}} alert threshold",
                ),
                _t(
                    f"increase(mots_round_subsidy_total[{ROUND_WINDOW}])",
                    f"{{{{task}}}} paid in {ROUND_WINDOW}",
                ),
            ),
        ),
        Panel(
            "Error model parameters (Eq. 3)",
            "none",
            "The evaluation service's latest estimate of Eq. 3's parameters and ε0, per task.",
            (_t("mots_error_model_parameter", "{{task}} {{parameter}}"),),
            kind="stat",
        ),
    ]


def round_time_panels() -> list[Panel]:
    """How long rounds take and where the time goes: waiting, learning, the platform's own."""
    w = ROUND_WINDOW
    return [
        Panel(
            f"Round duration p50 / p95 (last {w})",
            "s",
            "Quantiles of the wall time from a round's open to its terminal state, over rounds "
            f"that ended in the last {w}, per task.",
            (
                _t(
                    "histogram_quantile(0.5, sum by (le, task) "
                    f"(increase(mots_round_duration_seconds_bucket[{w}])))",
                    "{{task}} p50",
                ),
                _t(
                    "histogram_quantile(0.95, sum by (le, task) "
                    f"(increase(mots_round_duration_seconds_bucket[{w}])))",
                    "{{task}} p95",
                ),
            ),
            width=8,
        ),
        Panel(
            f"Round duration mean (last {w})",
            "s",
            f"Mean wall time of the rounds that ended in the last {w}, per task.",
            (
                _t(
                    f"sum by (task) (increase(mots_round_duration_seconds_sum[{w}])) / "
                    f"sum by (task) (increase(mots_round_duration_seconds_count[{w}]))",
                    "{{task}}",
                ),
            ),
            kind="stat",
            width=4,
        ),
        Panel(
            f"Mean seconds per round state (last {w})",
            "s",
            f"Mean time a round spent in each state, over the states left in the last {w}, per "
            "task.",
            (
                _t(
                    f"sum by (task, state) (increase(mots_round_phase_duration_seconds_sum[{w}])) / "
                    f"sum by (task, state) (increase(mots_round_phase_duration_seconds_count[{w}]))",
                    "{{task}} {{state}}",
                ),
            ),
            kind="bargauge",
        ),
        Panel(
            f"Where a round's time goes: mean seconds per round (last {w})",
            "s",
            "Mean per round ended in the last window: waiting for clients (collecting their "
            "decisions), training and evaluation (the learning's work), and the platform's own time "
            "(everything else: pricing, booking, settling, scheduling).",
            (
                _t(
                    f"sum by (task) (increase(mots_round_waiting_seconds_sum[{w}])) / "
                    f"sum by (task) (increase(mots_round_waiting_seconds_count[{w}]))",
                    "{{task}} waiting for clients",
                ),
                _t(
                    f'sum by (task) (increase(mots_round_phase_duration_seconds_sum{{state=~"training|evaluating"}}[{w}])) / '
                    f"sum by (task) (increase(mots_round_duration_seconds_count[{w}]))",
                    "{{task}} training and evaluation",
                ),
                _t(
                    f"sum by (task) (increase(mots_round_platform_seconds_sum[{w}])) / "
                    f"sum by (task) (increase(mots_round_platform_seconds_count[{w}]))",
                    "{{task}} platform",
                ),
            ),
            kind="bargauge",
        ),
        Panel(
            f"Platform overhead share (last {w})",
            "percentunit",
            "The platform's own seconds / (round seconds − seconds waiting for clients), summed over "
            "the rounds ended in the last window; the latest round's own share beside it.",
            (
                _t(
                    f"sum by (task) (increase(mots_round_platform_seconds_sum[{w}])) / "
                    f"(sum by (task) (increase(mots_round_duration_seconds_sum[{w}])) - "
                    f"sum by (task) (increase(mots_round_waiting_seconds_sum[{w}])))",
                    f"{{{{task}}}} last {w}",
                ),
                _t("mots_platform_overhead_ratio", "{{task}} latest round"),
            ),
            kind="stat",
            width=6,
        ),
    ]


def round_outcome_panels() -> list[Panel]:
    """Training progress, how rounds end, liveness, evaluations and purchases."""
    w = ROUND_WINDOW
    return [
        Panel(
            "SuperNodes connected per task and type",
            "none",
            "SuperNodes of the federation per client type of a task, read before and after each "
            "training of it "
            "(alive processes of the local federation; nodes registered with an external SuperLink).",
            (_t("mots_supernodes_connected", "{{task}} {{type}}"),),
            kind="bargauge",
            width=6,
            decimals=0,
        ),
        Panel(
            "Training progress: FedAvg round r of R",
            "none",
            "The FedAvg round each task's latest training has reached and the rounds it runs (ε "
            "so far is the training series of the ε panel).",
            (
                _t("mots_training_fedavg_round", "{{task}} r"),
                _t("mots_training_fedavg_rounds", "{{task}} R"),
            ),
            kind="stat",
            width=6,
            decimals=0,
        ),
        Panel(
            f"Rounds ended by outcome (last {w})",
            "none",
            f"Rounds that reached a terminal state in the last {w}, by task and state.",
            (_t(f"sum by (task, state) (increase(mots_rounds_total[{w}]))", "{{task}} {{state}}"),),
            kind="stat",
            width=6,
            decimals=0,
        ),
        Panel(
            f"Liveness: rounds re-driven and steps retried (last {w})",
            "none",
            "Rounds the reconciler re-drove because a state outlived its deadline, and round steps "
            "run again because a service call got no answer (0 when nothing was lost).",
            (
                _t(
                    f"sum by (task) (increase(mots_rounds_redriven_total[{w}])) or vector(0)",
                    "{{task}} re-driven",
                ),
                _t(
                    f"sum by (task) (increase(mots_round_step_retries_total[{w}])) or vector(0)",
                    "{{task}} retried",
                ),
            ),
            kind="stat",
            width=6,
            decimals=0,
        ),
        Panel(
            f"Models evaluated (last {w})",
            "none",
            f"Models the evaluation service measured in the last {w}, per task.",
            (_t(f"sum by (task) (increase(mots_evaluations_total[{w}]))", "{{task}} evaluations"),),
            kind="stat",
            width=6,
            decimals=0,
        ),
        Panel(
            f"Purchases booked per second (last {RATE_WINDOW})",
            "ops",
            "Model purchases the market booked, per second, by the task of their round.",
            (
                _t(
                    f"sum by (task) (rate(mots_purchases_total[{RATE_WINDOW}]))",
                    "{{task}} purchases/s",
                ),
            ),
            width=6,
        ),
    ]


def service_panels() -> list[Panel]:
    """The services' own health: HTTP, pricing, Celery tasks, batched writes."""
    w = RATE_WINDOW
    return [
        Panel(
            f"HTTP requests per second (last {w})",
            "reqps",
            "Requests served, by service, method, route template and status code.",
            (
                _t(
                    "sum by (service, method, route, status) "
                    f"(rate(mots_http_requests_total[{w}]))",
                    "{{service}} {{method}} {{route}} {{status}}",
                ),
            ),
        ),
        Panel(
            f"HTTP request latency p99 (last {w})",
            "s",
            "99th percentile of request latency, by service.",
            (
                _t(
                    "histogram_quantile(0.99, sum by (le, service) "
                    f"(rate(mots_http_request_duration_seconds_bucket[{w}])))",
                    "{{service}}",
                ),
            ),
        ),
        Panel(
            f"Pricing requests per second (last {w})",
            "reqps",
            "SWAN computations of the pricing service, by kind and outcome.",
            (
                _t(
                    f"sum by (kind, outcome) (rate(mots_pricing_requests_total[{w}]))",
                    "{{kind}} {{outcome}}",
                ),
            ),
        ),
        Panel(
            f"Pricing computation p99 (last {w})",
            "s",
            "99th percentile of the time to compute SWAN's terms, by kind.",
            (
                _t(
                    "histogram_quantile(0.99, sum by (le, kind) "
                    f"(rate(mots_pricing_duration_seconds_bucket[{w}])))",
                    "{{kind}}",
                ),
            ),
        ),
        Panel(
            f"Celery tasks per second (last {w})",
            "ops",
            "Celery tasks the workers ran, by service, Celery task and outcome.",
            (
                _t(
                    f"sum by (service, celery_task, outcome) (rate(mots_tasks_total[{w}]))",
                    "{{service}} {{celery_task}} {{outcome}}",
                ),
            ),
        ),
        Panel(
            f"Batched writes: mean requests per batch (last {w})",
            "none",
            "Purchases (and token lookups) booked together in one database transaction (group "
            "commit), by batcher.",
            (
                _t(
                    f"sum by (batcher) (rate(mots_batch_size_sum[{w}])) / "
                    f"sum by (batcher) (rate(mots_batch_size_count[{w}]))",
                    "{{batcher}}",
                ),
            ),
        ),
        Panel(
            f"Batched writes: p99 time per batch (last {w})",
            "s",
            "Time to book one batch, its commit included, by batcher.",
            (
                _t(
                    "histogram_quantile(0.99, sum by (le, batcher) "
                    f"(rate(mots_batch_duration_seconds_bucket[{w}])))",
                    "{{batcher}}",
                ),
            ),
        ),
    ]


EDGE = 'job="mots-edge-nodes"'
"""The edge devices' node-exporters (compose: one per device; k3s: the edge pod's container)."""


def fleet_panels() -> list[Panel]:
    """The edge devices themselves (node-exporter on each): up, memory, temperature, throttling;
    and how the latest rounds' participants fared in verification."""
    w = ROUND_WINDOW
    return [
        Panel(
            "Edge devices up",
            "none",
            "Edge devices whose node-exporter answers, against the largest of the tasks' latest "
            "rounds' participants Σ K_i (rules MotsEdgeDeviceDown, "
            "MotsFewerEdgeDevicesThanParticipants; a device may train several tasks).",
            (
                _t(f"sum(up{{{EDGE}}})", "devices up"),
                _t(f"count(up{{{EDGE}}})", "devices"),
                _t(
                    "max(sum by (task) (mots_participants))",
                    "participants Σ K_i, largest task",
                    across_tasks=True,
                ),
            ),
            width=6,
            decimals=0,
        ),
        Panel(
            "Edge device memory available",
            "percentunit",
            "MemAvailable / MemTotal of each device (rule MotsEdgeDeviceMemoryLow under 10 %).",
            (
                _t(
                    f"node_memory_MemAvailable_bytes{{{EDGE}}} / node_memory_MemTotal_bytes{{{EDGE}}}",
                    "{{device}}",
                ),
            ),
            width=6,
        ),
        Panel(
            "Edge device temperature",
            "celsius",
            "The hottest thermal zone of each device (a Pi 4 throttles from 80 °C: rule "
            "MotsEdgeDeviceHot); empty where the hardware exposes none.",
            (_t(f"max by (device) (node_thermal_zone_temp{{{EDGE}}})", "{{device}}"),),
            width=6,
        ),
        Panel(
            "Edge device throttling",
            "percentunit",
            "Each device's CPU clock against its maximum (below 1: throttled), and the Pi's "
            "under-voltage alarm (rpi_volt, rule MotsEdgeDeviceThrottled); empty where the "
            "hardware exposes neither.",
            (
                _t(
                    f"avg by (device) (node_cpu_scaling_frequency_hertz{{{EDGE}}}) / "
                    f"avg by (device) (node_cpu_scaling_frequency_max_hertz{{{EDGE}}})",
                    "{{device}} clock",
                ),
                _t(
                    f"max by (device) (node_hwmon_in_lcrit_alarm_volts{{{EDGE}}})",
                    "{{device}} under-voltage",
                ),
            ),
            width=6,
        ),
        Panel(
            f"Participants by verification outcome (last {w})",
            "none",
            "Participants of the rounds finished in the window by task: verified, dropped, or "
            "failed_verification (rule MotsFailedVerificationsSpike at 3 of a task in 30 minutes).",
            (
                _t(
                    f"sum by (task, outcome) (increase(mots_participant_verifications_total[{w}]))",
                    "{{task}} {{outcome}}",
                ),
            ),
            width=24,
        ),
    ]


def sections() -> list[tuple[str, list[Panel]]]:
    """The dashboard's rows, top to bottom."""
    return [
        ("Market: the latest round", market_panels()),
        ("Rounds: time", round_time_panels()),
        ("Rounds: training and outcomes", round_outcome_panels()),
        ("Services", service_panels()),
        ("Fleet: the edge devices", fleet_panels()),
    ]


def _panel_json(p: Panel, pid: int, x: int, y: int) -> dict[str, Any]:
    defaults: dict[str, Any] = {"unit": p.unit}
    if p.decimals is not None:
        defaults["decimals"] = p.decimals
    options: dict[str, Any] = {"legend": {"showLegend": True, "displayMode": "list"}}
    if p.kind in ("stat", "bargauge"):
        options = {"reduceOptions": {"calcs": ["lastNotNull"], "values": False}}
    return {
        "id": pid,
        "type": p.kind,
        "title": p.title,
        "description": p.description,
        "datasource": DATASOURCE,
        "gridPos": {"h": p.height, "w": p.width, "x": x, "y": y},
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": options | p.extra,
        "targets": [
            {
                "refId": chr(ord("A") + i),
                "expr": scoped(t.expr),
                "legendFormat": t.legend,
                "datasource": DATASOURCE,
            }
            for i, t in enumerate(p.targets)
        ],
    }


def build() -> dict[str, Any]:
    """The dashboard's JSON model: a collapsed-free row per section, panels laid out left to right."""
    panels: list[dict[str, Any]] = []
    pid, y = 1, 0
    for name, section in sections():
        panels.append(
            {
                "id": pid,
                "type": "row",
                "title": name,
                "collapsed": False,
                "gridPos": {"h": 1, "w": WIDTH, "x": 0, "y": y},
                "panels": [],
            }
        )
        pid, y, x, row_h = pid + 1, y + 1, 0, 0
        for p in section:
            if x + p.width > WIDTH:
                x, y, row_h = 0, y + row_h, 0
            panels.append(_panel_json(p, pid, x, y))
            pid, x, row_h = pid + 1, x + p.width, max(row_h, p.height)
        y += row_h
    return {
        "__inputs": INPUTS,
        "__requires": [
            {"type": "datasource", "id": "prometheus", "name": "Prometheus", "version": "1.0.0"}
        ],
        "uid": "mots-platform",
        "title": "MoTS platform",
        "description": "Market rounds priced by SWAN, per task (the task variable): welfare, "
        "price, rewards, states per type, ledger, round time and the platform's share of it, training, services. Generated by "
        "monitoring/grafana/build_dashboard.py: edit that file, not this one.",
        "tags": ["mots"],
        "timezone": "utc",
        "schemaVersion": 39,
        "version": 1,
        "refresh": "10s",
        "time": {"from": "now-1h", "to": "now"},
        "templating": templating(),
        "annotations": {"list": []},
        "panels": panels,
    }


def render() -> str:
    """The dashboard file's exact text."""
    return json.dumps(build(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    """Write both dashboard files (``--check``: only say whether they are up to date)."""
    text = render()
    stale = [p for p in OUTPUTS if not p.exists() or p.read_text() != text]
    if "--check" in argv:
        for p in stale:
            print(f"{p.relative_to(ROOT)} is out of date: run {Path(__file__).relative_to(ROOT)}")
        return 1 if stale else 0
    for p in OUTPUTS:
        p.write_text(text)
    print("wrote " + ", ".join(str(p.relative_to(ROOT)) for p in OUTPUTS))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
