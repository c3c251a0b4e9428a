"""The Prometheus alert rules (monitoring/prometheus/rules/mots.yml): promtool's unit tests of
the subsidy alerts, and every Prometheus config (demo, compose, k8s) loads the same rules.

Issue 36: every input series carries the market's ``task`` label, two tasks at once, and each
per-round alert holds task by task: the series are chosen so that summing over the tasks (the
rules before tasks) would fire where a task is fine or stay silent where one is not."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).parents[2]
RULES = ROOT / "monitoring" / "prometheus" / "rules" / "mots.yml"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"

UNIT_TESTS = """
rule_files: [{rules}]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'mots_round_subsidy_alert_share{{job="orchestration-worker",task="digits"}}'
        values: '0.8x4'
      - series: 'mots_round_subsidy_budget{{job="orchestration-worker",task="digits"}}'
        values: '100x4'
      - series: 'mots_latest_round_subsidy{{job="orchestration-worker",task="digits"}}'
        values: '0 80 80.5 100 100.000001'
      - series: 'mots_round_subsidy_alert_share{{job="orchestration-worker",task="fashion-mnist"}}'
        values: '0.8x4'
      - series: 'mots_round_subsidy_budget{{job="orchestration-worker",task="fashion-mnist"}}'
        values: '1000x4'
      - series: 'mots_latest_round_subsidy{{job="orchestration-worker",task="fashion-mnist"}}'
        values: '500x4'
    alert_rule_test:
      - {{eval_time: 0m, alertname: MotsRoundSubsidyNearBudget, exp_alerts: []}}
      - {{eval_time: 1m, alertname: MotsRoundSubsidyNearBudget, exp_alerts: []}}
      - eval_time: 2m
        alertname: MotsRoundSubsidyNearBudget
        exp_alerts:
          - exp_labels: {{severity: warning, job: orchestration-worker, task: digits}}
            exp_annotations:
              summary: "Task digits: round subsidy 80.5 uses more than its alert share of the budget"
              description: "{description}"
      - {{eval_time: 3m, alertname: MotsRoundSubsidyOverBudget, exp_alerts: []}}
      - eval_time: 4m
        alertname: MotsRoundSubsidyOverBudget
        exp_alerts:
          - exp_labels: {{severity: critical, job: orchestration-worker, task: digits}}
            exp_annotations:
              summary: "Task digits: round subsidy 100.000001 exceeds its budget"
              description: "{over}"
