"""The k3s-pi overlay's translation for podman kube play changes nothing inside a container's spec
but what it states (images, spec.nodeName), and maps every Service to exactly one pod."""

from __future__ import annotations

import base64
import copy
import ipaddress
import json
from pathlib import Path

import pytest
import yaml

from tests.containers.kube_translate import (
    NOT_EXPRESSIBLE,
    PREFIX,
    kubectl_secret,
    playbook,
    secret_for_env,
    secret_for_volume,
    service_targets,
)
from tests.deploy.kustomize import Resource, config_maps, containers, pod_specs, render

ROOT = Path(__file__).resolve().parents[2]
NODES = {"supernode": ["pi-01", "pi-11", "pi-16"]}


def _images(resources: list[Resource]) -> dict[str, str]:
    images = {c["image"] for r in resources for c in containers(r)}
    return {i: "localhost/stand-in/" + i.rsplit("/", 1)[-1] for i in images}


@pytest.fixture(scope="module")
def overlay() -> list[Resource]:
    return render(ROOT / "k8s/overlays/k3s-pi")


@pytest.fixture(scope="module")
def book(overlay: list[Resource]):  # type: ignore[no-untyped-def]
    return playbook(overlay, _images(overlay), NODES, "/srv/nodes", "10.90.0.0/24")


def test_every_workload_becomes_pods_kube_play_runs(overlay, book) -> None:  # type: ignore[no-untyped-def]
    names = [n.removeprefix(PREFIX) for n, _, _ in book.pods]
    assert "postgres-0" in names and "superlink-0" in names
    assert "market-pod-0" in names and "orchestration-worker-pod-0" in names
    assert {"supernode-pi-01", "supernode-pi-11", "supernode-pi-16"} <= set(names)
    assert {d["kind"] for _, d, _ in book.pods} == {"Pod", "Deployment"}
    assert len({ip for _, _, ip in book.pods}) == len(book.pods)
    for _, _, ip in book.pods:
        assert ipaddress.ip_address(ip) in ipaddress.ip_network("10.90.0.0/24")
    claims = {c["metadata"]["name"].removeprefix(PREFIX) for c in book.claims}
    assert {"state-superlink-0", "data-postgres-0", "artifacts", "federation"} <= claims


def test_containers_are_unchanged_but_for_image_and_node_name(overlay, book) -> None:  # type: ignore[no-untyped-def]
    """Commands, args, env, mounts, securityContext and probes are the overlay's, key for key
    (an emptyDir's mount by its pod-local name, POD-NAME; a ConfigMap or Secret the container's
    environment comes from by its prefixed name)."""
    source = {r["metadata"]["name"]: r for r in overlay if pod_specs(r)}
    for played, doc, _ in book.pods:
        name = played.removeprefix(PREFIX)
        owner = max((s for s in source if name == s or name.startswith(s + "-")), key=len)
        theirs = copy.deepcopy(containers(source[owner]))
        ours = copy.deepcopy(containers(doc))
        local = {v["name"] for v in pod_specs(doc)[0].get("volumes", []) if "emptyDir" in v}
        for c in ours:
            for m in c.get("volumeMounts", []):
                if m["name"] in local:
                    m["name"] = m["name"].removeprefix(f"{played}-")
            for e in c.get("env", []):
                for ref in e.get("valueFrom", {}).values():
                    if "name" in ref:
                        ref["name"] = ref["name"].removeprefix(PREFIX)
            for e in c.get("envFrom", []):
                for ref in e.values():
                    ref["name"] = ref["name"].removeprefix(PREFIX)
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs, strict=True):
            assert a["image"].startswith("localhost/stand-in/")
            for port in a.get("ports", []):
                assert port.pop("hostIP") == "127.0.0.1" and port.pop("hostPort") > 0
            for e in b.get("env", []):
                if e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "spec.nodeName":
                    e.pop("valueFrom")
                    e["value"] = name.removeprefix(owner + "-")
            assert {k: v for k, v in a.items() if k != "image"} == {
                k: v for k, v in b.items() if k != "image"
            }, name
        spec = pod_specs(doc)[0]
        assert spec["securityContext"] == pod_specs(source[owner])[0]["securityContext"]


