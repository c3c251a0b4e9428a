"""Compose and k8s wire the orchestration worker to the deployed SuperLink and expose the workers'
metrics to Prometheus (the integration the services and the deployment must agree on).

Training: MOTS_SUPERLINK_ADDRESS names the SuperLink service's port; the SuperLink, which runs the
ServerApp, mounts the run directory (MOTS_WORK_DIR), the artifact directory (MOTS_ARTIFACT_DIR) and
the test set at the worker's paths, on the same volumes. Metrics: every worker binds 0.0.0.0 on
MOTS_METRICS_PORT, and Prometheus (with the k3s NetworkPolicies) may reach that port.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from mots.training.datasets import DEFAULT_DIRS
from tests.deploy.kustomize import containers, pod_specs, render

ROOT = Path(__file__).resolve().parents[2]
DATASET = str(DEFAULT_DIRS["fashion-mnist"])


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return dict(yaml.safe_load((ROOT / "docker/compose.yaml").read_text()))


@pytest.fixture(scope="module")
def overlay() -> list[dict[str, Any]]:
    return render(ROOT / "k8s/overlays/k3s-pi")


def _compose_mounts(svc: dict[str, Any]) -> dict[str, str]:
    """target path → source (volume name or host path) of a compose service."""
    out = {}
    for volume in svc.get("volumes", []):
        source = (
            volume[: volume.index("}") + 1] if volume.startswith("${") else volume.split(":")[0]
        )
        target = volume[len(source) + 1 :].split(":")[0]
        out[target] = source
    return out


def test_compose_orchestration_worker_trains_on_the_compose_superlink(
    compose: dict[str, Any],
) -> None:
    """The worker's SuperLink address is the superlink service; both see the same run files."""
    services = compose["services"]
    worker, superlink = services["orchestration-worker"], services["superlink"]
    env = worker["environment"]
    host, port = env["MOTS_SUPERLINK_ADDRESS"].split(":")
    assert host == "superlink"
    assert f"127.0.0.1:{port}:{port}" in superlink["ports"]
    # compose keeps the image's command: the SuperLink listens on that port
    assert "command" not in superlink
    dockerfile = (ROOT / "docker/superlink/Dockerfile").read_text()
    assert f'"--port", "{port}"' in dockerfile
    assert set(worker["networks"]) & set(superlink["networks"]), "no shared network"
    assert worker["depends_on"]["superlink"] == {"condition": "service_healthy"}
    w, s = _compose_mounts(worker), _compose_mounts(superlink)
    for path in (env["MOTS_WORK_DIR"], env["MOTS_ARTIFACT_DIR"]):
        assert s.get(path) == w[path], f"superlink must mount {w[path]} at {path}"
        assert f"{s[path]}:{path}" in superlink["volumes"], f"{path} must be writable there"
    assert s.get(DATASET) == w[DATASET], "the ServerApp evaluates on the worker's test set"


def test_compose_workers_serve_metrics_on_all_interfaces(compose: dict[str, Any]) -> None:
    """Every worker with a metrics port binds 0.0.0.0 and shares a network with Prometheus."""
    services = compose["services"]
    workers = {n: s for n, s in services.items() if n.endswith("-worker")}
    assert set(workers) == {
        "market-worker",
        "pricing-worker",
        "orchestration-worker",
        "evaluation-worker",
    }
    for name, svc in workers.items():
        env = svc["environment"]
        assert int(env["MOTS_METRICS_PORT"]) > 0, name
        assert env["MOTS_METRICS_HOST"] == "0.0.0.0", name
        nets = svc.get("networks", ["default"])
        assert set(nets) & set(services["prometheus"]["networks"]), name


def _env(container: dict[str, Any], config_maps: dict[str, dict[str, str]]) -> dict[str, str]:
    env = {}
    for source in container.get("envFrom", []):
        env.update(config_maps[source["configMapRef"]["name"]])
    env.update({e["name"]: e["value"] for e in container.get("env", []) if "value" in e})
    return env


