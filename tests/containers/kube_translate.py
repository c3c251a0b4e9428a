"""The rendered k3s-pi overlay as podman 4.3 `kube play` can run it: a small, stated translation.

`podman kube play` (4.3) runs Pods, Deployments and PersistentVolumeClaims. Everything else the
overlay ships is translated here, changing nothing a container sees of its own spec (commands,
args, env, mounts, runAsUser, read-only root filesystems, probes):

- a StatefulSet's template becomes the Pod ``NAME-0``, its volumeClaimTemplates the claims
  ``TEMPLATE-NAME-0`` (what the StatefulSet controller does); a DaemonSet's template becomes one Pod
  per emulated node, ``NAME-NODE``;
- Service DNS: each Service's name (short, ``.mots``, ``.mots.svc``, ``.mots.svc.cluster.local``)
  goes into the pods' ``hostAliases``, pointing at the static address of the one pod template the
  Service's selector matches (``service_targets`` checks it matches exactly one, on a port the
  pod's containers declare);
- a hostPath is prefixed with the emulated node's root (each Pi has its own disk), but for the
  kernel's /proc and /sys (the node-exporter's): the emulated Pis share the host's kernel;
- ``fieldRef: spec.nodeName`` (unsupported by podman 4.3) becomes the emulated node's name;
- ports: podman 4.3 publishes every containerPort on the host; each gets a free hostPort on
  127.0.0.1 (``hostIP``/``hostPort`` added, containerPort unchanged);
- images: ours are rewritten to the locally built tags (as the overlay's ``images:`` block does
  for a registry), third-party ones to the local stand-ins;
- names: every pod, claim, ConfigMap and Secret the play creates is named ``PREFIX`` + its k3s name
  (``mots-kp-``, one of tests/containers/run.py's PREFIXES, so cleanup and the leftover count see
  every pod and every volume kube play makes, including those it names after a ConfigMap or
  Secret), the references to them renamed with them; each pod keeps its k3s name as its
  ``hostname``, which is all a container sees of its pod's name;
- podman 4.3 quirks: a secret volume needs ``optional`` set (4.3 dereferences it), and one with
  ``optional: true`` is never mounted, even when the Secret exists (seen: the SuperLink made its
  own CA, and every SuperNode, given the README's CA, exited 305 on "certificate signature
  failure"), so a Secret the run creates is mounted with ``optional: false`` (what k8s does with
  an optional Secret that exists); 4.3 makes an emptyDir a named volume called by the volume's name,
  shared by every pod that uses the name (one /tmp for all pods, one Flower home for the
  SuperLink and every SuperNode), so each emptyDir is renamed ``POD-NAME`` (its mounts with it);
  secrets are stored as 4.3 reads them (``secret_for_env``, ``secret_for_volume``).

What kube play cannot express at all is listed by ``NOT_EXPRESSIBLE`` with the nearest check made.
"""

from __future__ import annotations

import base64
import copy
import ipaddress
import json
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tests.deploy.kustomize import Resource, containers, kubectl, pod_specs

NAMESPACE = "mots"
PREFIX = "mots-kp-"
WORKLOADS = ("Deployment", "StatefulSet", "DaemonSet")

NOT_EXPRESSIBLE: list[dict[str, str]] = [
    {
        "what": "Service (ClusterIP, DNS)",
        "nearest_check": "each Service's selector matches exactly one pod template on a declared "
        "port; its names resolve through hostAliases to that pod's static address",
    },
    {
        "what": "NetworkPolicy",
        "nearest_check": "every policy's podSelector and from/to selectors match rendered pod "
        "labels (static); no enforcement on a podman network",
    },
    {
        "what": "scheduling (nodeSelector, affinity, tolerations on labelled nodes)",
        "nearest_check": "selectors checked statically (arm64 + mots.io/edge on the edge "
        "DaemonSet, control plane off mots.io/edge); every pod runs on this one host",
    },
    {
        "what": "DaemonSet",
        "nearest_check": "its pod template played as one Pod per emulated node",
    },
    {
        "what": "StatefulSet",
        "nearest_check": "its pod template played as Pod NAME-0 with claims TEMPLATE-NAME-0",
    },
    {
        "what": "Ingress (k3s' Traefik, HTTPS only)",
        "nearest_check": "rules, TLS hosts, websecure-only entrypoint, backend Service ports and "
        "the NetworkPolicies admitting Traefik checked on the render (tests/k8s/test_ingress.py)",
    },
    {
        "what": "CronJob (the PostgreSQL backup and its suspended restore)",
        "nearest_check": "the same backup.sh and restore.sh run by compose's postgres-backup "
        "service in the restore drill (tests/containers/restore.py); the CronJobs checked on "
        "the render (tests/k8s/test_backups.py)",
    },
    {
        "what": "PodDisruptionBudget",
        "nearest_check": "selector matches the rendered pods (static); no drains here",
    },
    {
        "what": "readiness and startup probes; gRPC and exec liveness probes",
        "nearest_check": "podman 4.3 turns only an HTTP/TCP liveness probe into a health check "
        "(and runs none without systemd): every probe is run by the harness with podman exec",
    },
    {
        "what": "fieldRef spec.nodeName; secret defaultMode",
        "nearest_check": "nodeName set to the emulated node's name; secret files are 0644 root "
        "(podman 4.3 ignores defaultMode), readable by uid 10001 as on k3s",
    },
    {
        "what": "RBAC (ServiceAccount, Role, RoleBinding) and Prometheus' Kubernetes discovery",
        "nearest_check": "not run: no API server; Prometheus' scrape config is rendered only",
    },
]


