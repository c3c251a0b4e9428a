"""An offline renderer for the subset of kustomize that k8s/ uses, so `make test` needs no kubectl.

Supported: ``resources`` (files and kustomization directories), ``components``, ``namespace``,
``nameSuffix``, ``patches`` (strategic-merge documents and JSON 6902 operation lists, from ``path``
or inline ``patch``, with ``target`` by kind, name and label selector), ``images`` and
``configMapGenerator`` (``files``/``literals`` with ``disableNameSuffixHash``). Anything else is
refused with an error naming the field, so k8s/ cannot silently outgrow what is checked.
tests/k8s/test_render.py compares this renderer with ``kubectl kustomize`` wherever one is found.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import yaml

Resource = dict[str, Any]

KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
_SUPPORTED = {
    "apiVersion",
    "kind",
    "resources",
    "components",
    "namespace",
    "nameSuffix",
    "patches",
    "images",
    "configMapGenerator",
}
# Kinds the namespace transformer leaves alone (cluster-scoped).
_CLUSTER_SCOPED = {
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "PersistentVolume",
    "StorageClass",
    "PriorityClass",
    "IngressClass",
}
_POD_TEMPLATE_PATHS = {
    "Deployment": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
    "Pod": ("spec",),
}


class KustomizeError(ValueError):
    """A kustomization uses something this renderer does not support, or is malformed."""


def render(directory: Path | str) -> list[Resource]:
    """Build the kustomization in ``directory`` into its list of resources."""
    return _build(Path(directory).resolve(), expect_kind="Kustomization")


def resource_id(r: Resource) -> tuple[str, str, str]:
    """(kind, namespace, name) of a resource: how kustomize and kubectl tell resources apart."""
    meta = r.get("metadata", {})
    return (r["kind"], meta.get("namespace", ""), meta["name"])


def _kustomization_file(directory: Path) -> Path:
    for name in KUSTOMIZATION_FILES:
        if (directory / name).is_file():
            return directory / name
    raise KustomizeError(f"{directory}: no kustomization.yaml")


def _build(directory: Path, expect_kind: str) -> list[Resource]:
    path = _kustomization_file(directory)
    k = yaml.safe_load(path.read_text()) or {}
    kind = k.get("kind", "Kustomization")
    if kind != expect_kind:
        raise KustomizeError(f"{path}: kind is {kind}, expected {expect_kind}")
    unknown = set(k) - _SUPPORTED
    if unknown:
        raise KustomizeError(f"{path}: fields {sorted(unknown)} are not supported by this renderer")

    resources: list[Resource] = []
    for entry in k.get("resources", []):
        target = (directory / entry).resolve()
        if target.is_dir():
            resources.extend(_build(target, "Kustomization"))
        else:
            _check_inside(directory, target, path, "resources")
            resources.extend(_load_documents(target))
    for gen in k.get("configMapGenerator", []):
        resources.append(_config_map(directory, path, gen))
    for entry in k.get("components", []):
        comp_dir = (directory / entry).resolve()
        if not comp_dir.is_dir():
            raise KustomizeError(f"{path}: components: {entry} is not a directory")
        resources.extend(_build(comp_dir, "Component"))
    _check_unique(resources, path)

    for i, patch in enumerate(k.get("patches", [])):
        _apply_patch(directory, path, i, patch, resources)
    if "namespace" in k:
        _set_namespace(resources, k["namespace"])
    if "nameSuffix" in k:
        for r in resources:
            r["metadata"]["name"] += k["nameSuffix"]
    for i, image in enumerate(k.get("images", [])):
        _set_image(resources, image, f"{path}: images[{i}]")
    _check_unique(resources, path)
    return resources


def _check_inside(root: Path, target: Path, path: Path, field: str) -> None:
    """kustomize's default load restrictor: files must lie in or below the kustomization root."""
    if root != target and root not in target.parents:
        raise KustomizeError(f"{path}: {field}: {target} is not in or below {root}")
    if not target.is_file():
        raise KustomizeError(f"{path}: {field}: {target} does not exist")


