"""tests/containers/images.py's inputs for the arm64 build: what it reads from the shipped files."""

from __future__ import annotations

import pytest

from tests.containers import images


def test_torch_default_is_the_edge_dockerfiles() -> None:
    """The aarch64 wheelhouse takes torch at the edge Dockerfile's own default (a real buildx
    arm64 build's), not this machine's x86_64 wheel version."""
    text = images.dockerfile_of("edge").read_text()
    version = images.dockerfile_default("edge", "TORCH_VERSION")
    assert f"ARG TORCH_VERSION={version}\n" in text
    assert "+" not in version  # a PyPI version, no local build tag


def test_missing_default_is_refused() -> None:
    with pytest.raises(ValueError, match="NO_SUCH_ARG"):
        images.dockerfile_default("edge", "NO_SUCH_ARG")


def test_constraints_hold_no_torch_pin() -> None:
    """torch is pinned per architecture by the Dockerfiles; a constraints pin would clash with the
    wheelhouse's torch (it appends the Dockerfile's)."""
    pins = [ln.split("#")[0].strip() for ln in images.CONSTRAINTS.read_text().splitlines()]
    assert not [p for p in pins if p.startswith("torch==")]
