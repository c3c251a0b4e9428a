"""The k3s-pi overlay's way in: one Traefik Ingress, HTTPS only, for the market, the orchestration
API and Grafana, each backend a rendered Service port that the NetworkPolicies open to Traefik."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.deploy.kustomize import Resource, render

ROOT = Path(__file__).resolve().parents[2]
TRAEFIK = {"kubernetes.io/metadata.name": "kube-system"}
"""Where k3s runs its bundled Traefik (the namespace the NetworkPolicies admit)."""


@pytest.fixture(scope="module")
def overlay() -> list[Resource]:
    return render(ROOT / "k8s/overlays/k3s-pi")


def _one(resources: list[Resource], kind: str, name: str) -> Resource:
    (r,) = [r for r in resources if r["kind"] == kind and r["metadata"]["name"] == name]
    return r


def _backends(ingress: Resource) -> dict[str, tuple[str, str]]:
    """host -> (Service, port name) of every rule."""
    out = {}
    for rule in ingress["spec"]["rules"]:
        (path,) = rule["http"]["paths"]
        service = path["backend"]["service"]
        out[rule["host"]] = (service["name"], service["port"]["name"])
    return out


def test_the_ingress_serves_three_apis_over_https_only(overlay: list[Resource]) -> None:
    """Traefik's class, its websecure entrypoint only (plain HTTP reaches no router), TLS from
    mots-ingress-tls covering every host; the market, orchestration API and Grafana behind."""
    (ingress,) = [r for r in overlay if r["kind"] == "Ingress"]
    assert ingress["spec"]["ingressClassName"] == "traefik"
    notes = ingress["metadata"]["annotations"]
    assert notes["traefik.ingress.kubernetes.io/router.entrypoints"] == "websecure"
    assert notes["traefik.ingress.kubernetes.io/router.tls"] == "true"
    (tls,) = ingress["spec"]["tls"]
    assert tls["secretName"] == "mots-ingress-tls"
    backends = _backends(ingress)
    assert set(tls["hosts"]) == set(backends)
    assert sorted(s for s, _ in backends.values()) == ["grafana", "market", "orchestration"]


def _pod_labels(resources: list[Resource], selector: dict[str, str]) -> list[dict[str, str]]:
    out = []
    for r in resources:
        if r["kind"] in ("Deployment", "StatefulSet"):
            labels = r["spec"]["template"]["metadata"]["labels"]
            if all(labels.get(k) == v for k, v in selector.items()):
                out.append(labels)
    return out


def _admits_traefik(policy: dict[str, Any], labels: dict[str, str], port: int) -> bool:
    sel = policy["podSelector"]
    if not all(labels.get(k) == v for k, v in sel.get("matchLabels", {}).items()):
        return False
    for expr in sel.get("matchExpressions", []):
        if expr["operator"] == "In" and labels.get(expr["key"]) not in expr["values"]:
            return False
    for rule in policy.get("ingress", []):
        sources = [f.get("namespaceSelector", {}).get("matchLabels") for f in rule["from"]]
        ports = {p["port"] for p in rule.get("ports", [])}
        if TRAEFIK in sources and port in ports:
            return True
    return False


def test_each_backend_is_a_service_port_traefik_may_reach(overlay: list[Resource]) -> None:
    """The named port exists on the Service; every pod behind it is admitted from kube-system on
    the port the Service targets (default-deny otherwise)."""
    (ingress,) = [r for r in overlay if r["kind"] == "Ingress"]
    policies = [r["spec"] for r in overlay if r["kind"] == "NetworkPolicy"]
    for service_name, port_name in _backends(ingress).values():
        service = _one(overlay, "Service", service_name)
        (port,) = [p for p in service["spec"]["ports"] if p["name"] == port_name]
        pods = _pod_labels(overlay, service["spec"]["selector"])
        assert pods, service_name
        target = port.get("targetPort", port["port"])
        number = port["port"] if isinstance(target, str) else target
        for labels in pods:
            assert any(_admits_traefik(p, labels, number) for p in policies), (
                service_name,
                labels,
            )
