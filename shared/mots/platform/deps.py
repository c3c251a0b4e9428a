"""Route dependencies every service shares, as ``Annotated`` aliases a route's signature reads as its
needs: ``def deposit(body: DepositIn, _: OperatorDep, factory: SessionFactoryDep)``.

They read what :func:`mots.platform.web.service_app` puts on ``app.state``: ``settings`` (always),
``sessions`` (a service with a database) and ``celery`` (a service that sends tasks). A service's
own dependencies (the market's client identity, say) live in its ``api/deps.py`` and build on
:data:`Credentials` and :func:`unauthorized`.
"""

from __future__ import annotations

import hmac
import time
from dataclasses import dataclass
from typing import Annotated

from celery import Celery
from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session, sessionmaker

from mots.platform import tokens
from mots.platform.problem_types import ProblemError
from mots.platform.revocation import RevocationList
from mots.platform.settings import PlatformSettings

bearer = HTTPBearer(
    auto_error=False, description="a client's token (returned at registration) or the operator's"
)
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]


def unauthorized(detail: str, code: str = "unauthenticated") -> HTTPException:
    """A 401 answer asking for a bearer token; ``detail`` names the header and the rule,
    ``code`` the problem type (:mod:`mots.platform.problem_types`)."""
    return ProblemError(code, detail, headers={"WWW-Authenticate": "Bearer"})


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


def client_claim(token: str, settings: PlatformSettings) -> tokens.Claim | tokens.Invalid:
    """A client token's verified claim (signature and expiry), or why it is refused."""
    return tokens.verify(token, settings.token_secret.get_secret_value(), time.time())


_DEAD = {
    "rotated": "the token was replaced by a newer one (rotated or reissued); use that",
    "revoked": "the token was revoked; the operator may issue a new one "
    "(POST /v1/clients/{id}/token)",
    "client-revoked": "the operator revoked this client; its tokens no longer work",
}


def dead_token(why: str) -> HTTPException:
    """The refusal of a token on the revocation list, by why it died: rotated or revoked, 401
    (``token-rotated``, ``token-revoked``); its client revoked, 403 (``client-revoked``)."""
    detail = f"Authorization: {_DEAD.get(why, 'the token is no longer valid')}"
    if why == "client-revoked":
        return ProblemError("client-revoked", detail)
    code = "token-rotated" if why == "rotated" else "token-revoked"
    return unauthorized(detail, code)


def invalid_token(why: tokens.Invalid) -> HTTPException:
    """The 401 of a token that does not verify: ``token-expired`` or ``token-invalid``."""
    code = "token-expired" if why is tokens.Invalid.EXPIRED else "token-invalid"
    return unauthorized(f"Authorization: {why.value}", code)


async def live_claim(request: Request, token: str) -> tokens.Claim:
    """A client token's claim if it verifies, has not expired and is not on the revocation
    list (:mod:`mots.platform.revocation`, read by every service); refused otherwise, each
    reason with its own code (:func:`invalid_token`, :func:`dead_token`)."""
    claim = client_claim(token, request.app.state.settings)
    if isinstance(claim, tokens.Invalid):
        raise invalid_token(claim)
    revocations: RevocationList = request.app.state.revocations
    why = await revocations.why_dead(token)
    if why is not None:
        raise dead_token(why)
    return claim


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
