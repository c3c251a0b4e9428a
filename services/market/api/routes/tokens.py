"""Client tokens: rotation and revocation, by the client itself or by the operator.

A client has one current token (its SHA-256 stored); rotating or revoking replaces it, so the
previous token is refused by the market at once (by every API process within
``MOTS_TOKEN_CACHE_S``), and, through the revocation list the market publishes in the same step
(:mod:`mots.platform.revocation`), by every service within seconds.

A device whose token expired while it was away renews it with its SuperNode key instead of a
token: ``POST /v1/clients/{id}/token/challenge``, then ``POST /v1/clients/{id}/token/node-key``
with the challenge signed by the private key of the node key the client registered
(:mod:`services.market.node_keys`). No enrolment code is spent, the client keeps its id, wallet
and place in the population, and without that key no one can take its place.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Request, Response, status
from sqlalchemy.orm import Session

from mots.platform.api.base import MAX_ID
from mots.platform.api.market import NodeKeyChallenge, NodeKeyProof, TokenOut
from mots.platform.db import in_transaction
from mots.platform.problems import problem
from services.market import node_keys
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
        publish_dead(session, settings, row.token_hash, "rotated" if reissue else "revoked")
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


@router.post("/v1/clients/{client_id}/token/challenge", response_model=NodeKeyChallenge)
def renewal_challenge(client_id: ClientId, settings: SettingsDep) -> NodeKeyChallenge:
    """A challenge for a client's device to sign with its registered SuperNode key (5 minutes),
    to renew the client's token without one (``POST /v1/clients/{id}/token/node-key``)."""
    challenge, expires_at = node_keys.challenge_for(
        client_id, settings.token_secret.get_secret_value(), node_keys.RENEWAL
    )
    return NodeKeyChallenge(challenge=challenge, expires_at=expires_at)


@router.post(
    "/v1/clients/{client_id}/token/node-key",
    response_model=TokenOut,
    responses=problem(401, "not signed by the client's registered node key")
    | problem(409, "the client is revoked"),
)
def renew_with_node_key(
    client_id: ClientId,
    body: NodeKeyProof,
    request: Request,
    factory: SessionFactoryDep,
    settings: SettingsDep,
) -> TokenOut:
    """A new token for a client whose device proves it holds the client's registered SuperNode
    key (the renewal challenge signed with it); the client's previous token is revoked."""

    def key_of(session: Session) -> str | None:
        row = session.get(Client, client_id)
        return None if row is None else row.node_public_key

    pem = in_transaction(factory, key_of)
    if pem is None:
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED, "client_id: no such client with a registered node key"
        )
    refused = node_keys.proof_problem(
        client_id,
        settings.token_secret.get_secret_value(),
        pem.encode(),
        body.challenge,
        body.signature,
        node_keys.RENEWAL,
    )
    if refused is not None:
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, refused)
    out = _replace(factory, settings, client_id, None, reissue=True)
    forget_client(request, client_id)
    assert out is not None
    return out
