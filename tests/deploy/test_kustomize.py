"""The offline kustomize renderer on small kustomizations: each supported feature and each refusal."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.deploy.kustomize import KustomizeError, render, resource_id

DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web", "labels": {"app.kubernetes.io/part-of": "mots"}},
    "spec": {
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {
                "containers": [
                    {"name": "api", "image": "mots/web:dev", "env": [{"name": "A", "value": "1"}]},
                    {"name": "side", "image": "busybox:1.36"},
                ]
            },
        },
    },
}


def write(directory: Path, files: dict[str, object]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, body in files.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body if isinstance(body, str) else yaml.safe_dump(body))
    return directory


def test_resources_namespace_images_and_subdirectories(tmp_path: Path) -> None:
    """Files and kustomization directories are loaded; namespace and images are applied."""
    write(
        tmp_path / "base",
        {"kustomization.yaml": {"resources": ["web.yaml"]}, "web.yaml": DEPLOYMENT},
    )
    write(
        tmp_path / "overlay",
        {
            "kustomization.yaml": {
                "namespace": "mots",
                "resources": ["../base", "sa.yaml"],
                "images": [
                    {"name": "mots/web", "newName": "reg.example/mots/web", "newTag": "1.0"}
                ],
            },
            "sa.yaml": {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "x"}},
        },
    )
    out = {resource_id(r): r for r in render(tmp_path / "overlay")}
    assert set(out) == {("Deployment", "mots", "web"), ("ServiceAccount", "mots", "x")}
    images = [
        c["image"]
        for c in out[("Deployment", "mots", "web")]["spec"]["template"]["spec"]["containers"]
    ]
    assert images == ["reg.example/mots/web:1.0", "busybox:1.36"]


def test_strategic_merge_patch_merges_named_lists_and_name_suffix(tmp_path: Path) -> None:
    """Containers and env merge by name; maps merge; nameSuffix renames after patching."""
    patch = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "template": {
                "spec": {
                    "nodeSelector": {"arch": "arm64"},
                    "containers": [
                        {
                            "name": "api",
                            "env": [{"name": "A", "value": "2"}, {"name": "B", "value": "3"}],
                        }
                    ],
                }
            }
        },
    }
    write(
        tmp_path,
        {
            "kustomization.yaml": {
                "resources": ["web.yaml"],
                "nameSuffix": "-t1",
                "patches": [{"path": "p.yaml"}],
            },
            "web.yaml": DEPLOYMENT,
            "p.yaml": patch,
        },
    )
    (r,) = render(tmp_path)
    assert r["metadata"]["name"] == "web-t1"
    spec = r["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"arch": "arm64"}
    assert [c["name"] for c in spec["containers"]] == ["api", "side"]
    assert spec["containers"][0]["env"] == [
        {"name": "A", "value": "2"},
        {"name": "B", "value": "3"},
    ]


def test_json6902_patch_with_label_selector_target(tmp_path: Path) -> None:
    """add/replace/remove operations apply to every resource the target selects."""
    ops = "- {op: add, path: /spec/replicas, value: 3}\n- {op: remove, path: /spec/template/spec/containers/1}\n"
    write(
        tmp_path,
        {
            "kustomization.yaml": {
                "resources": ["web.yaml"],
                "patches": [
                    {
                        "patch": ops,
                        "target": {
                            "kind": "Deployment",
                            "labelSelector": "app.kubernetes.io/part-of=mots",
                        },
                    }
                ],
            },
            "web.yaml": DEPLOYMENT,
        },
    )
    (r,) = render(tmp_path)
    assert r["spec"]["replicas"] == 3
    assert [c["name"] for c in r["spec"]["template"]["spec"]["containers"]] == ["api"]


def test_config_map_generator_and_component(tmp_path: Path) -> None:
    """A generated ConfigMap holds the file and literals; a Component adds its resources."""
    write(
        tmp_path / "comp",
        {
            "kustomization.yaml": {"kind": "Component", "resources": ["sa.yaml"]},
            "sa.yaml": {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "c"}},
        },
    )
    write(
        tmp_path / "main",
        {
            "kustomization.yaml": {
                "components": ["../comp"],
                "configMapGenerator": [
                    {
                        "name": "cfg",
                        "files": ["data/a.json"],
                        "literals": ["K=V"],
                        "options": {"disableNameSuffixHash": True, "labels": {"x": "y"}},
                    }
                ],
            },
            "data/a.json": '{"a": 1}',
        },
    )
    out = {resource_id(r): r for r in render(tmp_path / "main")}
    cm = out[("ConfigMap", "", "cfg")]
    assert cm["data"] == {"a.json": '{"a": 1}', "K": "V"}
    assert cm["metadata"]["labels"] == {"x": "y"}
    assert ("ServiceAccount", "", "c") in out


@pytest.mark.parametrize(
    ("kustomization", "message"),
    [
        ({"resources": ["web.yaml"], "commonLabels": {"a": "b"}}, "not supported"),
        ({"resources": ["../outside.yaml"]}, "not in or below"),
        ({"resources": ["web.yaml", "web.yaml"]}, "defined twice"),
        ({"configMapGenerator": [{"name": "c", "literals": ["A=1"]}]}, "disableNameSuffixHash"),
        (
            {"resources": ["web.yaml"], "patches": [{"patch": "- {op: add, path: /a, value: 1}"}]},
            "needs a target",
        ),
        (
            {
                "resources": ["web.yaml"],
                "patches": [
                    {"patch": "- {op: add, path: /a, value: 1}", "target": {"kind": "Pod"}}
                ],
            },
            "matches no resource",
        ),
        (
            {
                "resources": ["web.yaml"],
                "patches": [
                    {"patch": "- {op: move, path: /a, from: /b}", "target": {"kind": "Deployment"}}
                ],
            },
            "not supported",
        ),
    ],
)
def test_unsupported_or_broken_kustomizations_are_refused(
    tmp_path: Path, kustomization: dict, message: str
) -> None:
    """Whatever the renderer does not implement, or kustomize would reject, raises a clear error."""
    (tmp_path / "outside.yaml").write_text(yaml.safe_dump(DEPLOYMENT))
    write(tmp_path / "k", {"kustomization.yaml": kustomization, "web.yaml": DEPLOYMENT})
    with pytest.raises(KustomizeError, match=message):
        render(tmp_path / "k")