def _load_documents(path: Path) -> list[Resource]:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    for d in docs:
        if not isinstance(d, dict) or "kind" not in d or "name" not in d.get("metadata", {}):
            raise KustomizeError(f"{path}: every document needs kind and metadata.name")
    return docs


def _check_unique(resources: list[Resource], path: Path) -> None:
    seen: set[tuple[str, str, str]] = set()
    for r in resources:
        rid = resource_id(r)
        if rid in seen:
            raise KustomizeError(f"{path}: resource {rid} is defined twice")
        seen.add(rid)


def _config_map(directory: Path, path: Path, gen: dict[str, Any]) -> Resource:
    allowed = {"name", "files", "literals", "options"}
    if set(gen) - allowed:
        raise KustomizeError(f"{path}: configMapGenerator fields {sorted(set(gen) - allowed)}")
    options = gen.get("options", {})
    if not options.get("disableNameSuffixHash", False):
        raise KustomizeError(
            f"{path}: configMapGenerator {gen['name']}: set options.disableNameSuffixHash "
            "(this renderer does not compute kustomize's name hash)"
        )
    data: dict[str, str] = {}
    for item in gen.get("files", []):
        key, sep, rel = str(item).partition("=")
        if not sep:
            key, rel = Path(item).name, item
        target = (directory / rel).resolve()
        _check_inside(directory, target, path, "configMapGenerator.files")
        data[key] = target.read_text()
    for item in gen.get("literals", []):
        key, sep, value = str(item).partition("=")
        if not sep:
            raise KustomizeError(f"{path}: configMapGenerator literal {item!r} is not KEY=VALUE")
        data[key] = value
    meta: dict[str, Any] = {"name": gen["name"]}
    if options.get("labels"):
        meta["labels"] = dict(options["labels"])
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def _apply_patch(
    directory: Path, path: Path, index: int, spec: dict[str, Any], resources: list[Resource]
) -> None:
    where = f"{path}: patches[{index}]"
    if set(spec) - {"path", "patch", "target"}:
        raise KustomizeError(f"{where}: fields {sorted(set(spec) - {'path', 'patch', 'target'})}")
    if "path" in spec:
        target_file = (directory / spec["path"]).resolve()
        _check_inside(directory, target_file, path, f"patches[{index}].path")
        body = yaml.safe_load(target_file.read_text())
    elif "patch" in spec:
        body = yaml.safe_load(spec["patch"])
    else:
        raise KustomizeError(f"{where}: needs path or patch")
    target = spec.get("target")
    if isinstance(body, list):  # JSON 6902 operations
        if target is None:
            raise KustomizeError(f"{where}: a JSON 6902 patch needs a target")
        matched = [r for r in resources if _matches(r, target)]
        for r in matched:
            for op in body:
                _json6902(r, op, where)
    elif isinstance(body, dict):  # strategic merge
        if target is None:
            target = {"kind": body["kind"], "name": body["metadata"]["name"]}
        matched = [r for r in resources if _matches(r, target)]
        for r in matched:
            merged = _merge(
                r,
                {k: v for k, v in body.items() if k != "metadata"}
                | {
                    "metadata": {
                        k: v for k, v in body.get("metadata", {}).items() if k not in ("name",)
                    }
                },
            )
            r.clear()
            r.update(merged)
    else:
        raise KustomizeError(f"{where}: a patch is a mapping or a list of operations")
    if not matched:
        raise KustomizeError(f"{where}: target {target} matches no resource")


