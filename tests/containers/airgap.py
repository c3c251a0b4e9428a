"""Images to the devices without a registry (issue 39): per-architecture image tarballs in the
layout k3s imports at start, and a check that they hold what the overlay runs.

k3s imports every ``*.tar`` (docker-archive or OCI) it finds in /var/lib/rancher/k3s/agent/images/
when k3s or k3s-agent starts, into its containerd, before pods are created. ``write`` saves, per
architecture, the images a node of that kind runs (amd64, the server: every image; arm64, the
Pis: the edge) under the names the overlay gives them (registry.example.org/mots/NAME:VERSION;
with `imagePullPolicy: IfNotPresent` no pull is tried) to

    out/deploy/airgap/ARCH/agent/images/mots-ARCH.tar
    out/deploy/airgap/ARCH/SHA256SUMS          (`sha256sum -c SHA256SUMS` in ARCH/)

and the operator copies ``agent/images/`` to /var/lib/rancher/k3s/agent/images/ on each node of
that architecture. ``verify`` checks what containerd's import checks and what k3s needs of it:
the checksum list, and in each tarball every image's layers against its config's diff_ids, its
architecture, and the names the overlay runs.
"""

from __future__ import annotations

import hashlib
import json
import tarfile
from pathlib import Path
from typing import Any

from tests.containers import podman

LAYOUT = Path("agent") / "images"
SUMS = "SHA256SUMS"


def sha256_file(path: Path) -> str:
    """The hex sha256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(2**20), b""):
            digest.update(block)
    return digest.hexdigest()


def tarball(out: Path, arch: str) -> Path:
    """Where ``write`` puts the architecture's tarball."""
    return out / arch / LAYOUT / f"mots-{arch}.tar"


def write(out: Path, arch: str, images: dict[str, str]) -> Path:
    """Save ``images`` (the name the overlay runs -> the local image) as one docker-archive for
    ``arch`` in k3s's layout, and (re)write that architecture's SHA256SUMS; the tarball's path."""
    path = tarball(out, arch)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    for name, local in images.items():
        podman.podman("tag", local, name)
    try:
        podman.podman("save", "--multi-image-archive", "--format", "docker-archive", "--output",
                      str(path), *images, timeout=3600)  # fmt: skip
    finally:
        for name in images:
            podman.podman("untag", images[name], name, check=False)
    (out / arch / SUMS).write_text(f"{sha256_file(path)}  {path.relative_to(out / arch)}\n")
    return path


def _member(tar: tarfile.TarFile, name: str) -> bytes:
    """A member's bytes (ValueError when the archive lacks it)."""
    got = tar.extractfile(name)
    if got is None:
        raise ValueError(f"{name} missing from the archive")
    return got.read()


def check_archive(path: Path, arch: str, names: set[str]) -> list[str]:
    """What is wrong with a docker-archive for ``arch`` that must hold the images ``names``: each
    image's config names ``arch``, every layer's sha256 is its config's diff_id (what containerd
    verifies as it imports), and the archive tags exactly ``names``. [] when nothing is."""
    problems: list[str] = []
    tagged: set[str] = set()
    with tarfile.open(path) as tar:
        for entry in json.loads(_member(tar, "manifest.json")):
            config = json.loads(_member(tar, entry["Config"]))
            tags = list(entry.get("RepoTags") or [])
            tagged |= set(tags)
            if config.get("architecture") != arch:
                problems.append(f"{tags}: architecture {config.get('architecture')}, not {arch}")
            diff_ids = config.get("rootfs", {}).get("diff_ids", [])
            if len(diff_ids) != len(entry["Layers"]):
                problems.append(f"{tags}: {len(entry['Layers'])} layers, {len(diff_ids)} diff_ids")
            for layer, want in zip(entry["Layers"], diff_ids, strict=False):
                got = "sha256:" + hashlib.sha256(_member(tar, layer)).hexdigest()
                if got != want:
                    problems.append(f"{tags}: layer {layer} is {got}, its config says {want}")
    if tagged != names:
        problems.append(f"tags {sorted(tagged)}, expected {sorted(names)}")
    return problems


def verify(out: Path, expected: dict[str, set[str]]) -> dict[str, Any]:
    """The report's ``airgap``: for each architecture of ``expected`` (arch -> the names its
    tarball must hold), SHA256SUMS matches its files and each tarball passes check_archive."""
    problems: list[str] = []
    tarballs: dict[str, Any] = {}
    for arch, names in expected.items():
        sums = out / arch / SUMS
        if not sums.is_file():
            problems.append(f"{arch}: no {SUMS}")
            continue
        for line in sums.read_text().splitlines():
            digest, _, rel = line.partition("  ")
            file = out / arch / rel
            if not file.is_file() or sha256_file(file) != digest:
                problems.append(f"{arch}: {rel} does not match {SUMS}")
        path = tarball(out, arch)
        if not path.is_file():
            problems.append(f"{arch}: no {path.relative_to(out)}")
            continue
        problems += [f"{arch}: {p}" for p in check_archive(path, arch, names)]
        tarballs[arch] = {"path": str(path), "mib": round(path.stat().st_size / 2**20, 1),
                          "images": sorted(names)}  # fmt: skip
    return {"tarballs": tarballs, "verified": not problems, "problems": problems}


def part(out: Path, local: dict[str, dict[str, str]], shipped: dict[str, str]) -> dict[str, Any]:
    """The report's ``airgap``: one tarball per architecture of ``local`` (NAME -> {arch: local
    image}) holding each image under ``shipped[NAME]`` (the overlay's reference), then verify."""
    per_arch: dict[str, dict[str, str]] = {}
    for name, by_arch in local.items():
        for arch, ref in by_arch.items():
            per_arch.setdefault(arch, {})[shipped[name]] = ref
    for arch, images in sorted(per_arch.items()):
        write(out, arch, images)
    return verify(out, {arch: set(images) for arch, images in per_arch.items()})