def service_hostnames(name: str) -> list[str]:
    """The names a Service answers to inside the namespace and from the cluster."""
    svc = f"{name}.{NAMESPACE}.svc"
    return [name, f"{name}.{NAMESPACE}", svc, f"{svc}.cluster.local"]


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def _template_labels(r: Resource) -> dict[str, str]:
    labels: dict[str, str] = r["spec"]["template"]["metadata"].get("labels", {})
    return labels


def _declared_ports(r: Resource) -> set[int | str]:
    out: set[int | str] = set()
    for c in containers(r):
        for p in c.get("ports", []):
            out.add(p["containerPort"])
            if "name" in p:
                out.add(p["name"])
    return out


def service_targets(resources: list[Resource]) -> dict[str, str]:
    """Service name -> the one workload its selector picks; raises if none/several or a bad port."""
    workloads = [r for r in resources if r["kind"] in WORKLOADS]
    out: dict[str, str] = {}
    for svc in (r for r in resources if r["kind"] == "Service"):
        name = svc["metadata"]["name"]
        hits = [w for w in workloads if _selects(svc["spec"]["selector"], _template_labels(w))]
        if len(hits) != 1:
            got = [w["metadata"]["name"] for w in hits]
            raise ValueError(f"Service {name}: selector matches {got}, expected one workload")
        ports = _declared_ports(hits[0])
        for p in svc["spec"]["ports"]:
            target = p.get("targetPort", p["port"])
            if target not in ports:
                raise ValueError(f"Service {name}: targetPort {target} not declared by the pod")
        out[name] = hits[0]["metadata"]["name"]
    return out


@dataclass
class Playbook:
    """What `podman kube play` runs, in start order, with each pod's static address."""

    pods: list[tuple[str, Resource, str]] = field(default_factory=list)  # (pod name, doc, ip)
    claims: list[Resource] = field(default_factory=list)
    config_maps: list[Resource] = field(default_factory=list)
    hosts: dict[str, str] = field(default_factory=dict)  # hostname -> ip
    prefix: str = PREFIX

    def name(self, k3s_name: str) -> str:
        """The play's name of an object (pod, claim, ConfigMap, Secret) k3s names ``k3s_name``."""
        return self.prefix + k3s_name

    def k3s_name(self, name: str) -> str:
        """The k3s name of a played object (its name without the prefix)."""
        return name.removeprefix(self.prefix)


def _rewrite_images(spec: dict[str, Any], images: dict[str, str]) -> None:
    for c in spec.get("initContainers", []) + spec["containers"]:
        name = c["image"].rsplit(":", 1)[0] if "@" not in c["image"] else c["image"]
        for src, dst in images.items():
            if c["image"] == src or name == src:
                c["image"] = dst
                break
        else:
            raise ValueError(f"no local image for {c['image']}")


KERNEL_PATHS = ("/proc", "/sys")
"""hostPaths that are the node's kernel, not its disk: every emulated Pi reads the host's."""


def _pod_spec_for_node(spec: dict[str, Any], node: str, node_root: str) -> None:
    """The per-node parts: hostPath under the node's root, spec.nodeName as the node's name."""
    for v in spec.get("volumes", []):
        if "hostPath" in v and v["hostPath"]["path"] not in KERNEL_PATHS:
            v["hostPath"]["path"] = node_root.rstrip("/") + v["hostPath"]["path"]
        if "secret" in v and "optional" not in v["secret"]:
            v["secret"]["optional"] = False
    for c in spec.get("initContainers", []) + spec["containers"]:
        for e in c.get("env", []):
            ref = e.get("valueFrom", {}).get("fieldRef", {})
            if ref.get("fieldPath") == "spec.nodeName":
                del e["valueFrom"]
                e["value"] = node