def test_service_names_resolve_to_the_pod_their_selector_picks(overlay, book) -> None:  # type: ignore[no-untyped-def]
    targets = service_targets(overlay)
    assert targets["superlink-fleet"] == targets["superlink-control"] == "superlink"
    assert targets["market"] == "market"
    ip = {n.removeprefix(PREFIX): i for n, _, i in book.pods}
    assert book.hosts["market.mots.svc.cluster.local"] == ip["market-pod-0"]
    assert book.hosts["superlink-fleet.mots.svc.cluster.local"] == ip["superlink-0"]
    assert book.hosts["postgres"] == ip["postgres-0"]
    config = config_maps(overlay)["edge-config"]
    for url in (config["MOTS_EDGE_MARKET_URL"], config["MOTS_EDGE_SUPERLINK_ADDRESS"]):
        host = url.split("//")[-1].split(":")[0]
        assert host in book.hosts, url
    for _, doc, _ in book.pods:
        aliases = pod_specs(doc)[0]["hostAliases"]
        assert sorted(h for a in aliases for h in a["hostnames"]) == sorted(book.hosts)


def test_a_service_selecting_no_pod_is_refused(overlay) -> None:  # type: ignore[no-untyped-def]
    broken = copy.deepcopy(overlay)
    svc = next(r for r in broken if r["kind"] == "Service" and r["metadata"]["name"] == "market")
    svc["spec"]["selector"] = {"app.kubernetes.io/name": "nobody"}
    with pytest.raises(ValueError, match="Service market"):
        service_targets(broken)
    broken = copy.deepcopy(overlay)
    svc = next(r for r in broken if r["kind"] == "Service" and r["metadata"]["name"] == "redis")
    svc["spec"]["ports"][0]["targetPort"] = 6380
    with pytest.raises(ValueError, match="targetPort 6380"):
        service_targets(broken)


def test_each_edge_pod_has_its_own_node_disk_and_name(book) -> None:  # type: ignore[no-untyped-def]
    for name, doc, _ in book.pods:
        if not name.startswith(PREFIX + "supernode-"):
            continue
        node = "pi-" + name.rsplit("-", 1)[-1]
        spec = pod_specs(doc)[0]
        paths = [v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v]
        disk = [p for p in paths if p not in ("/proc", "/sys")]  # the node-exporter's kernel
        assert disk and all(p.startswith(f"/srv/nodes/{node}/") for p in disk)
        assert sorted(set(paths) - set(disk)) == ["/proc", "/sys"]
        assert all(v["secret"]["optional"] is False for v in spec["volumes"] if "secret" in v)
        env = {e["name"]: e for c in spec["containers"] for e in c.get("env", [])}
        assert env["MOTS_EDGE_CLIENT_NAME"] == {"name": "MOTS_EDGE_CLIENT_NAME", "value": node}


def test_secrets_are_stored_as_podman_43_reads_them() -> None:
    s = kubectl_secret("mots-secrets", "--from-literal=operator-token=abc", "--from-literal=x=y z")
    assert json.loads(secret_for_env(s)) == {
        "operator-token": base64.b64encode(b"abc").decode(),
        "x": base64.b64encode(b"y z").decode(),
    }
    vol = yaml.safe_load(secret_for_volume(s))
    assert vol["kind"] == "Secret" and vol["data"] == {"operator-token": "abc", "x": "y z"}


def test_not_expressible_names_each_kind_kube_play_refuses(overlay) -> None:  # type: ignore[no-untyped-def]
    played = {"Pod", "Deployment", "PersistentVolumeClaim", "ConfigMap", "Namespace"}
    listed = " ".join(n["what"] for n in NOT_EXPRESSIBLE)
    for kind in {r["kind"] for r in overlay} - played:
        assert kind in listed or kind in ("ServiceAccount", "Role", "RoleBinding"), kind
    assert all(n["nearest_check"] for n in NOT_EXPRESSIBLE)


def test_a_skipped_workload_leaves_no_pod_and_no_service_name(overlay) -> None:  # type: ignore[no-untyped-def]
    book = playbook(
        overlay, _images(overlay), NODES, "/srv/nodes", "10.90.0.0/24", frozenset({"grafana"})
    )
    assert not any(n.startswith(PREFIX + "grafana") for n, _, _ in book.pods)
    assert "grafana" not in book.hosts and "market" in book.hosts


