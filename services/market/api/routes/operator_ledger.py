"""The operator's view of the money (issue 26): every ledger transaction across accounts, a page
at a time with filters, and every account's balance (the platform's subsidy and surplus too)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from sqlalchemy import select

from mots.platform.api.base import MAX_ID
from mots.platform.api.market import AccountOut, TransactionEntry, TransactionOut
from mots.platform.money import from_micros
from mots.platform.paging import DEFAULT_LIMIT, Cursor, Limit, Page, decode_cursor, page_of
from mots.platform.timestamps import TimestampIn
from services.market.api.deps import OperatorDep, SessionFactoryDep
from services.market.models import Account, Entry, LedgerTransaction

router = APIRouter(tags=["ledger"])

AccountFilter = Annotated[
    str | None,
    Query(
        max_length=64,
        description="only transactions with an entry on this account (e.g. wallet:7, "
        "platform:subsidy); a name ending in ':' matches every account it prefixes (round:3:)",
        examples=["wallet:7"],
    ),
]


@router.get("/v1/ledger/transactions", response_model=Page[TransactionOut])
def transactions(
    _: OperatorDep,
    factory: SessionFactoryDep,
    account: AccountFilter = None,
    round_id: Annotated[
        int | None, Query(ge=1, le=MAX_ID, description="only this round's (1 to 2,147,483,647)")
    ] = None,
    kind: Annotated[
        str | None, Query(max_length=16, description="deposit, purchase, reward, …")
    ] = None,
    since: Annotated[
        TimestampIn | None, Query(description="created at or after (RFC 3339 with a zone)")
    ] = None,
    until: Annotated[
        TimestampIn | None, Query(description="created before (RFC 3339 with a zone)")
    ] = None,
    limit: Limit = DEFAULT_LIMIT,
    cursor: Cursor = None,
) -> Page[TransactionOut]:
    """Every ledger transaction across accounts, newest first, with its entries (operator)."""
    query = select(LedgerTransaction).order_by(LedgerTransaction.id.desc()).limit(limit + 1)
    before = decode_cursor(cursor)
    if before is not None:
        query = query.where(LedgerTransaction.id < before)
    if round_id is not None:
        query = query.where(LedgerTransaction.round_id == round_id)
    if kind is not None:
        query = query.where(LedgerTransaction.kind == kind)
    if since is not None:
        query = query.where(LedgerTransaction.created_at >= since)
    if until is not None:
        query = query.where(LedgerTransaction.created_at < until)
    if account is not None:
        named = (
            Account.name.startswith(account, autoescape=True)
            if account.endswith(":")
            else Account.name == account
        )
        touching = select(Entry.transaction_id).join(Account, Entry.account_id == Account.id)
        query = query.where(LedgerTransaction.id.in_(touching.where(named)))
    with factory() as session:
        txs = list(session.scalars(query))
        legs: dict[int, list[TransactionEntry]] = {t.id: [] for t in txs}
        rows = session.execute(
            select(Entry.transaction_id, Account.name, Entry.amount_micros)
            .join(Account, Entry.account_id == Account.id)
            .where(Entry.transaction_id.in_(list(legs)))
            .order_by(Entry.id)
        ).all()
    for tx_id, name, micros in rows:
        legs[tx_id].append(TransactionEntry(account=name, amount=from_micros(micros)))
    out = [
        TransactionOut(
            id=t.id,
            kind=t.kind,
            round_id=t.round_id,
            client_id=t.client_id,
            created_at=t.created_at,
            entries=legs[t.id],
        )
        for t in txs
    ]
    return page_of(out, limit, key=lambda t: t.id)


@router.get("/v1/ledger/accounts", response_model=Page[AccountOut])
def accounts(
    _: OperatorDep,
    factory: SessionFactoryDep,
    category: Annotated[
        str | None,
        Query(
            max_length=32,
            description="wallets, round_pools, platform_subsidy, platform_surplus, "
            "external_deposits",
        ),
    ] = None,
    limit: Limit = DEFAULT_LIMIT,
    cursor: Cursor = None,
) -> Page[AccountOut]:
    """Every ledger account with its balance, in the order they were opened (operator)."""
    after = decode_cursor(cursor) or 0
    query = select(Account).where(Account.id > after).order_by(Account.id).limit(limit + 1)
    if category is not None:
        query = query.where(Account.category == category)
    with factory() as session:
        rows = [
            (
                a.id,
                AccountOut(
                    name=a.name,
                    category=a.category,
                    client_id=a.client_id,
                    balance=from_micros(a.balance_micros),
                ),
            )
            for a in session.scalars(query)
        ]
    page = page_of(rows, limit, key=lambda r: r[0])
    return Page[AccountOut](items=[a for _, a in page.items], next=page.next)