def _mounts(r: dict[str, Any], container: dict[str, Any]) -> dict[str, str]:
    """mount path → claim name or hostPath of a container of workload ``r``."""
    volumes = {}
    for spec in pod_specs(r):
        for v in spec.get("volumes", []):
            if "persistentVolumeClaim" in v:
                volumes[v["name"]] = "pvc:" + v["persistentVolumeClaim"]["claimName"]
            elif "hostPath" in v:
                volumes[v["name"]] = "host:" + v["hostPath"]["path"]
            else:
                volumes[v["name"]] = "other:" + v["name"]
    mounts = container.get("volumeMounts", [])
    return {m["mountPath"]: volumes.get(m["name"], "template:" + m["name"]) for m in mounts}


def _workload(overlay: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (r,) = [x for x in overlay if x["kind"] == kind and x["metadata"]["name"] == name]
    return r


def test_k8s_orchestration_worker_trains_on_the_superlink_service(
    overlay: list[dict[str, Any]],
) -> None:
    """The address is the SuperLink Service; the StatefulSet mounts the worker's claims and data."""
    config_maps = {
        r["metadata"]["name"]: r.get("data", {}) for r in overlay if r["kind"] == "ConfigMap"
    }
    worker_r = _workload(overlay, "Deployment", "orchestration-worker")
    (worker,) = containers(worker_r)
    env = _env(worker, config_maps)
    host, port = env["MOTS_SUPERLINK_ADDRESS"].split(":")
    service = _workload(overlay, "Service", host)
    assert int(port) in [p["port"] for p in service["spec"]["ports"]]
    superlink_r = _workload(overlay, "StatefulSet", "superlink")
    assert (
        service["spec"]["selector"].items()
        <= superlink_r["spec"]["template"]["metadata"]["labels"].items()
    )
    (superlink,) = containers(superlink_r)
    w, s = _mounts(worker_r, worker), _mounts(superlink_r, superlink)
    for path in (env["MOTS_WORK_DIR"], env["MOTS_ARTIFACT_DIR"]):
        assert w[path].startswith("pvc:"), f"{path} must be a claim both pods mount"
        assert s.get(path) == w[path], f"superlink must mount {w[path]} at {path}"
    assert s.get(DATASET) == w[DATASET]


def test_k8s_prometheus_may_scrape_every_worker(overlay: list[dict[str, Any]]) -> None:
    """Each service worker binds 0.0.0.0 on a port named "metrics" that a policy admits from
    Prometheus (the namespace denies ingress by default)."""
    config_maps = {
        r["metadata"]["name"]: r.get("data", {}) for r in overlay if r["kind"] == "ConfigMap"
    }
    policies = [r["spec"] for r in overlay if r["kind"] == "NetworkPolicy"]
    workers = [
        r
        for r in overlay
        if r["kind"] == "Deployment"
        and r["spec"]["template"]["metadata"]["labels"].get("app.kubernetes.io/component")
        == "worker"
    ]
    assert {r["metadata"]["name"] for r in workers} == {
        "market-worker",
        "pricing-worker",
        "orchestration-worker",
        "evaluation-worker",
    }
    for r in workers:
        labels = r["spec"]["template"]["metadata"]["labels"]
        (c,) = containers(r)
        env = _env(c, config_maps)
        port = int(env["MOTS_METRICS_PORT"])
        assert env["MOTS_METRICS_HOST"] == "0.0.0.0", r["metadata"]["name"]
        assert {"name": "metrics", "containerPort": port} in c["ports"]
        admitted = [
            p
            for p in policies
            if all(labels.get(k) == v for k, v in p["podSelector"].get("matchLabels", {}).items())
            and not p["podSelector"].get("matchExpressions")
            and any(
                {"podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}}
                in rule.get("from", [])
                and {"protocol": "TCP", "port": port} in rule.get("ports", [])
                for rule in p.get("ingress", [])
            )
        ]
        assert admitted, f"no NetworkPolicy admits Prometheus to {r['metadata']['name']}:{port}"