def test_podman_43_volume_quirks_are_translated(overlay) -> None:  # type: ignore[no-untyped-def]
    """podman 4.3 names an emptyDir's volume by the volume's name (shared by every pod using it)
    and never mounts a secret volume with optional: true, even when the Secret exists: each
    emptyDir becomes POD-NAME with its mounts, and a Secret the run creates is non-optional (the
    SuperLink got no TLS Secret, made its own CA, and the SuperNodes exited 305)."""
    book = playbook(overlay, _images(overlay), NODES, "/srv/nodes", "10.90.0.0/24",
                    created_secrets=frozenset({"superlink-tls"}))  # fmt: skip
    empty: list[str] = []
    for name, doc, _ in book.pods:
        for spec in pod_specs(doc):
            volumes = {v["name"]: v for v in spec.get("volumes", [])}
            empty += [n for n, v in volumes.items() if "emptyDir" in v]
            assert all(n.startswith(f"{name}-") for n, v in volumes.items() if "emptyDir" in v)
            for c in spec.get("initContainers", []) + spec["containers"]:
                assert all(m["name"] in volumes for m in c.get("volumeMounts", [])), name
    assert empty and len(empty) == len(set(empty))
    superlink = pod_specs(next(d for n, d, _ in book.pods if n == PREFIX + "superlink-0"))[0]
    tls_name = PREFIX + "superlink-tls"
    tls = next(v for v in superlink["volumes"] if v.get("secret", {}).get("secretName") == tls_name)
    assert tls["secret"]["optional"] is False
    uncreated = playbook(overlay, _images(overlay), NODES, "/srv/nodes", "10.90.0.0/24")
    superlink = pod_specs(next(d for n, d, _ in uncreated.pods if n == PREFIX + "superlink-0"))[0]
    tls = next(v for v in superlink["volumes"] if v.get("secret", {}).get("secretName") == tls_name)
    assert tls["secret"]["optional"] is True  # a Secret not created stays optional, as in k8s


def test_everything_played_is_named_with_a_cleanup_prefix(overlay, book) -> None:  # type: ignore[no-untyped-def]
    """Every pod, claim, ConfigMap and pod-local volume the play creates, and every claim,
    ConfigMap and Secret a pod names, carries the prefix run.py's PREFIXES clean up and count
    (kube play also makes a volume per ConfigMap and Secret volume, named after it); each pod's
    hostname stays its k3s name (what the container sees)."""
    from tests.containers import kube_play
    from tests.containers.run import PREFIXES

    assert PREFIX.startswith(tuple(PREFIXES)) and kube_play.NETWORK.startswith(tuple(PREFIXES))
    assert all(n.startswith(PREFIX) for n, _, _ in book.pods)
    assert all(c["metadata"]["name"].startswith(PREFIX) for c in book.claims)
    assert all(c["metadata"]["name"].startswith(PREFIX) for c in book.config_maps)
    named = {
        r["metadata"]["name"]
        for r in overlay
        if r["kind"] in ("ConfigMap", "PersistentVolumeClaim")
    }
    seen = set()
    for name, doc, _ in book.pods:
        assert doc["metadata"]["name"].startswith(PREFIX)  # a Deployment's pod: NAME-pod-0
        for spec in pod_specs(doc):
            assert spec["hostname"] == name.removeprefix(PREFIX)
            for v in spec.get("volumes", []):
                ref = (v.get("persistentVolumeClaim", {}).get("claimName")
                       or v.get("configMap", {}).get("name") or v.get("secret", {}).get("secretName"))  # fmt: skip
                if "emptyDir" in v:
                    assert v["name"].startswith(name + "-")
                elif ref is not None:
                    assert ref.startswith(PREFIX), (name, v)
                    seen.add(ref.removeprefix(PREFIX))
            for c in spec["containers"]:
                refs = [r for e in c.get("env", []) for r in e.get("valueFrom", {}).values()]
                refs += [r for e in c.get("envFrom", []) for r in e.values()]
                for r in refs:
                    if "name" in r:
                        assert r["name"].startswith(PREFIX), (name, r)
                        seen.add(r["name"].removeprefix(PREFIX))
    assert {
        "superlink-tls",
        "mots-secrets",
        "superlink-ca",
        "artifacts",
        "enrolment",
    } <= seen
    assert (
        seen
        - {"superlink-tls", "mots-secrets", "superlink-ca"}
        - {"enrolment"}
        - {"state-superlink-0", "data-postgres-0"}
        <= named
    )


def test_a_pod_spec_is_unchanged_by_the_prefix_but_for_names(overlay) -> None:  # type: ignore[no-untyped-def]
    """With an empty prefix the translation is the one before: names are its only change."""
    plain = playbook(overlay, _images(overlay), NODES, "/srv/nodes", "10.90.0.0/24", prefix="")
    assert "postgres-0" in [n for n, _, _ in plain.pods]
    assert "artifacts" in {c["metadata"]["name"] for c in plain.claims}
