"""Rollouts of the k3s-pi overlay as docs/deploy.md describes them, checked on the rendered overlay.

- At most 2 Pis update at once across all edge pods: every edge pod comes from one DaemonSet whose
  RollingUpdate takes ``maxUnavailable: 2`` and surges none (a PodDisruptionBudget cannot do this:
  a DaemonSet rollout deletes pods without the eviction API, and a drain skips DaemonSet pods).
- A ConfigMap edit rolls the pods that read it: every ConfigMap a workload reads is generated
  (configMapGenerator), so its name carries a hash of its content; an edit renames it, the reference
  in each reader's pod template changes with it, and the controllers roll those pods (and only those).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.kustomize import Resource, pod_specs, render, resource_id, unhashed

ROOT = Path(__file__).resolve().parents[2]
OVERLAY = "overlays/k3s-pi"
MAX_PIS_UPDATING = 2
OPERATOR_MADE = {"superlink-ca"}
"""ConfigMaps the operator creates (docs/deploy.md step 4), not rendered by the overlay."""


@pytest.fixture(scope="module")
def overlay() -> list[Resource]:
    return render(ROOT / "k8s" / OVERLAY)


def _edge_workloads(resources: list[Resource]) -> list[Resource]:
    """Workloads whose pods run on the Pis (node selector mots.io/edge=true)."""
    return [
        r
        for r in resources
        for spec in pod_specs(r)
        if spec.get("nodeSelector", {}).get("mots.io/edge") == "true"
    ]


def pis_updating_at_once(resources: list[Resource]) -> int:
    """The most Pis whose edge pods a rollout of every edge workload at once can take down: the sum
    of their ``maxUnavailable`` and ``maxSurge`` (a surged pod is a Pi running two edge pods)."""
    total = 0
    for r in _edge_workloads(resources):
        assert r["kind"] == "DaemonSet", f"{resource_id(r)}: edge pods come from DaemonSets"
        strategy = r["spec"].get("updateStrategy", {"type": "RollingUpdate"})
        assert strategy["type"] == "RollingUpdate", f"{resource_id(r)}: rolls by itself"
        rolling = strategy.get("rollingUpdate", {})
        unavailable, surge = rolling.get("maxUnavailable", 1), rolling.get("maxSurge", 0)
        assert isinstance(unavailable, int) and isinstance(surge, int), "absolute numbers of Pis"
        total += unavailable + surge
    return total


def test_at_most_two_pis_update_at_once(overlay: list[Resource]) -> None:
    """All edge pods roll out of one DaemonSet, 2 Pis at a time, none surged."""
    assert len(_edge_workloads(overlay)) == 1
    assert pis_updating_at_once(overlay) == MAX_PIS_UPDATING


def test_the_rollout_count_can_fail(overlay: list[Resource]) -> None:
    """Three per-type DaemonSets of maxUnavailable 2 each (the overlay before) count 6 Pis."""
    (edge,) = _edge_workloads(overlay)
    copies = []
    for t in ("type-1", "type-2", "type-3"):
        r: dict[str, Any] = {**edge, "metadata": {**edge["metadata"], "name": f"supernode-{t}"}}
        copies.append(r)
    assert pis_updating_at_once(copies) == 3 * MAX_PIS_UPDATING


def _config_maps_read(r: Resource) -> set[str]:
    """Names of the ConfigMaps a workload's pods read (envFrom, env, volumes, projections)."""
    names: set[str] = set()
    for spec in pod_specs(r):
        for c in spec.get("initContainers", []) + spec.get("containers", []):
            for source in c.get("envFrom", []):
                if "configMapRef" in source:
                    names.add(source["configMapRef"]["name"])
            for e in c.get("env", []):
                ref = e.get("valueFrom", {}).get("configMapKeyRef")
                if ref:
                    names.add(ref["name"])
        for v in spec.get("volumes", []):
            if "configMap" in v:
                names.add(v["configMap"]["name"])
            for p in v.get("projected", {}).get("sources", []):
                if "configMap" in p:
                    names.add(p["configMap"]["name"])
    return names


def test_every_config_map_a_pod_reads_is_generated_with_a_content_hash(
    overlay: list[Resource],
) -> None:
    """Each rendered ConfigMap's name ends in kustomize's content hash, and every reference from a
    pod template is to a rendered one (or to one the operator makes)."""
    rendered = {r["metadata"]["name"] for r in overlay if r["kind"] == "ConfigMap"}
    assert rendered and all(unhashed(n) != n for n in rendered), sorted(rendered)
    for r in overlay:
        for name in _config_maps_read(r):
            assert name in rendered or name in OPERATOR_MADE, (resource_id(r), name)


def _templates(resources: list[Resource]) -> dict[tuple[str, str, str], Any]:
    return {resource_id(r): pod_specs(r) for r in resources if pod_specs(r)}


@pytest.mark.parametrize(
    ("where", "line", "readers"),
    [
        (
            "base/config/orchestration-config.env",
            "MOTS_TRAIN_LOCAL_STEPS=21",
            {"orchestration", "orchestration-worker", "training-worker"},
        ),
        (f"{OVERLAY}/edge-config.env", "MOTS_EDGE_POLL_INTERVAL_S=6", {"supernode"}),
        ("base/prometheus/prometheus.yml", "# an edit", {"prometheus"}),
    ],
)
def test_a_config_edit_changes_exactly_its_readers_pod_templates(
    tmp_path: Path, overlay: list[Resource], where: str, line: str, readers: set[str]
) -> None:
    """Edit one ConfigMap's source in a copy of k8s/ and render again: the pod templates of the
    workloads that read it change (so their controllers roll them), no other template does."""
    k8s = tmp_path / "k8s"
    shutil.copytree(ROOT / "k8s", k8s)
    path = k8s / where
    key = line.split("=", 1)[0]
    kept = [x for x in path.read_text().splitlines() if "=" not in line or not x.startswith(key)]
    path.write_text("\n".join([*kept, line]) + "\n")
    before, after = _templates(overlay), _templates(render(k8s / OVERLAY))
    assert before.keys() == after.keys()
    changed = {rid[2] for rid in before if before[rid] != after[rid]}
    assert changed == readers