"""


def _rules() -> dict[str, dict[str, object]]:
    doc = yaml.safe_load(RULES.read_text())
    return {r["alert"]: r for g in doc["groups"] for r in g["rules"]}


def test_promtool_fires_the_subsidy_alerts_above_the_share_and_the_budget(tmp_path: Path) -> None:
    """80 of 100 at share 0.8 is not an alert, 80.5 is; 100.000001 is over the budget; the alert
    names the task (digits), and the other task's 500 of 1000 raises none."""
    if not Path(PROMTOOL).exists():
        pytest.fail("promtool is missing: run `make system` (Debian's prometheus)")
    rules = _rules()
    near = rules["MotsRoundSubsidyNearBudget"]["annotations"]["description"]  # type: ignore[index]
    over = rules["MotsRoundSubsidyOverBudget"]["annotations"]["description"]  # type: ignore[index]
    spec = tmp_path / "subsidy_test.yml"
    spec.write_text(UNIT_TESTS.format(rules=RULES, description=near, over=over))
    run = subprocess.run([PROMTOOL, "test", "rules", str(spec)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    broken = tmp_path / "broken_test.yml"  # the check can fail: a wrong expectation is caught
    broken.write_text(UNIT_TESTS.format(rules=RULES, description=near, over=over).replace(
        "digits: round subsidy 80.5", "digits: round subsidy 80"))  # fmt: skip
    run = subprocess.run([PROMTOOL, "test", "rules", str(broken)], capture_output=True, text=True)
    assert run.returncode != 0


def test_every_prometheus_config_loads_the_rules() -> None:
    """make demo's config finds the file, compose mounts it where its config looks, and the k8s
    ConfigMap carries the same rules where its config looks."""
    demo = yaml.safe_load((ROOT / "monitoring" / "prometheus.yml").read_text())
    found = [p for g in demo["rule_files"] for p in (ROOT / "monitoring").glob(g)]
    assert RULES in found
    compose = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())
    mounts = compose["services"]["prometheus"]["volumes"]
    assert "../monitoring/prometheus/rules:/etc/prometheus/rules:ro" in mounts
    docker = yaml.safe_load((ROOT / "docker" / "prometheus" / "prometheus.yml").read_text())
    assert docker["rule_files"] == ["/etc/prometheus/rules/*.yml"]
    k8s = ROOT / "k8s" / "base" / "prometheus"  # the files of the generated prometheus-config
    assert yaml.safe_load((k8s / "prometheus.yml").read_text())["rule_files"] == [
        "/etc/prometheus/mots-rules.yml"
    ]
    assert yaml.safe_load((k8s / "mots-rules.yml").read_text()) == yaml.safe_load(RULES.read_text())


def test_the_k3s_prometheus_config_loads_in_promtool_but_for_kubernetes_discovery(
    tmp_path: Path,
) -> None:
    """k8s/base/prometheus/prometheus.yml as promtool loads it. Debian's Prometheus (the one that
    installs here) is built without Kubernetes discovery and refuses ``kubernetes_sd_configs`` by
    name (docs/deploy.md says so); with that block swapped for a static target, everything else
    (scrape jobs, relabelling, the rule file) must pass ``promtool check config``. A promtool
    that knows Kubernetes discovery checks the file unchanged."""
    k8s = ROOT / "k8s" / "base" / "prometheus"
    shutil.copy(k8s / "mots-rules.yml", tmp_path / "mots-rules.yml")
    config = yaml.safe_load((k8s / "prometheus.yml").read_text())
    config["rule_files"] = [str(tmp_path / "mots-rules.yml")]
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    check = [PROMTOOL, "check", "config", str(path)]
    got = subprocess.run(check, capture_output=True, text=True, timeout=60, check=False)
    if got.returncode == 0:
        return
    assert "field kubernetes_sd_configs not found" in got.stdout + got.stderr, got.stdout
    for job in config["scrape_configs"]:
        if job.pop("kubernetes_sd_configs", None) is not None:
            job["static_configs"] = [{"targets": ["10.42.0.10:9100"]}]
    path.write_text(yaml.safe_dump(config))
    got = subprocess.run(check, capture_output=True, text=True, timeout=60, check=False)
    assert got.returncode == 0, got.stdout + got.stderr


OPERATIONS_TESTS = """
rule_files: [{rules}]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'mots_ledger_balance{{account="client"}}'
        values: '10x10'
      - series: 'mots_ledger_balance{{account="platform"}}'
        values: '-10 -10 -10 -9.5 -9.5 -9.5 -9.5 -10 -10 -10 -10'
      - series: 'mots_rounds_redriven_total{{task="digits",state="training"}}'
        values: '0 0 1 1 1'
      - series: 'mots_rounds_redriven_total{{task="fashion-mnist",state="training"}}'
        values: '0x4'
      - series: 'mots_supernodes_connected{{task="fashion-mnist",type="type-1"}}'
        values: '10x3 8x8'
      - series: 'mots_participants{{task="fashion-mnist",type="type-1"}}'
        values: '9x10'
      - series: 'mots_supernodes_connected{{task="digits",type="type-1"}}'
        values: '3x10'
      - series: 'mots_participants{{task="digits",type="type-1"}}'
        values: '2x10'
    alert_rule_test:
      - {{eval_time: 4m, alertname: MotsLedgerUnbalanced, exp_alerts: []}}
      - eval_time: 5m
        alertname: MotsLedgerUnbalanced
        exp_alerts:
          - exp_labels: {{severity: critical}}
            exp_annotations:
              summary: "The ledger's balances sum to 0.5, not 0"
              description: "{ledger}"
      - {{eval_time: 9m, alertname: MotsLedgerUnbalanced, exp_alerts: []}}
      - {{eval_time: 1m, alertname: MotsRoundStuck, exp_alerts: []}}
      - eval_time: 3m
        alertname: MotsRoundStuck
        exp_alerts:
          - exp_labels: {{severity: warning, task: digits}}
            exp_annotations:
              summary: "Task digits: 1 round steps outlived their deadline in the last 30 minutes"
              description: "{stuck}"
      - {{eval_time: 8m, alertname: MotsFewerSuperNodesThanParticipants, exp_alerts: []}}
      - eval_time: 9m
        alertname: MotsFewerSuperNodesThanParticipants
        exp_alerts:
          - exp_labels: {{severity: warning, task: fashion-mnist}}
            exp_annotations:
              summary: "Task fashion-mnist: 8 SuperNodes connected, fewer than its latest round's participants"
              description: "{short}"
"""


def test_promtool_fires_the_operations_alerts_and_resolves_the_ledger_one(tmp_path: Path) -> None:
    """An imbalance of 0.5 held 2 minutes fires MotsLedgerUnbalanced and it resolves once the
    sum is 0 again; one re-driven round step of digits fires MotsRoundStuck for digits; 8
    SuperNodes for fashion-mnist's 9 participants, held 5 minutes, fires
    MotsFewerSuperNodesThanParticipants for fashion-mnist although digits' 3 spare nodes make
    the sums over both tasks equal (11 and 11)."""
    rules = _rules()

    def described(name: str) -> str:
        return str(rules[name]["annotations"]["description"])  # type: ignore[index]

    text = OPERATIONS_TESTS.format(
        rules=RULES,
        ledger=described("MotsLedgerUnbalanced"),
        stuck=described("MotsRoundStuck"),
        short=described("MotsFewerSuperNodesThanParticipants"),
    )
    spec = tmp_path / "operations_test.yml"
    spec.write_text(text)
    run = subprocess.run([PROMTOOL, "test", "rules", str(spec)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    spec.write_text(text.replace("sum to 0.5", "sum to 0.4"))  # the check can fail
    run = subprocess.run([PROMTOOL, "test", "rules", str(spec)], capture_output=True, text=True)
    assert run.returncode != 0


FLEET_TESTS = """
rule_files: [{rules}]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'up{{job="mots-edge-nodes",instance="pi-01:9100",device="pi-01"}}'
        values: '1 1 0 0 0 1 1 1'
      - series: 'up{{job="mots-edge-nodes",instance="pi-02:9100",device="pi-02"}}'
        values: '1x7'
      - series: 'mots_participants{{task="fashion-mnist",type="type-1"}}'
        values: '2x7'
      - series: 'mots_participants{{task="digits",type="type-1"}}'
        values: '1x7'
      - series: 'node_memory_MemAvailable_bytes{{job="mots-edge-nodes",device="pi-02"}}'
        values: '500 300x8'
      - series: 'node_memory_MemTotal_bytes{{job="mots-edge-nodes",device="pi-02"}}'
        values: '4000x8'
      - series: 'node_thermal_zone_temp{{job="mots-edge-nodes",instance="pi-02:9100",device="pi-02",zone="0",type="cpu-thermal"}}'
        values: '80 81x8'
      - series: 'node_hwmon_in_lcrit_alarm_volts{{job="mots-edge-nodes",instance="pi-02:9100",device="pi-02",chip="rpi_volt",sensor="in0"}}'
        values: '0 1 1 0'
      - series: 'mots_participant_verifications_total{{task="digits",outcome="failed_verification"}}'
        values: '0 0 2 2 3 3'
      - series: 'mots_participant_verifications_total{{task="fashion-mnist",outcome="failed_verification"}}'
        values: '0 0 1 1 1 1'
    alert_rule_test:
      - {{eval_time: 2m, alertname: MotsEdgeDeviceDown, exp_alerts: []}}
      - eval_time: 3m
        alertname: MotsEdgeDeviceDown
        exp_alerts:
          - exp_labels: {{severity: warning, job: mots-edge-nodes, instance: "pi-01:9100", device: pi-01}}
            exp_annotations:
              summary: "Edge device pi-01 has not answered for 1 minute"
              description: "{down}"
      - {{eval_time: 5m, alertname: MotsEdgeDeviceDown, exp_alerts: []}}
      - eval_time: 4m
        alertname: MotsFewerEdgeDevicesThanParticipants
        exp_alerts:
          - exp_labels: {{severity: warning}}
            exp_annotations:
              summary: "1 edge devices answer, fewer than the largest latest round's participants"
              description: "{few}"
      - {{eval_time: 6m, alertname: MotsFewerEdgeDevicesThanParticipants, exp_alerts: []}}
      - {{eval_time: 5m, alertname: MotsEdgeDeviceMemoryLow, exp_alerts: []}}
      - eval_time: 6m
        alertname: MotsEdgeDeviceMemoryLow
        exp_alerts:
          - exp_labels: {{severity: warning, job: mots-edge-nodes, device: pi-02}}
            exp_annotations:
              summary: "Edge device pi-02 has 7.5% of its memory available"
              description: "{memory}"
      - {{eval_time: 5m, alertname: MotsEdgeDeviceHot, exp_alerts: []}}
      - eval_time: 6m
        alertname: MotsEdgeDeviceHot
        exp_alerts:
          - exp_labels: {{severity: warning, job: mots-edge-nodes, instance: "pi-02:9100", device: pi-02}}
            exp_annotations:
              summary: "Edge device pi-02 is at 81 °C"
              description: "{hot}"
      - {{eval_time: 1m, alertname: MotsEdgeDeviceThrottled, exp_alerts: []}}
      - eval_time: 2m
        alertname: MotsEdgeDeviceThrottled
        exp_alerts:
          - exp_labels: {{severity: warning, job: mots-edge-nodes, instance: "pi-02:9100", device: pi-02}}
            exp_annotations:
              summary: "Edge device pi-02 reports under-voltage"
              description: "{volt}"
      - {{eval_time: 3m, alertname: MotsEdgeDeviceThrottled, exp_alerts: []}}
      - {{eval_time: 3m, alertname: MotsFailedVerificationsSpike, exp_alerts: []}}
      - eval_time: 4m
        alertname: MotsFailedVerificationsSpike
        exp_alerts:
          - exp_labels: {{severity: warning, task: digits}}
            exp_annotations:
              summary: "Task digits: 3 participants failed verification in the last 30 minutes"
              description: "{spike}"
"""


def test_promtool_fires_and_resolves_the_fleet_and_verification_alerts(tmp_path: Path) -> None:
    """A device down 2 minutes fires MotsEdgeDeviceDown (``for: 1m``) and resolves when it
    answers again; with it down, 1 device answers for the largest task's 2 participants (the
    fleet alert, resolved with it: 2 devices serve tasks of 2 and 1 participants); 7.5 % memory
    available for 5 minutes, 81 °C for 5 minutes (80 is not over), one minute of under-voltage
    (resolved when the alarm clears); 3 failed verifications of one task within 30 minutes (2
    are not a spike, nor 2 and 1 of two tasks)."""
    rules = _rules()

    def described(name: str) -> str:
        text = str(rules[name]["annotations"]["description"])  # type: ignore[index]
        return text.replace('"', '\\"')  # inside a double-quoted YAML string

    text = FLEET_TESTS.format(
        rules=RULES,
        down=described("MotsEdgeDeviceDown"),
        few=described("MotsFewerEdgeDevicesThanParticipants"),
        memory=described("MotsEdgeDeviceMemoryLow"),
        hot=described("MotsEdgeDeviceHot"),
        volt=described("MotsEdgeDeviceThrottled"),
        spike=described("MotsFailedVerificationsSpike"),
    )
    spec = tmp_path / "fleet_test.yml"
    spec.write_text(text)
    run = subprocess.run([PROMTOOL, "test", "rules", str(spec)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    spec.write_text(text.replace("values: '0 0 2 2 3 3'", "values: '0 0 2 2 2 2'"))
    run = subprocess.run([PROMTOOL, "test", "rules", str(spec)], capture_output=True, text=True)
    assert run.returncode != 0  # 2 failed verifications are not a spike: the check can fail


def test_alertmanager_config_routes_every_alert_to_the_webhook() -> None:
    """docker/alertmanager/alertmanager.yml (compose) and the k3s ConfigMap's copy pass
    ``amtool check-config``, send resolved notifications, and route a firing alert of each
    severity to the webhook receiver (``amtool config routes test``)."""
    amtool = shutil.which("amtool") or "/usr/bin/amtool"
    if not Path(amtool).exists():
        pytest.fail("amtool is missing: run `make system` (Debian's prometheus-alertmanager)")
    for path in (
        ROOT / "docker" / "alertmanager" / "alertmanager.yml",
        ROOT / "k8s" / "base" / "alertmanager" / "alertmanager.yml",
    ):
        got = subprocess.run([amtool, "check-config", str(path)], capture_output=True, text=True)
        assert got.returncode == 0, got.stdout + got.stderr
        config = yaml.safe_load(path.read_text())
        hooks = [w for r in config["receivers"] for w in r.get("webhook_configs", [])]
        assert hooks and all(w.get("send_resolved", True) for w in hooks), path
        for severity in ("warning", "critical"):
            routed = subprocess.run(
                [amtool, "config", "routes", "test", "--config.file", str(path),
                 "alertname=MotsEdgeDeviceDown", f"severity={severity}"],
                capture_output=True, text=True,
            )  # fmt: skip
            assert routed.returncode == 0, routed.stdout + routed.stderr
            assert routed.stdout.strip() == "operator-webhook", (path, routed.stdout)


def test_every_prometheus_config_sends_alerts_and_scrapes_the_devices() -> None:
    """Compose's and the k3s Prometheus send to Alertmanager and scrape the edge devices'
    node-exporters as job mots-edge-nodes (the MotsEdgeDevice* rules select that job)."""
    docker = yaml.safe_load((ROOT / "docker" / "prometheus" / "prometheus.yml").read_text())
    k8s = yaml.safe_load((ROOT / "k8s" / "base" / "prometheus" / "prometheus.yml").read_text())
    for config in (docker, k8s):
        managers = config["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"]
        assert managers == ["alertmanager:9093"]
        assert "mots-edge-nodes" in {j["job_name"] for j in config["scrape_configs"]}
    devices = next(j for j in docker["scrape_configs"] if j["job_name"] == "mots-edge-nodes")
    compose = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())["services"]
    for target in devices["static_configs"]:
        host = target["targets"][0].split(":")[0]
        assert host in compose, host  # a node-exporter service of compose
        assert f"agent-{host.removeprefix('node-exporter-')}" in compose
