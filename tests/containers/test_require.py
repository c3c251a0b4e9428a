"""A container check without its runtime or base image skips locally and fails under CI=true."""

from __future__ import annotations

import pytest

from tests.containers import conftest, podman


@pytest.mark.parametrize("ci", ["true", ""])
def test_a_missing_base_fails_in_ci_and_skips_locally(
    monkeypatch: pytest.MonkeyPatch, ci: str
) -> None:
    monkeypatch.setattr(podman, "image_exists", lambda ref: False)
    monkeypatch.setenv("CI", ci)
    outcome = pytest.fail.Exception if ci else pytest.skip.Exception
    with pytest.raises(outcome, match="no local base image localhost/mots/python"):
        conftest.require_base("localhost/mots/python:3.11-bookworm-amd64")


def test_a_present_base_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(podman, "image_exists", lambda ref: True)
    monkeypatch.setenv("CI", "true")
    conftest.require_base("localhost/mots/python:3.11-bookworm-amd64")


def test_a_missing_runtime_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(podman, "missing", lambda: "podman is not installed")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI must run the container checks"):
        conftest.require_runtime()
