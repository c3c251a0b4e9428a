"""Client tokens: rotation and revocation, by the client itself or by the operator.

A client has one current token (its SHA-256 stored); rotating or revoking replaces it, so the
previous token is refused by the market at once (by every API process within
``MOTS_TOKEN_CACHE_S``), and, through the revocation list the market publishes in the same step
(:mod:`mots.platform.revocation`), by every service within seconds.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request, Response, status
from sqlalchemy.orm import Session

from mots.platform.api.base import MAX_ID
from mots.platform.api.market import TokenOut
from mots.platform.db import in_transaction
from services.market.api.deps import (
    AnyClient,
    OperatorDep,
    SessionFactoryDep,
    SettingsDep,
)
from services.market.auth import forget_client, hash_token, issue_token, new_token, publish_dead
from services.market.core.config import Settings
from services.market.errors import Conflict, NotFound, Unauthorized
from services.market.models import Client

router = APIRouter(tags=["tokens"])

ClientId = Annotated[int, Path(ge=1, le=MAX_ID, description="the client's id")]


def _replace(
    factory: SessionFactoryDep,
    settings: Settings,
    client_id: int,
    current: str | None,
    reissue: bool,
) -> TokenOut | None:
    """Replace the client's token by a new one (``reissue``) or by nothing; with ``current``,
    only if that is still its token (a concurrent rotation with the same token loses: 401)."""

    def work(session: Session) -> TokenOut | None:
        row = session.get(Client, client_id, with_for_update=True)
        if row is None:
            raise NotFound("client_id", f"client {client_id} does not exist")
        if current is not None and row.token_hash != hash_token(current):
            raise Unauthorized("Authorization", "the token is no longer this client's")
        if row.status == "revoked":
            raise Conflict("client_id", f"client {client_id} is revoked")
        publish_dead(settings, row.token_hash, "rotated" if reissue else "revoked")
        if not reissue:
            row.token_hash = hash_token(new_token())
            return None
        token, expires_at = issue_token(client_id, settings)
        row.token_hash = hash_token(token)
        return TokenOut(client_id=client_id, token=token, expires_at=expires_at)

    return in_transaction(factory, work)


def _bearer(request: Request) -> str:
    return request.headers["authorization"].partition(" ")[2]


@router.post("/v1/me/token", response_model=TokenOut)
def rotate(
    client: AnyClient, request: Request, factory: SessionFactoryDep, settings: SettingsDep
) -> TokenOut:
    """A new token for the caller, with a fresh expiry; the one it called with is revoked."""
    out = _replace(factory, settings, client.id, _bearer(request), reissue=True)
    forget_client(request, client.id)
    assert out is not None
    return out


@router.delete("/v1/me/token", status_code=status.HTTP_204_NO_CONTENT)
def revoke_mine(
    client: AnyClient, request: Request, factory: SessionFactoryDep, settings: SettingsDep
) -> Response:
    """Revoke the caller's own token (a lost device); the operator can issue a new one."""
    _replace(factory, settings, client.id, _bearer(request), reissue=False)
    forget_client(request, client.id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/v1/clients/{client_id}/token", response_model=TokenOut)
def reissue(
    client_id: ClientId,
    request: Request,
    _: OperatorDep,
    factory: SessionFactoryDep,
    settings: SettingsDep,
) -> TokenOut:
    """Issue a client a new token (the operator hands it over); its previous one is revoked."""
    out = _replace(factory, settings, client_id, None, reissue=True)
    forget_client(request, client_id)
    assert out is not None
    return out


@router.delete("/v1/clients/{client_id}/token", status_code=status.HTTP_204_NO_CONTENT)
def revoke(
    client_id: ClientId,
    request: Request,
    _: OperatorDep,
    factory: SessionFactoryDep,
    settings: SettingsDep,
) -> Response:
    """Revoke a client's token (the client stays registered and priced)."""
    _replace(factory, settings, client_id, None, reissue=False)
    forget_client(request, client_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
