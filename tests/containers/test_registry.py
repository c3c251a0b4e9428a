"""The registry path of issue 39 (tests/containers/registry.py), quick: a real docker-registry
behind TLS and htpasswd, an image of a few bytes copied in and pulled back by digest with exactly
what the rendered registries.yaml gives a node (skopeo: no podman store touched), the refusals a
node without the CA or the password meets, and the digest-pinned overlay as kubectl renders it.
The full push of every image and the shaped arm64 pull are `make images` / `make deploy-test`."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import ssl
import subprocess
import tarfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.containers import registry
from tests.containers.conftest import _missing


@pytest.fixture
def running(tmp_path: Path) -> Iterator[registry.Registry]:
    """A registry on a free loopback port, stopped afterwards."""
    for tool in ("docker-registry", "htpasswd", "skopeo"):
        if shutil.which(tool) is None:
            _missing(f"{tool} is not installed (scripts/ensure_containers.sh installs it)")
    reg = registry.start(tmp_path / "server")
    try:
        yield reg
    finally:
        registry.stop(reg)


def _blob(root: Path, data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    (root / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
    (root / "blobs" / "sha256" / digest).write_bytes(data)
    return f"sha256:{digest}"


def _oci_image(root: Path, arch: str) -> None:
    """An OCI layout holding one image of ``arch`` with one small layer, tagged `t`."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("hello")
        info.size = 5
        tar.addfile(info, io.BytesIO(b"hello"))
    layer = buf.getvalue()
    layer_digest = _blob(root, layer)
    config = json.dumps({"architecture": arch, "os": "linux",
                         "rootfs": {"type": "layers", "diff_ids": [layer_digest]}}).encode()  # fmt: skip
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": _blob(root, config), "size": len(config)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                    "digest": layer_digest, "size": len(layer)}],
    }).encode()  # fmt: skip
    index = {"schemaVersion": 2, "manifests": [{
        "mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": _blob(root, manifest),
        "size": len(manifest), "annotations": {"org.opencontainers.image.ref.name": "t"}}]}  # fmt: skip
    (root / "index.json").write_text(json.dumps(index))
    (root / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')


def _skopeo(side: str, options: list[str]) -> list[str]:
    """podman's --cert-dir/--creds (registry.client_options) as skopeo's --src-*/--dest-*."""
    return [f"--{side}-{opt[2:]}" if opt.startswith("--") else opt for opt in options]


def _copy(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["skopeo", "copy", "--quiet", *args], capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip


def test_pull_by_digest_with_the_rendered_registries_yaml(
    running: registry.Registry, tmp_path: Path
) -> None:
    """Pushed with the rendered registries.yaml's CA and password, pulled back by digest: the
    same bytes; the same pull without the password, or without the CA, is refused."""
    rendered = registry.render_registries_yaml(running.address, running.password, str(running.ca))
    options = registry.client_options(rendered, running.address, tmp_path / "certs")
    _oci_image(tmp_path / "src", "arm64")
    dest = f"docker://{running.address}/mots/tiny:0.1.0"
    pushed = _copy(*_skopeo("dest", options), "--digestfile", str(tmp_path / "d"),
                   f"oci:{tmp_path / 'src'}:t", dest)  # fmt: skip
    assert pushed.returncode == 0, pushed.stderr
    digest = (tmp_path / "d").read_text().strip()
    by_digest = f"docker://{running.address}/mots/tiny@{digest}"
    pulled = _copy(*_skopeo("src", options), by_digest, f"oci:{tmp_path / 'dst'}:t")
    assert pulled.returncode == 0, pulled.stderr
    index = json.loads((tmp_path / "dst" / "index.json").read_text())
    assert index["manifests"][0]["digest"] == digest
    no_password = _copy("--src-cert-dir", str(tmp_path / "certs"), by_digest,
                        f"oci:{tmp_path / 'x'}:t")  # fmt: skip
    assert no_password.returncode != 0
    assert "unauthorized" in no_password.stderr.lower() or "401" in no_password.stderr
    no_ca = _copy("--src-creds", options[options.index("--creds") + 1], by_digest,
                  f"oci:{tmp_path / 'y'}:t")  # fmt: skip
    assert no_ca.returncode != 0 and "certificate" in no_ca.stderr.lower(), no_ca.stderr


def test_registry_refuses_anonymous_and_wrong_password(running: registry.Registry) -> None:
    """/v2/ is 401 without credentials or with a wrong password, 200 with the node's; a client
    that does not trust the deployment's CA does not get as far as asking."""
    assert registry.status(running) == 401
    assert registry.status(running, registry.USER, "wrong") == 401
    assert registry.status(running, registry.USER, running.password) == 200
    with pytest.raises(urllib.error.URLError) as err:
        urllib.request.urlopen(f"https://{running.address}/v2/", timeout=3,
                               context=ssl.create_default_context())  # fmt: skip
    assert "CERTIFICATE_VERIFY_FAILED" in str(err.value)


def test_registries_yaml_names_only_its_registry(tmp_path: Path) -> None:
    """The rendered file configures the registry it was rendered for and no other."""
    ca = tmp_path / "ca.crt"
    ca.write_text("pem")
    rendered = registry.render_registries_yaml("10.0.0.5:5000", "pw", str(ca))
    opts = registry.client_options(rendered, "10.0.0.5:5000", tmp_path / "certs")
    assert (
        opts[-1] == f"{registry.USER}:pw" and (tmp_path / "certs" / "ca.crt").read_text() == "pem"
    )
    with pytest.raises(KeyError):
        registry.client_options(rendered, "registry.example.org", tmp_path / "c2")


def test_pinned_overlay_runs_every_image_by_digest(tmp_path: Path) -> None:
    """The generated kustomization renders every MoTS container as ADDRESS/mots/NAME@DIGEST;
    an image the push left out stays on its tag and is seen."""
    names = sorted(registry.overlay_images())
    assert {"edge", "market", "orchestration", "superlink"} <= set(names)
    digests = {n: "sha256:" + hashlib.sha256(n.encode()).hexdigest() for n in names}
    out = registry.ROOT / "out" / "test-pinned" / tmp_path.name
    try:
        registry.pinned_overlay(out, "10.0.0.5:5000", digests)
        refs = [r for r in registry.pinned_refs(out) if "/mots/" in r]
        assert refs and set(refs) <= {f"10.0.0.5:5000/mots/{n}@{d}" for n, d in digests.items()}
        assert f"10.0.0.5:5000/mots/edge@{digests['edge']}" in refs
        registry.pinned_overlay(out, "10.0.0.5:5000", {n: d for n, d in digests.items()
                                                       if n != "edge"})  # fmt: skip
        refs = registry.pinned_refs(out)
        assert any(r.startswith(f"{registry.SHIPPED}/edge:") for r in refs)
    finally:
        shutil.rmtree(out, ignore_errors=True)
