"""The services' shared app parts: the liveness route and the lazily built module-level app."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from mots.platform.web import install_healthz, lazy_app


def test_healthz_answers_ok_and_is_documented() -> None:
    app = FastAPI()
    install_healthz(app)
    with TestClient(app) as client:
        response = client.get("/healthz")
        assert response.status_code == 200
        assert response.json() == {"status": "ok"}
        assert "/healthz" in client.get("/openapi.json").json()["paths"]


def test_lazy_app_builds_once_on_first_access() -> None:
    built: list[FastAPI] = []

    def create() -> FastAPI:
        built.append(FastAPI())
        return built[-1]

    namespace: dict[str, Any] = {}
    getattr_ = lazy_app(namespace, create)
    assert built == []  # nothing built by defining the hook
    app = getattr_("app")
    assert built == [app] and namespace["app"] is app
    with pytest.raises(AttributeError, match="settings"):
        getattr_("settings")
    assert len(built) == 1


def test_a_service_module_builds_its_app_through_the_hook(monkeypatch: pytest.MonkeyPatch) -> None:
    import services.pricing.main as pricing_main

    monkeypatch.delitem(vars(pricing_main), "app", raising=False)
    app = pricing_main.app
    assert isinstance(app, FastAPI) and app.title == "MoTS pricing"
    assert pricing_main.app is app
    with pytest.raises(AttributeError):
        _ = pricing_main.no_such_name