def _matches(r: Resource, target: dict[str, Any]) -> bool:
    allowed = {"kind", "name", "labelSelector", "group", "version"}
    if set(target) - allowed:
        raise KustomizeError(f"patch target fields {sorted(set(target) - allowed)}")
    if "kind" in target and r["kind"] != target["kind"]:
        return False
    if "name" in target and not re.fullmatch(target["name"], r["metadata"]["name"]):
        return False
    api = r.get("apiVersion", "")
    group, _, version = api.rpartition("/")
    if "group" in target and target["group"] != group:
        return False
    if "version" in target and target["version"] != version:
        return False
    if "labelSelector" in target:
        labels = r["metadata"].get("labels", {})
        for term in str(target["labelSelector"]).split(","):
            key, sep, value = term.partition("=")
            if not sep:
                raise KustomizeError(f"labelSelector term {term!r}: only key=value is supported")
            if labels.get(key.strip()) != value.strip():
                return False
    return True


def _merge(base: Any, patch: Any) -> Any:
    """Strategic merge for the shapes k8s/ patches: maps recursively, named lists by ``name``."""
    if isinstance(base, dict) and isinstance(patch, dict):
        if "$patch" in patch:
            raise KustomizeError("strategic-merge directives ($patch) are not supported")
        out = dict(base)
        for key, value in patch.items():
            out[key] = _merge(base[key], value) if key in base else copy.deepcopy(value)
        return out
    if isinstance(base, list) and isinstance(patch, list) and _named(base) and _named(patch):
        out_list = [copy.deepcopy(item) for item in base]
        index = {item["name"]: i for i, item in enumerate(out_list)}
        for item in patch:
            if item["name"] in index:
                out_list[index[item["name"]]] = _merge(out_list[index[item["name"]]], item)
            else:
                out_list.append(copy.deepcopy(item))
        return out_list
    return copy.deepcopy(patch)


def _named(items: list[Any]) -> bool:
    return bool(items) and all(isinstance(i, dict) and "name" in i for i in items)


def _json6902(r: Resource, op: dict[str, Any], where: str) -> None:
    kind = op.get("op")
    if kind not in ("add", "replace", "remove"):
        raise KustomizeError(f"{where}: op {kind!r} is not supported (add, replace, remove)")
    parts = [p.replace("~1", "/").replace("~0", "~") for p in str(op["path"]).split("/")[1:]]
    parent: Any = r
    for p in parts[:-1]:
        parent = parent[int(p)] if isinstance(parent, list) else parent[p]
    last = parts[-1]
    if isinstance(parent, list):
        if kind == "add":
            parent.insert(len(parent) if last == "-" else int(last), copy.deepcopy(op["value"]))
        elif kind == "replace":
            parent[int(last)] = copy.deepcopy(op["value"])
        else:
            del parent[int(last)]
        return
    if kind == "replace" and last not in parent:
        raise KustomizeError(f"{where}: replace of missing path {op['path']}")
    if kind == "remove":
        del parent[last]
    else:
        parent[last] = copy.deepcopy(op["value"])


def _set_namespace(resources: list[Resource], namespace: str) -> None:
    for r in resources:
        if r["kind"] not in _CLUSTER_SCOPED:
            r["metadata"]["namespace"] = namespace
        if r["kind"] in ("RoleBinding", "ClusterRoleBinding"):
            for subject in r.get("subjects", []):
                if subject.get("kind") == "ServiceAccount":
                    subject["namespace"] = namespace


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


def _split_image(image: str) -> tuple[str, str | None, str | None]:
    digest = None
    if "@" in image:
        image, digest = image.split("@", 1)
    name, tag = image, None
    slash = image.rfind("/")
    colon = image.rfind(":")
    if colon > slash:
        name, tag = image[:colon], image[colon + 1 :]
    return name, tag, digest


def _set_image(resources: list[Resource], spec: dict[str, Any], where: str) -> None:
    extra = set(spec) - {"name", "newName", "newTag", "digest"}
    if extra:
        raise KustomizeError(f"{where}: fields {sorted(extra)} are not supported")
    for r in resources:
        for c in containers(r):
            name, tag, digest = _split_image(c["image"])
            if name != spec["name"]:
                continue
            name = spec.get("newName", name)
            tag = spec.get("newTag", tag)
            digest = spec.get("digest", digest)
            c["image"] = name + (f":{tag}" if tag else "") + (f"@{digest}" if digest else "")
