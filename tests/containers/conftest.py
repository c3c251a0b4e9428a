"""The container checks need podman and runc: without them a test skips locally and FAILS in CI
(CI=true), so a CI machine that lost its runtime cannot pass the suite by skipping."""

from __future__ import annotations

import os

import pytest

from tests.containers import podman


def require_runtime() -> None:
    """Skip (fail under CI=true) when this machine cannot run containers."""
    reason = podman.missing()
    if reason is None:
        return
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"CI must run the container checks: {reason}")
    pytest.skip(reason)


@pytest.fixture
def runtime() -> None:
    """The container runtime, required (see require_runtime)."""
    require_runtime()
