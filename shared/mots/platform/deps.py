"""Route dependencies every service shares, as ``Annotated`` aliases a route's signature reads as its
needs: ``def deposit(body: DepositIn, _: OperatorDep, factory: SessionFactoryDep)``.

They read what :func:`mots.platform.web.service_app` puts on ``app.state``: ``settings`` (always),
``sessions`` (a service with a database) and ``celery`` (a service that sends tasks). A service's
own dependencies (the market's client identity, say) live in its ``api/deps.py`` and build on
:data:`Credentials` and :func:`unauthorized`.
"""

from __future__ import annotations

import hmac
from typing import Annotated

from celery import Celery
from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session, sessionmaker

from mots.platform.settings import PlatformSettings

bearer = HTTPBearer(
    auto_error=False, description="a client's token (returned at registration) or the operator's"
)
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]


def unauthorized(detail: str) -> HTTPException:
    """A 401 answer asking for a bearer token; ``detail`` names the header and the rule."""
    return HTTPException(
        status.HTTP_401_UNAUTHORIZED, detail, headers={"WWW-Authenticate": "Bearer"}
    )


async def app_settings(request: Request) -> PlatformSettings:
    """The app's settings (a service's own ``Settings``: alias it with that type)."""
    settings: PlatformSettings = request.app.state.settings
    return settings


async def session_factory(request: Request) -> sessionmaker[Session]:
    """The app's session factory: a route opens its own transaction with it."""
    factory: sessionmaker[Session] = request.app.state.sessions
    return factory


async def celery_client(request: Request) -> Celery:
    """The app's Celery client (to send tasks to other services)."""
    app: Celery = request.app.state.celery
    return app


SettingsDep = Annotated[PlatformSettings, Depends(app_settings)]
SessionFactoryDep = Annotated[sessionmaker[Session], Depends(session_factory)]
CeleryDep = Annotated[Celery, Depends(celery_client)]


def is_operator(token: str, operator_token: str) -> bool:
    """Whether ``token`` is the operator's (constant-time comparison)."""
    return hmac.compare_digest(token.encode(), operator_token.encode())


async def operator(credentials: Credentials, settings: SettingsDep) -> None:
    """Admit only the platform operator, whose token is ``MOTS_OPERATOR_TOKEN`` (401 otherwise)."""
    if credentials is None or not is_operator(
        credentials.credentials, settings.operator_token.get_secret_value()
    ):
        raise unauthorized("Authorization: this call needs the operator token")


OperatorDep = Annotated[None, Depends(operator)]
