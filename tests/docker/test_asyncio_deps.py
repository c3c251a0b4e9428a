"""SQLAlchemy's asyncio extension needs greenlet, which SQLAlchemy 2.1 no longer installs by
default: found when the market image (built from pyproject.toml and docker/constraints.txt) was
played with podman kube play and every API and worker died on import."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]


def test_code_using_sqlalchemy_asyncio_gets_greenlet_in_every_install() -> None:
    users = [
        p
        for d in ("shared", "services", "edge")
        for p in (ROOT / d).rglob("*.py")
        if "sqlalchemy.ext.asyncio" in p.read_text()
    ]
    assert users, "nothing imports sqlalchemy.ext.asyncio any more: drop this test"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = [*project["dependencies"], *project["optional-dependencies"]["services"]]
    reqs = {r.name: r for r in map(Requirement, deps)}
    assert "asyncio" in reqs["sqlalchemy"].extras or "greenlet" in reqs, users[0]
    pins = (ROOT / "docker/constraints.txt").read_text().split()
    assert any(p.startswith("greenlet==") for p in pins), "docker/constraints.txt: pin greenlet"
