"""docker/constraints.txt pins every image dependency to a version pyproject.toml admits."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]


def _pins() -> dict[str, Version]:
    pins = {}
    for line in (ROOT / "docker/constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([^\s;]+)", line)
        assert m, f"constraints.txt: {line!r} is not an exact pin"
        name = canonicalize_name(m.group(1))
        assert name not in pins, f"constraints.txt: {name} is pinned twice"
        pins[name] = Version(m.group(2))
    return pins


def _requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = [Requirement(r) for r in project["dependencies"]]
    for extra in ("services", "train", "plots", "datasets"):
        reqs += [Requirement(r) for r in project["optional-dependencies"][extra]]
    return reqs


def test_direct_dependencies_are_pinned_within_pyproject_ranges() -> None:
    """Each runtime requirement of the images (except torch) has a pin its specifier accepts."""
    pins = _pins()
    for req in _requirements():
        name = canonicalize_name(req.name)
        if name == "torch":  # pinned per architecture in the Dockerfiles (CPU builds)
            assert name not in pins
            continue
        assert name in pins, f"{name} is not pinned in docker/constraints.txt"
        assert req.specifier.contains(pins[name], prereleases=True), (
            f"{name}=={pins[name]} violates pyproject's {req}"
        )


def test_extra_packages_named_in_dockerfiles_match_the_pins() -> None:
    """Packages a Dockerfile names with a version (flwr, httpx, …) carry the constraints' pin."""
    pins = _pins()
    for dockerfile in (ROOT / "docker").glob("*/Dockerfile"):
        for name, version in re.findall(r'"([a-z0-9\-]+)==(\d[^"]*)"', dockerfile.read_text()):
            if name == "torch":
                continue
            assert pins[canonicalize_name(name)] == Version(version), (dockerfile, name)


# What an image with torch leaves out of the train extra, and why: the edge image (what a Pi pulls)
# omits scipy, 143 MiB that only the SVHN .mat reader imports (the deployment trains Fashion-MNIST).
TRAIN_OMITTED = {"edge": {"scipy"}}


def test_torch_images_install_the_whole_train_extra() -> None:
    """Images with torch install every other package of the train extra (they cannot ask for
    ``.[train]``: that would replace their CPU torch by pyproject's pin), but what TRAIN_OMITTED
    names (and those they do not name)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    train = {
        canonicalize_name(Requirement(r).name) for r in project["optional-dependencies"]["train"]
    }
    for dockerfile in (ROOT / "docker").glob("*/Dockerfile"):
        text = dockerfile.read_text()
        if "torch==" not in text:
            continue
        named = {canonicalize_name(n) for n in re.findall(r'"([a-z0-9\-]+)==', text)}
        omitted = TRAIN_OMITTED.get(dockerfile.parent.name, set())
        assert train - {"torch"} - omitted <= named, (dockerfile.parent.name, train - named)
        assert not omitted & named, (dockerfile.parent.name, omitted & named)


def test_edge_image_leaves_out_the_plots_extra() -> None:
    """The edge image installs the core dependencies alone: matplotlib is the plots extra's
    (the service and SuperLink images name it), and the edge code path never imports it."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = {canonicalize_name(Requirement(r).name) for r in project["dependencies"]}
    assert "matplotlib" not in core
    assert [Requirement(r).name for r in project["optional-dependencies"]["plots"]] == [
        "matplotlib"
    ]
    edge = (ROOT / "docker/edge/Dockerfile").read_text()
    assert "RUN python requirements.py pyproject.toml > requirements.txt" in edge
    for image in ("service", "superlink"):
        text = (ROOT / f"docker/{image}/Dockerfile").read_text()
        assert "python requirements.py pyproject.toml plots" in text, image
    assert ",plots]" in (ROOT / "Makefile").read_text()  # make install: the figures work


def test_pins_are_a_consistent_set_as_installed_here() -> None:
    """Every pin's own requirements (its installed metadata: the pins are the project venv's
    versions) are met by the other pins. A stale pin (celery 5.4.0 wanted redis<6 while redis was
    pinned 8.1.0) made pip refuse every service image build."""
    from importlib.metadata import PackageNotFoundError, distribution

    pins = _pins()
    problems = []
    for name, version in pins.items():
        try:
            dist = distribution(name)
        except PackageNotFoundError:
            continue
        if Version(dist.version) != version:
            problems.append(f"{name}: pinned {version}, installed {dist.version}")
            continue
        for raw in dist.requires or []:
            req = Requirement(raw)
            if req.marker and not req.marker.evaluate({"extra": "redis"}):
                continue
            dep = canonicalize_name(req.name)
            if dep in pins and dep != "torch" and pins[dep] not in req.specifier:
                problems.append(f"{name} {version} needs {req}, pinned {pins[dep]}")
    assert not problems, problems


def test_async_sqlalchemy_users_get_greenlet() -> None:
    """The services import sqlalchemy.ext.asyncio, which imports only with greenlet: the images
    must install sqlalchemy's asyncio extra (the market image built without it crashed at import
    in the compose round of tests/containers)."""
    users = [
        p
        for top in ("shared", "services")
        for p in (ROOT / top).rglob("*.py")
        if "sqlalchemy.ext.asyncio" in p.read_text()
    ]
    assert users
    sqlalchemy = next(r for r in _requirements() if canonicalize_name(r.name) == "sqlalchemy")
    assert "asyncio" in sqlalchemy.extras
    assert "greenlet" in _pins()
