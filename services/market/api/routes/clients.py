"""Registration of clients with their type declaration, and a client's own record."""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Query, Request, status
from fastapi.concurrency import run_in_threadpool
from sqlalchemy import select
from sqlalchemy.orm import Session

from mots.platform import tokens
from mots.platform.api.base import MAX_ID
from mots.platform.api.market import (
    BulkRegistered,
    BulkRegistration,
    ClientOut,
    ClientRegistration,
    ClientStatus,
    NodeKeyChallenge,
    NodeKeyIn,
    NodeKeyOut,
    RegisteredClient,
)
from mots.platform.db import in_transaction
from mots.platform.deps import Credentials, is_operator
from mots.platform.money import from_micros, to_micros
from mots.platform.paging import DEFAULT_LIMIT, Cursor, Limit, Page, decode_cursor, page_of
from mots.platform.problems import problem
from mots.platform.revocation import client_claim, unauthorized
from services.market import enrolment as enrolments
from services.market import ledger, node_keys, rate_limits, tasks
from services.market.api.deps import (
    AnyClient,
    CurrentClient,
    OperatorDep,
    SessionFactoryDep,
    SettingsDep,
)
from services.market.auth import forget_client, hash_token, issue_token, new_token, publish_dead
from services.market.booking import RegistrationBatcher
from services.market.core.config import Settings
from services.market.enrolment import TypeFacts
from services.market.errors import CodeUsedUp, Conflict, NotFound, Unauthorized
from services.market.models import DEFAULT_TASK, Client
from services.market.registration import (
    Enrolled,
    NewClient,
    Registered,
    TypeMismatch,
    register_clients,
)

router = APIRouter(tags=["clients"])


def _registered(r: Registered) -> RegisteredClient:
    """The answer to a registration (single or bulk): the active client and its token, shown once."""
    return RegisteredClient(
        id=r.id,
        name=r.client.name,
        type_name=r.client.type_name,
        data_size=r.client.data_size,
        cost=from_micros(r.client.cost_micros),
        task=r.client.task,
        token=r.token,
        token_expires_at=r.token_expires_at,
    )


ClientId = Annotated[int, Path(ge=1, le=MAX_ID, description="the client's id")]


def _out(c: Client) -> ClientOut:
    return ClientOut(
        id=c.id,
        name=c.name,
        type_name=c.type_name,
        data_size=c.data_size,
        cost=from_micros(c.cost_micros),
        status=ClientStatus(c.status),
        task=c.task,
        node_key_sha256=c.node_key_sha256,
    )


def _claimed(body: ClientRegistration) -> TypeFacts:
    """The type the body declares (every field required when no enrolment code attests one)."""
    for field in ("type_name", "data_size", "cost"):
        if getattr(body, field) is None:
            raise HTTPException(
                status.HTTP_422_UNPROCESSABLE_CONTENT,
                f"{field}: required when registering without an enrolment_code",
            )
    assert body.type_name is not None and body.data_size is not None and body.cost is not None
    task = body.task or DEFAULT_TASK
    return TypeFacts(body.type_name, body.data_size, to_micros(body.cost), task)


def _self_registered(body: ClientRegistration, request: Request, settings: Settings) -> TypeFacts:
    """Open registration's type: bounded by the operator, and rate-limited per IP (429)."""
    facts = _claimed(body)
    if facts.cost_micros > to_micros(settings.open_registration_max_cost):
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            f"cost: at most {settings.open_registration_max_cost} for a self-registered client"
            " (MOTS_OPEN_REGISTRATION_MAX_COST)",
        )
    if facts.data_size > settings.open_registration_max_data_size:
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            f"data_size: at most {settings.open_registration_max_data_size} for a self-registered"
            " client (MOTS_OPEN_REGISTRATION_MAX_DATA_SIZE)",
        )
    rate_limits.take(request, "open-registration", settings.open_registration_per_minute)
    return facts