def _pod_local_volumes(spec: dict[str, Any], pod: str, created_secrets: frozenset[str]) -> None:
    """podman 4.3's volume quirks (module docstring): each emptyDir renamed ``POD-NAME`` with its
    mounts, so that no two pods share it; a created Secret's optional volume made non-optional,
    so that it is mounted."""
    renamed = {}
    for v in spec.get("volumes", []):
        if "emptyDir" in v:
            renamed[v["name"]] = v["name"] = f"{pod}-{v['name']}"
        if "secret" in v and v["secret"].get("secretName") in created_secrets:
            v["secret"]["optional"] = False
    for c in spec.get("initContainers", []) + spec["containers"]:
        for m in c.get("volumeMounts", []):
            m["name"] = renamed.get(m["name"], m["name"])


# Where a pod spec names a claim, ConfigMap or Secret: (container of the reference, its key).
_VOLUME_REFS = (
    ("persistentVolumeClaim", "claimName"),
    ("configMap", "name"),
    ("secret", "secretName"),
)
_ENV_REFS = ("secretKeyRef", "configMapKeyRef")
_ENV_FROM_REFS = ("secretRef", "configMapRef")


def _prefix_refs(spec: dict[str, Any], prefix: str) -> None:
    """Every claim, ConfigMap and Secret the pod spec names, renamed ``prefix`` + name (the
    objects are created under those names); the files and variables a container gets are
    the same."""
    for v in spec.get("volumes", []):
        for kind, key in _VOLUME_REFS:
            if kind in v:
                v[kind][key] = prefix + v[kind][key]
    for c in spec.get("initContainers", []) + spec["containers"]:
        for e in c.get("env", []):
            for kind in _ENV_REFS:
                if kind in e.get("valueFrom", {}):
                    e["valueFrom"][kind]["name"] = prefix + e["valueFrom"][kind]["name"]
        for e in c.get("envFrom", []):
            for kind in _ENV_FROM_REFS:
                if kind in e:
                    e[kind]["name"] = prefix + e[kind]["name"]


def _publish_on_loopback(spec: dict[str, Any], free_port: Iterator[int]) -> None:
    """podman 4.3 publishes every containerPort on the host (hostPort defaults to it, on all
    addresses): give each a free hostPort on 127.0.0.1 so pods neither clash with each other or
    the host's services nor listen beyond this machine. Pods still reach each other directly."""
    for c in spec.get("initContainers", []) + spec["containers"]:
        for p in c.get("ports", []):
            p["hostIP"] = "127.0.0.1"
            p["hostPort"] = next(free_port)


def _as_pod(r: Resource, name: str) -> Resource:
    tmpl = copy.deepcopy(r["spec"]["template"])
    meta = {"name": name, "labels": tmpl["metadata"].get("labels", {})}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": tmpl["spec"]}


def _statefulset(r: Resource) -> tuple[Resource, list[Resource]]:
    """Pod ``NAME-0`` and its claims ``TEMPLATE-NAME-0`` (k3s names; prefixed by the caller)."""
    name = f"{r['metadata']['name']}-0"
    pod = _as_pod(r, name)
    claims = []
    for t in r["spec"].get("volumeClaimTemplates", []):
        claim = f"{t['metadata']['name']}-{name}"
        claims.append(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": claim},
                "spec": t["spec"],
            }
        )
        pod["spec"].setdefault("volumes", []).append(
            {"name": t["metadata"]["name"], "persistentVolumeClaim": {"claimName": claim}}
        )
    return pod, claims


