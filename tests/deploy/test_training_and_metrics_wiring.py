"""Compose and k8s wire the training worker (the orchestration's rounds trained on their own
queue) to the deployed SuperLink and expose the workers' metrics to Prometheus (the integration
the services and the deployment must agree on).

Training: MOTS_SUPERLINK_ADDRESS names the SuperLink's Control API, which only the orchestration
reaches (its own network in compose, its own Service and port in k8s), while the SuperNodes reach
the Fleet API alone; nothing runs Flower with --insecure. The SuperLink, which runs the ServerApp,
mounts the run directory (MOTS_FEDERATION_DIR), the artifact directory (MOTS_ARTIFACT_DIR) and the test
set at the worker's paths, on the same volumes, and publishes its CA certificate where the worker
(MOTS_FEDERATION_DIR/tls/ca.crt) and the SuperNodes (MOTS_EDGE_ROOT_CERTIFICATES) read it. Metrics: every worker binds 0.0.0.0 on
MOTS_METRICS_PORT, and Prometheus (with the k3s NetworkPolicies) may reach that port.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from mots.training.datasets import DEFAULT_DIRS
from tests.deploy.kustomize import config_maps as rendered_config_maps
from tests.deploy.kustomize import containers, pod_specs, render, unhashed

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


def _arg(argv: list[str], flag: str) -> str:
    """The value of ``--flag value`` or ``--flag=value`` in an argument list."""
    for i, a in enumerate(argv):
        if a == flag:
            return argv[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    raise AssertionError(f"{flag} is not in {argv}")


def _args(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == flag] + [
        a.split("=", 1)[1] for a in argv if a.startswith(flag + "=")
    ]


def test_compose_training_worker_trains_on_the_compose_superlink(
    compose: dict[str, Any],
) -> None:
    """The worker's SuperLink address is the superlink service's Control API at its fixed
    address on the control network (podman's internal networks resolve no names), a network no
    SuperNode is on; both see the same run files; TLS and node authentication are on."""
    services = compose["services"]
    worker, superlink = services["training-worker"], services["superlink"]
    command = worker["command"]
    assert command[command.index("-Q") + 1] == "training"
    assert "services.orchestration.training_worker" in command
    env = worker["environment"]
    host, port = env["MOTS_SUPERLINK_ADDRESS"].split(":")
    argv = superlink["command"]
    control_ip = _arg(argv, "--host")
    assert host == control_ip
    assert _arg(argv, "--port") == port and "--insecure" not in argv
    assert "--enable-supernode-auth" in argv and _arg(argv, "--tls-dir")
    control = set(worker["networks"]) & set(superlink["networks"])
    assert control == {"control"}, "the worker reaches the SuperLink on the control network only"
    assert superlink["networks"]["control"]["ipv4_address"] == control_ip
    assert control_ip in _args(argv, "--tls-host") and "superlink" in _args(argv, "--tls-host")
    supernodes = {n: s for n, s in services.items() if n.startswith("supernode-")}
    assert supernodes
    for name, node in supernodes.items():
        assert "control" not in node["networks"], f"{name} must not reach the Control API"
        edge_host, edge_port = node["environment"]["MOTS_EDGE_SUPERLINK_ADDRESS"].split(":")
        assert (edge_host, edge_port) == ("superlink", _arg(argv, "--fleet-port"))
        ca = Path(node["environment"]["MOTS_EDGE_ROOT_CERTIFICATES"])
        source = _compose_mounts(node)[str(ca.parent)]
        published = {_compose_mounts(superlink).get(str(Path(p).parent)): Path(p).name
                     for p in _args(argv, "--publish-ca")}  # fmt: skip
        assert published.get(source) == ca.name, f"{name}: the CA is not published to {ca}"
    assert f"{env['MOTS_FEDERATION_DIR']}/tls/ca.crt" in _args(argv, "--publish-ca")
    assert worker["depends_on"]["superlink"] == {"condition": "service_healthy"}
    w, s = _compose_mounts(worker), _compose_mounts(superlink)
    for path in (env["MOTS_FEDERATION_DIR"], env["MOTS_ARTIFACT_DIR"]):
        assert s.get(path) == w[path], f"superlink must mount {w[path]} at {path}"
        assert f"{s[path]}:{path}" in superlink["volumes"], f"{path} must be writable there"
    assert s.get(DATASET) == w[DATASET], "the ServerApp evaluates on the worker's test set"


def test_compose_workers_serve_metrics_on_all_interfaces(compose: dict[str, Any]) -> None:
    """Every worker with a metrics port binds 0.0.0.0 and shares a network with Prometheus."""
    services = compose["services"]
    workers = {n: s for n, s in services.items() if n.endswith("-worker")}
    assert set(workers) == {
        "market-worker",
        "orchestration-worker",
        "evaluation-worker",
        "training-worker",
    }  # no pricing-worker: a round prices in process, pricing answers on its API (issue 38)
    for name, svc in workers.items():
        env = svc["environment"]
        assert int(env["MOTS_METRICS_PORT"]) > 0, name
        assert env["MOTS_METRICS_HOST"] == "0.0.0.0", name
        nets = svc.get("networks", ["default"])
        assert set(nets) & set(services["prometheus"]["networks"]), name


def _env(container: dict[str, Any], config_maps: dict[str, dict[str, str]]) -> dict[str, str]:
    env = {}
    for source in container.get("envFrom", []):
        env.update(config_maps[unhashed(source["configMapRef"]["name"])])
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


def test_k8s_training_worker_trains_on_the_superlink_service(
    overlay: list[dict[str, Any]],
) -> None:
    """The address is the SuperLink Service; the StatefulSet mounts the worker's claims and data."""
    config_maps = rendered_config_maps(overlay)
    worker_r = _workload(overlay, "Deployment", "training-worker")
    (worker,) = containers(worker_r)
    assert worker["command"][worker["command"].index("-Q") + 1] == "training"
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
    argv = superlink["args"]
    assert "--insecure" not in argv and "--enable-supernode-auth" in argv
    assert _arg(argv, "--port") == port, "the address names the Control API's port"
    assert f"{host}" in _args(argv, "--tls-host"), "the certificate names the Service"
    assert f"{env['MOTS_FEDERATION_DIR']}/tls/ca.crt" in _args(argv, "--publish-ca")
    w, s = _mounts(worker_r, worker), _mounts(superlink_r, superlink)
    for path in (env["MOTS_FEDERATION_DIR"], env["MOTS_ARTIFACT_DIR"]):
        assert w[path].startswith("pvc:"), f"{path} must be a claim both pods mount"
        assert s.get(path) == w[path], f"superlink must mount {w[path]} at {path}"
    assert s.get(DATASET) == w[DATASET]


def test_k8s_edge_reaches_the_fleet_api_only(overlay: list[dict[str, Any]]) -> None:
    """The Pis' address is the Fleet Service and port; the SuperLink's ingress policy admits the
    edge on the Fleet port only and the orchestration on the Control port only; the edge's egress
    allows the Fleet port only."""
    config_maps = rendered_config_maps(overlay)
    edge = config_maps["edge-config"]
    host, port = (
        edge["MOTS_EDGE_SUPERLINK_ADDRESS"].split(".")[0],
        edge["MOTS_EDGE_SUPERLINK_ADDRESS"].rsplit(":", 1)[1],
    )
    (superlink,) = containers(_workload(overlay, "StatefulSet", "superlink"))
    fleet_port = _arg(superlink["args"], "--fleet-port")
    control_port = _arg(superlink["args"], "--port")
    assert port == fleet_port != control_port
    assert [p["port"] for p in _workload(overlay, "Service", host)["spec"]["ports"]] == [
        int(fleet_port)
    ]
    (policy,) = [
        r["spec"]
        for r in overlay
        if r["kind"] == "NetworkPolicy" and r["metadata"]["name"] == "superlink-ingress"
    ]
    admitted = {
        (peer["podSelector"]["matchLabels"].get("app.kubernetes.io/component")
         or peer["podSelector"]["matchLabels"].get("app.kubernetes.io/name")):
        sorted(p["port"] for p in rule["ports"])
        for rule in policy["ingress"] for peer in rule["from"]
    }  # fmt: skip
    assert admitted == {"edge": [int(fleet_port)], "orchestration": [int(control_port)]}
    (egress,) = [
        r["spec"]
        for r in overlay
        if r["kind"] == "NetworkPolicy" and r["metadata"]["name"] == "edge-egress"
    ]
    to_superlink = [
        sorted(p["port"] for p in rule["ports"])
        for rule in egress["egress"]
        for peer in rule["to"]
        if peer.get("podSelector", {}).get("matchLabels", {}).get("app.kubernetes.io/name")
        == "superlink"
    ]
    assert to_superlink == [[int(fleet_port)]]


def test_nothing_runs_flower_insecure() -> None:
    """No manifest, compose file or Dockerfile passes --insecure to Flower."""
    files = [
        *ROOT.glob("k8s/**/*.yaml"),
        ROOT / "docker/compose.yaml",
        *ROOT.glob("docker/*/Dockerfile"),
    ]
    offenders = [str(f.relative_to(ROOT)) for f in files if "--insecure" in f.read_text()]
    assert offenders == []


def test_k8s_prometheus_may_scrape_every_worker(overlay: list[dict[str, Any]]) -> None:
    """Each service worker and API binds 0.0.0.0 on a port named "metrics" that a policy admits
    from Prometheus (the namespace denies ingress by default); an API's metrics are not on its
    "http" port, which its clients reach."""
    config_maps = rendered_config_maps(overlay)
    policies = [r["spec"] for r in overlay if r["kind"] == "NetworkPolicy"]
    workers = [
        r
        for r in overlay
        if r["kind"] == "Deployment"
        and r["spec"]["template"]["metadata"]["labels"].get("app.kubernetes.io/component")
        in ("worker", "api", "training")
    ]
    assert {r["metadata"]["name"] for r in workers} == {
        "market",
        "pricing",
        "orchestration",
        "market-worker",
        "orchestration-worker",
        "evaluation-worker",
        "training-worker",
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
