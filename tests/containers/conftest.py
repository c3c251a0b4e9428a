"""The container checks need podman, runc and the local base image: without them a test skips
locally and FAILS in CI (CI=true), so a CI machine that lost its runtime or base cannot pass the
suite by skipping."""

from __future__ import annotations

import os

import pytest

from tests.containers import podman


def _missing(reason: str) -> None:
    """Skip for ``reason``, or fail under CI=true."""
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"CI must run the container checks: {reason}")
    pytest.skip(reason)


def require_runtime() -> None:
    """Skip (fail under CI=true) when this machine cannot run containers."""
    reason = podman.missing()
    if reason is not None:
        _missing(reason)


def require_base(ref: str) -> None:
    """Skip (fail under CI=true) when the local base image ``ref`` is not in the store
    (`make containers` builds it; `make test` depends on that target)."""
    if not podman.image_exists(ref):
        _missing(f"no local base image {ref} (scripts/ensure_containers.sh builds it)")


@pytest.fixture
def runtime() -> None:
    """The container runtime, required (see require_runtime)."""
    require_runtime()