@router.post(
    "/v1/clients",
    status_code=status.HTTP_201_CREATED,
    response_model=RegisteredClient,
    responses={401: {}, 403: {}, 409: {}, 429: {}},
    # the operator's token, or none at all: an enrolment code (or open registration) needs no
    # credential, so the spec offers the empty requirement beside the bearer one
    openapi_extra={"security": [{"HTTPBearer": []}, {}]},
)
async def register(
    body: ClientRegistration,
    request: Request,
    credentials: Credentials,
    factory: SessionFactoryDep,
    settings: SettingsDep,
) -> RegisteredClient:
    """Register a client of an attested type: with an operator-issued ``enrolment_code`` (the
    client gets the code's type), with the operator's token, or, only where the operator turned
    on open registration, as a ``pending`` client (bounded, rate-limited, awaiting approval).
    After 10 unknown, expired or revoked codes from one address in a minute (a used-up code is
    no guess), its attempts are refused 429 unchecked until the minute ends (codes cannot be
    guessed at speed).

    With a code, registered together with the other registrations in flight (one transaction per
    batch, :mod:`services.market.booking`)."""
    if body.enrolment_code is None:
        return await run_in_threadpool(
            _register_without_code, body, request, credentials, factory, settings
        )
    limit = rate_limits.CODE_FAILURES_PER_MINUTE
    await run_in_threadpool(rate_limits.refuse_if_failing, request, "enrolment_code", limit)
    batcher: RegistrationBatcher = request.app.state.registrations
    cost = None if body.cost is None else to_micros(body.cost)
    try:
        r = await batcher.submit(
            Enrolled(
                body.name, body.enrolment_code, body.type_name, body.data_size, cost, body.task
            )
        )
    except Unauthorized as refused:  # a code that is unknown, expired, revoked or used up
        if not isinstance(refused, CodeUsedUp):  # a real code run dry is no guess
            await run_in_threadpool(rate_limits.count_failure, request, "enrolment_code")
        raise
    return _registered(r)


def _register_without_code(
    body: ClientRegistration,
    request: Request,
    credentials: Credentials,
    factory: SessionFactoryDep,
    settings: SettingsDep,
) -> RegisteredClient:
    """A registration the operator's token or open registration vouches for (in a thread)."""
    by_operator = credentials is not None and is_operator(
        credentials.credentials, settings.operator_token.get_secret_value()
    )
    if not by_operator:
        if not settings.open_registration:
            if credentials is not None and isinstance(
                client_claim(credentials.credentials, settings), tokens.Claim
            ):
                raise HTTPException(
                    status.HTTP_403_FORBIDDEN,
                    "Authorization: only the operator registers a client without an enrolment code",
                )
            raise unauthorized(
                "enrolment_code: registration needs an operator-issued enrolment code"
                " (or the operator's token); open registration is off"
            )
        facts = _self_registered(body, request, settings)
    else:
        facts = _claimed(body)

    def work(session: Session) -> tuple[Client, str, int]:
        tasks.check_open(session, facts.task)
        enrolments.check_type(session, facts, settings.max_types, int(time.time()))
        client = Client(
            task=facts.task,
            name=body.name,
            type_name=facts.type_name,
            data_size=facts.data_size,
            cost_micros=facts.cost_micros,
            token_hash=hash_token(new_token()),  # replaced below, once the id is known
            status="active" if by_operator else "pending",
        )
        session.add(client)
        session.flush()
        token, expires_at = issue_token(client.id, settings)
        client.token_hash = hash_token(token)
        ledger.ensure_account(session, ledger.wallet_name(client.id), client.id)
        return client, token, expires_at

    client, token, expires_at = in_transaction(factory, work)
    return RegisteredClient(
        **_out(client).model_dump(exclude={"node_key_sha256"}),
        token=token,
        token_expires_at=expires_at,
    )


@router.post("/v1/clients/bulk", status_code=status.HTTP_201_CREATED, response_model=BulkRegistered)
def register_bulk(
    body: BulkRegistration, _: OperatorDep, factory: SessionFactoryDep, settings: SettingsDep
) -> BulkRegistered:
    """Register up to 10,000 clients by type in one transaction, each wallet funded with
    ``deposit`` (operator only: the operator attests the types it registers). Set-based: a fixed
    number of statements whatever the number of clients. Not idempotent: the tokens are shown
    once and not stored, so a retried call registers new clients."""
    new = [
        NewClient(f"{t.name_prefix}{k}", t.type_name, t.data_size, to_micros(t.cost), task=t.task)
        for t in body.types
        for k in range(1, t.count + 1)
    ]
    deposit = to_micros(body.deposit)

    def work(session: Session) -> list[Registered]:
        for i, t in enumerate(body.types):  # each type's task stored and open (issue 36)
            tasks.check_open(session, t.task, f"types.{i}.task")
        return register_clients(
            session, new, deposit, settings.max_types, lambda cid: issue_token(cid, settings)
        )

    try:
        done = in_transaction(factory, work)
    except TypeMismatch as exc:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, exc.detail) from exc
    return BulkRegistered(clients=[_registered(r) for r in done])


@router.get("/v1/me", response_model=ClientOut)
def me(client: AnyClient) -> ClientOut:
    """The authenticated client's record."""
    return _out(client)


