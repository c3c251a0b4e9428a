"""The shared route dependencies: the operator check and what they read from the app's state."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI
from fastapi.testclient import TestClient
from pydantic import SecretStr
from sqlalchemy.orm import Session, sessionmaker

from mots.platform.deps import OperatorDep, SessionFactoryDep, SettingsDep, is_operator
from mots.platform.settings import PlatformSettings
from mots.platform.web import service_app

TOKEN = "operator-secret-token"


def _app() -> FastAPI:
    router = APIRouter()

    @router.post("/admin")
    def admin(_: OperatorDep, settings: SettingsDep, factory: SessionFactoryDep) -> dict[str, str]:
        return {"prefix": settings.redis_key_prefix, "factory": type(factory).__name__}

    settings = PlatformSettings(operator_token=SecretStr(TOKEN), redis_key_prefix="t:")
    return service_app(
        "demo", "A demonstration.", settings, [router], state={"sessions": sessionmaker[Session]()}
    )


def test_operator_dep_admits_only_the_operator_token() -> None:
    """No token, a wrong token or another scheme: 401 with a Bearer challenge; the token: 200."""
    with TestClient(_app()) as client:
        for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": f"Basic {TOKEN}"}):
            response = client.post("/admin", headers=headers)
            assert response.status_code == 401, headers
            assert response.headers["WWW-Authenticate"] == "Bearer"
            assert response.json()["detail"] == "Authorization: this call needs the operator token"
        ok = client.post("/admin", headers={"Authorization": f"Bearer {TOKEN}"})
        assert ok.status_code == 200
        assert ok.json() == {"prefix": "t:", "factory": "sessionmaker"}


def test_the_operator_route_documents_its_bearer_scheme() -> None:
    with TestClient(_app()) as client:
        spec = client.get("/openapi.json").json()
    assert spec["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    assert spec["paths"]["/admin"]["post"]["security"] == [{"HTTPBearer": []}]


def test_is_operator_compares_the_whole_token() -> None:
    assert is_operator(TOKEN, TOKEN)
    assert not is_operator(TOKEN[:-1], TOKEN)
    assert not is_operator(TOKEN + "x", TOKEN)
    assert not is_operator("", TOKEN)


def test_a_valid_client_token_on_an_operator_route_is_403() -> None:
    """A signed, unexpired client token has no right here (403); an expired or forged one is no
    credential (401)."""
    import time

    from mots.platform import tokens
    from mots.platform.settings import DEV_TOKEN_SECRET

    now = int(time.time())
    with TestClient(_app()) as client:
        valid = tokens.sign(3, now + 600, DEV_TOKEN_SECRET)
        r = client.post("/admin", headers={"Authorization": f"Bearer {valid}"})
        assert r.status_code == 403 and "operator" in r.json()["detail"]
        for bad in (tokens.sign(3, now - 1, DEV_TOKEN_SECRET), tokens.sign(3, now + 600, "x")):
            assert (
                client.post("/admin", headers={"Authorization": f"Bearer {bad}"}).status_code == 401
            )
