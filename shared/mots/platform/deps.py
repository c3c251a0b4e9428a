"""Route dependencies every service shares, as ``Annotated`` aliases a route's signature reads as its
needs: ``def deposit(body: DepositIn, _: OperatorDep, factory: SessionFactoryDep)``.

They read what :func:`mots.platform.web.service_app` puts on ``app.state``: ``settings`` (always),
``sessions`` (a service with a database) and ``celery`` (a service that sends tasks). A service's
own dependencies (the market's client identity, say) build on :data:`Credentials` and on
:mod:`mots.platform.revocation`, which decides whether a client token is accepted now
(:func:`~mots.platform.revocation.live_claim`) and words each refusal.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Annotated

from celery import Celery
from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session, sessionmaker

from mots.platform import tokens
from mots.platform.problem_types import ProblemError
from mots.platform.revocation import client_claim, live_claim, unauthorized
from mots.platform.settings import PlatformSettings

bearer = HTTPBearer(
    auto_error=False, description="a client's token (returned at registration) or the operator's"
)
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]


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


async def operator(request: Request, credentials: Credentials, settings: SettingsDep) -> None:
    """Admit only the platform operator, whose token is ``MOTS_OPERATOR_TOKEN``: 401 without a
    valid token, 403 for a valid client token (it has no right here)."""
    if credentials is not None and is_operator(
        credentials.credentials, settings.operator_token.get_secret_value()
    ):
        return
    if credentials is not None and isinstance(
        client_claim(credentials.credentials, settings), tokens.Claim
    ):
        await live_claim(request, credentials.credentials)  # a dead token: 401, not 403
        raise ProblemError("operator-only", "Authorization: this call needs the operator token")
    raise unauthorized("Authorization: this call needs the operator token")


@dataclass(frozen=True, slots=True)
class Principal:
    """Who calls: the operator (``client_id`` None) or a client with a valid signed token."""

    client_id: int | None

    @property
    def is_operator(self) -> bool:
        """Whether the caller is the platform operator."""
        return self.client_id is None


async def client_or_operator(
    request: Request, credentials: Credentials, settings: SettingsDep
) -> Principal:
    """The operator or a client whose signed token verifies, has not expired and is not on the
    revocation list (401 otherwise): without the market's database, a token the market rotated
    or revoked is refused within seconds (:mod:`mots.platform.revocation`)."""
    if credentials is None:
        raise unauthorized("Authorization: a bearer token is required")
    token = credentials.credentials
    if is_operator(token, settings.operator_token.get_secret_value()):
        return Principal(None)
    claim = await live_claim(request, token)
    return Principal(claim.client_id)


OperatorDep = Annotated[None, Depends(operator)]
PrincipalDep = Annotated[Principal, Depends(client_or_operator)]
