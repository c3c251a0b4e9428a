"""podman-compose gets the check's env file alone: compose takes a variable from the environment
over --env-file, and under pytest (tests/conftest.py sets the tests' public operator token and
token secret) the services got those values and refused to start outside the test environment
(every platform container restarted 5-7 times in the first compose round run by pytest)."""

from __future__ import annotations

import pytest

from tests.containers import compose


def test_compose_env_drops_the_callers_mots_and_grafana_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MOTS_OPERATOR_TOKEN", "the-tests-public-token")
    monkeypatch.setenv("MOTS_ENVIRONMENT", "test")
    monkeypatch.setenv("GRAFANA_ADMIN_PASSWORD", "x")
    monkeypatch.setenv("PATH", "/usr/bin")
    env = compose.compose_env()
    assert not [k for k in env if k.startswith(("MOTS_", "GRAFANA_"))]
    assert env["PATH"] == "/usr/bin"
    assert env["CONTAINERS_CONF"].endswith("tests/containers/containers.conf")
