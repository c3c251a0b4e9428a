"""The airgap check (tests/containers/airgap.py) on small docker-archives made here: it passes a
good tarball in k3s's layout and catches each way one can be wrong (a changed layer, the wrong
architecture, a missing image, a tarball that no longer matches SHA256SUMS)."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from tests.containers import airgap

NAME = "registry.example.org/mots/edge:0.1.0"


def _layer(content: bytes) -> bytes:
    """A layer: an uncompressed tar holding one file."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("app/model.bin")
        info.size = len(content)
        tar.addfile(info, io.BytesIO(content))
    return buf.getvalue()


def _archive(path: Path, arch: str, names: list[str], diff_of: bytes | None = None) -> None:
    """A docker-archive as `podman save` writes one: manifest.json, a config, the layer."""
    layer = _layer(b"weights")
    diff_id = "sha256:" + hashlib.sha256(diff_of if diff_of is not None else layer).hexdigest()
    config = json.dumps({"architecture": arch, "os": "linux",
                         "rootfs": {"type": "layers", "diff_ids": [diff_id]}}).encode()  # fmt: skip
    config_name = hashlib.sha256(config).hexdigest() + ".json"
    manifest = json.dumps([{"Config": config_name, "RepoTags": names,
                            "Layers": ["l1/layer.tar"]}]).encode()  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w") as tar:
        for member, data in (("manifest.json", manifest), (config_name, config),
                             ("l1/layer.tar", layer)):  # fmt: skip
            info = tarfile.TarInfo(member)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def _sums(out: Path, arch: str) -> None:
    path = airgap.tarball(out, arch)
    rel = path.relative_to(out / arch)
    (out / arch / airgap.SUMS).write_text(f"{airgap.sha256_file(path)}  {rel}\n")


def test_a_good_tarball_in_k3s_layout_verifies(tmp_path: Path) -> None:
    """An arm64 archive of the edge under the overlay's name, at agent/images/, with its sums."""
    _archive(airgap.tarball(tmp_path, "arm64"), "arm64", [NAME])
    _sums(tmp_path, "arm64")
    got = airgap.verify(tmp_path, {"arm64": {NAME}})
    assert got["verified"], got["problems"]
    assert airgap.tarball(tmp_path, "arm64").parent.as_posix().endswith("arm64/agent/images")


@pytest.mark.parametrize(
    ("arch", "names", "diff_of", "expect"),
    [
        ("amd64", [NAME], None, "architecture amd64, not arm64"),
        ("arm64", [NAME], b"another layer", "its config says"),
        ("arm64", ["registry.example.org/mots/market:0.1.0"], None, "expected"),
    ],
    ids=["wrong-arch", "layer-changed", "image-missing"],
)
def test_a_bad_tarball_is_caught(
    tmp_path: Path, arch: str, names: list[str], diff_of: bytes | None, expect: str
) -> None:
    """Each defect is named in the problems and the whole is not verified."""
    _archive(airgap.tarball(tmp_path, "arm64"), arch, names, diff_of)
    _sums(tmp_path, "arm64")
    got = airgap.verify(tmp_path, {"arm64": {NAME}})
    assert not got["verified"]
    assert any(expect in p for p in got["problems"]), got["problems"]


def test_a_tarball_changed_after_its_sums_is_caught(tmp_path: Path) -> None:
    """SHA256SUMS written, then the tarball replaced (a truncated copy to a Pi): not verified."""
    _archive(airgap.tarball(tmp_path, "arm64"), "arm64", [NAME])
    _sums(tmp_path, "arm64")
    _archive(airgap.tarball(tmp_path, "arm64"), "arm64", [NAME, NAME.replace("edge", "x")])
    got = airgap.verify(tmp_path, {"arm64": {NAME}})
    assert not got["verified"]
    assert any("does not match SHA256SUMS" in p for p in got["problems"]), got["problems"]
