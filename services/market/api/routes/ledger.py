"""Wallets and the ledger: a client's balance and entries, operator deposits, the invariant check."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, Query, Response, status
from sqlalchemy import select
from sqlalchemy.orm import Session

from mots.platform.api.market import BalanceOut, DepositIn, DepositOut, EntryOut, LedgerCheck
from mots.platform.db import in_transaction
from mots.platform.money import from_micros, to_micros
from mots.platform.paging import DEFAULT_LIMIT, Cursor, Limit, Page, decode_cursor, page_of
from mots.platform.problems import problem
from services.market import ledger
from services.market.api.deps import (
    IdempotencyKeyHeader,
    OperatorDep,
    ReadingClient,
    SessionFactoryDep,
)
from services.market.idempotency import REPLAYED_HEADER, request_hash, run_once
from services.market.models import Account, Client, Entry, LedgerTransaction

router = APIRouter(tags=["ledger"])


def _entries(
    session: Session, client_id: int, account_id: int, limit: int, before: int | None = None
) -> list[tuple[int, EntryOut]]:
    """A wallet's newest ``limit`` entries (older than entry ``before`` if given), with their ids."""
    query = (
        select(Entry, LedgerTransaction)
        .join(LedgerTransaction, Entry.transaction_id == LedgerTransaction.id)
        .where(Entry.account_id == account_id)
        .order_by(Entry.id.desc())
        .limit(limit)
    )
    if before is not None:
        query = query.where(Entry.id < before)
    return [
        (
            e.id,
            EntryOut(
                transaction_id=t.id,
                kind=t.kind,
                account=ledger.wallet_name(client_id),
                amount=from_micros(e.amount_micros),
                created_at=t.created_at,
                round_id=t.round_id,
            ),
        )
        for e, t in session.execute(query).all()
    ]


def _wallet(session: Session, client_id: int) -> Account | None:
    return session.scalar(select(Account).where(Account.name == ledger.wallet_name(client_id)))


@router.get("/v1/me/balance", response_model=BalanceOut)
def my_balance(
    client: ReadingClient,
    factory: SessionFactoryDep,
    limit: int = Query(100, ge=1, le=1000, description="most recent entries to return"),
) -> BalanceOut:
    """The caller's wallet balance and its most recent ledger entries (all of them, a page at a
    time: ``GET /v1/me/entries``)."""
    with factory() as session:
        acc = _wallet(session, client.id)
        rows = _entries(session, client.id, acc.id, limit) if acc is not None else []
        return BalanceOut(
            client_id=client.id,
            balance=from_micros(acc.balance_micros if acc is not None else 0),
            entries=[out for _, out in rows],
        )


@router.get("/v1/me/entries", response_model=Page[EntryOut])
def my_entries(
    client: ReadingClient,
    factory: SessionFactoryDep,
    limit: Limit = DEFAULT_LIMIT,
    cursor: Cursor = None,
) -> Page[EntryOut]:
    """The caller's wallet entries, newest first, a page at a time."""
    before = decode_cursor(cursor)
    with factory() as session:
        acc = _wallet(session, client.id)
        rows = _entries(session, client.id, acc.id, limit + 1, before) if acc is not None else []
    page = page_of(rows, limit, key=lambda r: r[0])
    return Page[EntryOut](items=[out for _, out in page.items], next=page.next)


@router.post(
    "/v1/deposits",
    status_code=201,
    response_model=DepositOut,
    responses=problem(404, "no such client")
    | problem(409, "the Idempotency-Key was used with another body"),
)
def deposit(
    body: DepositIn,
    response: Response,
    _: OperatorDep,
    idempotency_key: IdempotencyKeyHeader,
    factory: SessionFactoryDep,
) -> Any:
    """Credit a client's wallet with money received outside the platform (operator only)."""
    fingerprint = request_hash("POST", "/v1/deposits", body.model_dump(mode="json"))
    amount = to_micros(body.amount)

    def book(session: Session) -> dict[str, Any]:
        if session.get(Client, body.client_id) is None:
            raise HTTPException(
                status.HTTP_404_NOT_FOUND, f"client_id: client {body.client_id} does not exist"
            )
        wallet = ledger.ensure_account(session, ledger.wallet_name(body.client_id), body.client_id)
        external = ledger.ensure_account(session, ledger.EXTERNAL)
        balances = ledger.lock_accounts(session, [wallet, external])
        txn = ledger.transfer(
            session, "deposit", external, wallet, amount, client_id=body.client_id
        )
        assert txn is not None
        return DepositOut(
            transaction_id=txn,
            client_id=body.client_id,
            amount=from_micros(amount),
            balance=from_micros(balances[wallet] + amount),
        ).model_dump(mode="json")

    booked: list[bool] = []

    def once(session: Session) -> tuple[int, dict[str, Any]]:
        booked.clear()  # a retried transaction starts over
        return run_once(session, "operator", idempotency_key, fingerprint, book_and_note)

    def book_and_note(session: Session) -> dict[str, Any]:
        result = book(session)
        booked.append(True)
        return result

    code, result = in_transaction(factory, once)
    response.status_code = code
    if not booked:  # the key's stored answer: say so (issue 40), in the body and a header
        response.headers[REPLAYED_HEADER] = "true"
        return {**result, "replayed": True}
    return result


@router.get("/v1/ledger/check", response_model=LedgerCheck)
def check(_: OperatorDep, factory: SessionFactoryDep) -> LedgerCheck:
    """Verify that every transaction sums to zero and every balance equals its entries."""
    with factory() as session:
        return ledger.check(session)
