"""Registration of clients with their type declaration, and a client's own record."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, status
from sqlalchemy import select
from sqlalchemy.orm import Session

from mots.platform.money import from_micros, to_micros
from mots.platform.paging import DEFAULT_LIMIT, Cursor, Limit, Page, decode_cursor, page_of
from mots.platform.schemas import (
    ClientOut,
    ClientRegistration,
    NodeKeyIn,
    NodeKeyOut,
    RegisteredClient,
)
from mots.platform.transactions import in_transaction
from services.market import ledger, node_keys
from services.market.api.deps import CurrentClient, OperatorDep, SessionFactoryDep
from services.market.auth import hash_token, new_token
from services.market.models import Client

router = APIRouter(tags=["clients"])


def _out(c: Client) -> ClientOut:
    return ClientOut(
        id=c.id,
        name=c.name,
        type_name=c.type_name,
        data_size=c.data_size,
        cost=from_micros(c.cost_micros),
        node_key_sha256=c.node_key_sha256,
    )


@router.post("/v1/clients", status_code=status.HTTP_201_CREATED, response_model=RegisteredClient)
def register(body: ClientRegistration, factory: SessionFactoryDep) -> RegisteredClient:
    """Register a client; every client of one type must declare the same data size and cost."""
    token = new_token()
    cost = to_micros(body.cost)

    def work(session: Session) -> Client:
        peer = session.scalar(select(Client).where(Client.type_name == body.type_name).limit(1))
        if peer is not None and (peer.data_size, peer.cost_micros) != (body.data_size, cost):
            raise HTTPException(
                status.HTTP_422_UNPROCESSABLE_CONTENT,
                f"type_name: type {body.type_name!r} is declared with data_size={peer.data_size} "
                f"and cost={from_micros(peer.cost_micros)}; a type's clients must match",
            )
        client = Client(
            name=body.name,
            type_name=body.type_name,
            data_size=body.data_size,
            cost_micros=cost,
            token_hash=hash_token(token),
        )
        session.add(client)
        session.flush()
        ledger.ensure_account(session, ledger.wallet_name(client.id), client.id)
        return client

    client = in_transaction(factory, work)
    return RegisteredClient(**_out(client).model_dump(exclude={"node_key_sha256"}), token=token)


@router.get("/v1/me", response_model=ClientOut)
def me(client: CurrentClient) -> ClientOut:
    """The authenticated client's record."""
    return _out(client)


@router.put("/v1/me/node-key", response_model=NodeKeyOut)
def put_node_key(body: NodeKeyIn, client: CurrentClient, factory: SessionFactoryDep) -> NodeKeyOut:
    """Register the public key of the SuperNode this client trains on (replaces an earlier one):
    the SuperLink will admit the device holding its private key, as this client."""
    try:
        pem = node_keys.normalised(body.public_key)
    except ValueError as exc:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc)) from exc

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
) -> Page[ClientOut]:
    """The registered clients in the order they registered, a page at a time (operator only)."""
    after = decode_cursor(cursor) or 0
    query = select(Client).where(Client.id > after).order_by(Client.id).limit(limit + 1)
    with factory() as session:
        rows = [_out(c) for c in session.scalars(query)]
    return page_of(rows, limit, key=lambda c: c.id)