def playbook(
    resources: list[Resource],
    images: dict[str, str],
    nodes: dict[str, list[str]],
    node_root: str,
    subnet: str,
    skip: frozenset[str] = frozenset(),
    created_secrets: frozenset[str] = frozenset(),
    prefix: str = PREFIX,
) -> Playbook:
    """Translate the rendered overlay; ``nodes`` maps a DaemonSet to the emulated nodes it runs on.

    Control-plane pods get the node ``server`` (root ``node_root/server``), edge pods their node.
    Workloads named in ``skip`` (no image here) are left out, and so are their Services' names.
    ``created_secrets``: the Secrets the run creates (their optional volumes are mounted), by
    their k3s names. Every pod, claim and ConfigMap is named ``prefix`` + its k3s name.
    """
    net = ipaddress.ip_network(subnet)
    addresses = (str(a) for a in list(net.hosts())[9:])  # .10 onwards; the gateway is .1
    free_port = _free_ports()
    book = Playbook(
        claims=[copy.deepcopy(r) for r in resources if r["kind"] == "PersistentVolumeClaim"],
        config_maps=[copy.deepcopy(r) for r in resources if r["kind"] == "ConfigMap"],
        prefix=prefix,
    )
    targets = service_targets(resources)
    ip_of: dict[str, str] = {}
    rank = {"StatefulSet": 0, "Deployment": 1, "DaemonSet": 2}
    order = sorted(
        (r for r in resources if r["kind"] in WORKLOADS),
        key=lambda r: (rank[r["kind"]], r["metadata"]["name"]),
    )  # PostgreSQL and the SuperLink first, the edge pods last
    for r in order:
        wname = r["metadata"]["name"]
        if wname in skip:
            continue
        if r["kind"] == "DaemonSet":
            for node in nodes.get(wname, []):
                pod = _as_pod(r, f"{wname}-{node}")
                _pod_spec_for_node(pod["spec"], node, f"{node_root}/{node}")
                book.pods.append((pod["metadata"]["name"], pod, next(addresses)))
            continue
        if r["kind"] == "StatefulSet":
            doc, claims = _statefulset(r)
            book.claims.extend(claims)
            name = doc["metadata"]["name"]
        else:
            doc = copy.deepcopy(r)
            doc["spec"]["replicas"] = 1
            name = f"{wname}-pod-0"  # kube play's name for a Deployment's first pod
        for spec in pod_specs(doc):
            _pod_spec_for_node(spec, "server", f"{node_root}/server")
        ip_of[wname] = next(addresses)
        book.pods.append((name, doc, ip_of[wname]))
    for svc, wname in targets.items():
        if wname in skip:
            continue
        for host in service_hostnames(svc):
            book.hosts[host] = ip_of[wname]
    aliases: dict[str, list[str]] = {}
    for host, ip in book.hosts.items():
        aliases.setdefault(ip, []).append(host)
    for i, (name, doc, ip) in enumerate(book.pods):
        doc["metadata"]["name"] = book.name(doc["metadata"]["name"])  # kube play names its pod
        for spec in pod_specs(doc):
            _pod_local_volumes(spec, book.name(name), created_secrets)
            _rewrite_images(spec, images)
            _publish_on_loopback(spec, free_port)
            _prefix_refs(spec, prefix)
            spec.setdefault("hostname", name)  # what the container sees: the k3s name
            spec["hostAliases"] = [{"ip": ip, "hostnames": hs} for ip, hs in aliases.items()]
        book.pods[i] = (book.name(name), doc, ip)
    for obj in (*book.claims, *book.config_maps):
        obj["metadata"]["name"] = book.name(obj["metadata"]["name"])
    return book


def _free_ports() -> Iterator[int]:
    """Ports free on 127.0.0.1 now (the kernel's choice), never the same twice."""
    seen: set[int] = set()
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in seen:
            seen.add(port)
            yield port


def kubectl_secret(name: str, *flags: str) -> Resource:
    """The Secret `kubectl create secret generic NAME FLAGS` would create (README's commands)."""
    out = subprocess.run(
        [kubectl(), "create", "secret", "generic", name, *flags, "--dry-run=client", "-o", "json"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    secret: Resource = json.loads(out)
    return secret


def kubectl_config_map(name: str, *flags: str) -> Resource:
    """The ConfigMap `kubectl create configmap NAME FLAGS` would create."""
    out = subprocess.run(
        [kubectl(), "create", "configmap", name, *flags, "--dry-run=client", "-o", "json"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    cm: Resource = json.loads(out)
    return cm


def secret_for_env(secret: Resource) -> str:
    """A Secret as podman 4.3 reads it for ``secretKeyRef``: a JSON map of base64 values."""
    return json.dumps(secret.get("data", {}))


def secret_for_volume(secret: Resource) -> str:
    """A Secret as podman 4.3 mounts it: it writes ``data`` values as they stand (no base64
    decoding), so the values are stored decoded to give the files k3s would write."""
    decoded = {k: base64.b64decode(v).decode() for k, v in secret.get("data", {}).items()}
    return json.dumps({**secret, "data": decoded})
