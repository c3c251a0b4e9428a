"""Wallets and the ledger: a client's balance and entries, operator deposits, the invariant check."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, Query, Response, status
from sqlalchemy import select
from sqlalchemy.orm import Session

from mots.platform.money import from_micros, to_micros
from mots.platform.schemas import BalanceOut, DepositIn, DepositOut, EntryOut, LedgerCheck
from mots.platform.transactions import in_transaction
from services.market import ledger
from services.market.api.deps import (
    CurrentClient,
    IdempotencyKeyHeader,
    OperatorDep,
    SessionFactoryDep,
)
from services.market.idempotency import request_hash, run_once
from services.market.models import Account, Client, Entry, LedgerTransaction

router = APIRouter(tags=["ledger"])


@router.get("/v1/me/balance", response_model=BalanceOut)
def my_balance(
    client: CurrentClient,
    factory: SessionFactoryDep,
    limit: int = Query(100, ge=1, le=1000, description="most recent entries to return"),
) -> BalanceOut:
    """The caller's wallet balance and its most recent ledger entries."""
    with factory() as session:
        acc = session.scalar(select(Account).where(Account.name == ledger.wallet_name(client.id)))
        rows = (
            session.execute(
                select(Entry, LedgerTransaction)
                .join(LedgerTransaction, Entry.transaction_id == LedgerTransaction.id)
                .where(Entry.account_id == acc.id)
                .order_by(Entry.id.desc())
                .limit(limit)
            ).all()
            if acc is not None
            else []
        )
        return BalanceOut(
            client_id=client.id,
            balance=from_micros(acc.balance_micros if acc is not None else 0),
            entries=[
                EntryOut(
                    transaction_id=t.id,
                    kind=t.kind,
                    account=ledger.wallet_name(client.id),
                    amount=from_micros(e.amount_micros),
                    created_at=t.created_at,
                    round_id=t.round_id,
                )
                for e, t in rows
            ],
        )


@router.post("/v1/deposits", status_code=201, response_model=DepositOut)
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

    code, result = in_transaction(
        factory, lambda s: run_once(s, "operator", idempotency_key, fingerprint, book)
    )
    response.status_code = code
    return result


@router.get("/v1/ledger/check", response_model=LedgerCheck)
def check(_: OperatorDep, factory: SessionFactoryDep) -> LedgerCheck:
    """Verify that every transaction sums to zero and every balance equals its entries."""
    with factory() as session:
        return ledger.check(session)