@router.delete("/v1/me", response_model=ClientOut)
def leave(client: AnyClient, request: Request, factory: SessionFactoryDep) -> ClientOut:
    """Leave the market (idempotent): out of every round that opens from now on, no more
    declaring or buying; the wallet, the entries and the models it may download stay readable
    with the same token."""

    def work(session: Session) -> ClientOut:
        row = session.get(Client, client.id, with_for_update=True)
        if row is None:
            raise NotFound("client_id", f"client {client.id} does not exist")
        if row.status in ("active", "pending"):
            row.status = "left"
        return _out(row)

    out = in_transaction(factory, work)
    forget_client(request, client.id)
    return out


@router.post("/v1/me/node-key/challenge", response_model=NodeKeyChallenge)
def node_key_challenge(client: CurrentClient, settings: SettingsDep) -> NodeKeyChallenge:
    """A challenge for this client to sign with its SuperNode's private key (valid 5 minutes)."""
    challenge, expires_at = node_keys.challenge_for(
        client.id, settings.token_secret.get_secret_value()
    )
    return NodeKeyChallenge(challenge=challenge, expires_at=expires_at)


@router.put(
    "/v1/me/node-key",
    response_model=NodeKeyOut,
    responses=problem(409, "another client registered this key"),
)
def put_node_key(
    body: NodeKeyIn, client: CurrentClient, factory: SessionFactoryDep, settings: SettingsDep
) -> NodeKeyOut:
    """Register the public key of the SuperNode this client trains on (replaces an earlier one),
    with the proof that the caller holds its private key (the key's signature over a challenge
    from ``POST /v1/me/node-key/challenge``): the SuperLink will admit that device, as this
    client."""
    try:
        pem = node_keys.normalised(body.public_key)
    except ValueError as exc:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc)) from exc
    secret = settings.token_secret.get_secret_value()
    refused = node_keys.proof_problem(client.id, secret, pem, body.challenge, body.signature)
    if refused is not None:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, refused)

    def work(session: Session) -> NodeKeyOut:
        row = session.get(Client, client.id)
        if row is None:  # the token's client was removed under us
            raise HTTPException(status.HTTP_401_UNAUTHORIZED, "Authorization: unknown client")
        return node_keys.register(session, row, pem)

    out = in_transaction(factory, work)
    client.node_key_sha256 = out.node_key_sha256  # this process's cached record
    return out


@router.get("/v1/clients", response_model=Page[ClientOut])
def list_clients(
    _: OperatorDep,
    factory: SessionFactoryDep,
    limit: Limit = DEFAULT_LIMIT,
    cursor: Cursor = None,
    status_filter: Annotated[
        ClientStatus | None, Query(alias="status", description="only clients in this status")
    ] = None,
) -> Page[ClientOut]:
    """The registered clients in the order they registered, a page at a time (operator only)."""
    after = decode_cursor(cursor) or 0
    query = select(Client).where(Client.id > after).order_by(Client.id).limit(limit + 1)
    if status_filter is not None:
        query = query.where(Client.status == status_filter.value)
    with factory() as session:
        rows = [_out(c) for c in session.scalars(query)]
    return page_of(rows, limit, key=lambda c: c.id)


def _set_status(
    factory: SessionFactoryDep, settings: Settings, client_id: int, to: str, revoke: bool
) -> ClientOut:
    def work(session: Session) -> ClientOut:
        row = session.get(Client, client_id, with_for_update=True)
        if row is None:
            raise NotFound("client_id", f"client {client_id} does not exist")
        if row.status == "revoked":
            raise Conflict("client_id", f"client {client_id} is revoked")
        if to == "active" and row.status != "pending":
            raise Conflict("client_id", f"client {client_id} is {row.status}, not pending")
        row.status = to
        if revoke:  # no token matches a hash of fresh randomness
            publish_dead(session, settings, row.token_hash, "client-revoked")
            row.token_hash = hash_token(new_token())
        return _out(row)

    return in_transaction(factory, work)


@router.post("/v1/clients/{client_id}/approve", response_model=ClientOut)
def approve(
    client_id: ClientId,
    request: Request,
    _: OperatorDep,
    factory: SessionFactoryDep,
    settings: SettingsDep,
) -> ClientOut:
    """Admit a pending (self-registered) client: from now on it is priced and may act."""
    out = _set_status(factory, settings, client_id, "active", revoke=False)
    forget_client(request, client_id)
    return out


@router.delete("/v1/clients/{client_id}", response_model=ClientOut)
def revoke(
    client_id: ClientId,
    request: Request,
    _: OperatorDep,
    factory: SessionFactoryDep,
    settings: SettingsDep,
) -> ClientOut:
    """Revoke a client: its token stops working and it leaves the priced population (its
    ledger history stays)."""
    out = _set_status(factory, settings, client_id, "revoked", revoke=True)
    forget_client(request, client_id)
    return out
