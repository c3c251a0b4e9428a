"""Buying a round's model: the buyer's wallet pays the quoted price into the round's pool.

Follow one purchase: ``api/routes/purchases.py`` → :func:`buy` (here) → :func:`ledger.post`
(two entries, wallet −p and a shard of the round's pool +p) → ``purchases`` row → idempotency row, one DB transaction.
"""

from __future__ import annotations

from fastapi import HTTPException, status
from sqlalchemy import select
from sqlalchemy.orm import Session

from mots.platform.money import from_micros
from mots.platform.schemas import PurchaseOut, Strategy
from services.market import ledger
from services.market.decisions import record_decision
from services.market.models import Client, MarketRound, Purchase

OPEN_FOR_PURCHASE = {"collecting"}


def buy(session: Session, client: Client, round_id: int) -> PurchaseOut:
    """Charge ``client`` the round's price, record the purchase and its buy decision."""
    # FOR SHARE: purchases run side by side, but close_round's FOR UPDATE waits for them (and they
    # for it), so no purchase lands in a round after it closed.
    rnd = session.get(MarketRound, round_id, with_for_update={"read": True})
    if rnd is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"round_id: round {round_id} does not exist")
    if rnd.state not in OPEN_FOR_PURCHASE:
        raise HTTPException(
            status.HTTP_409_CONFLICT,
            f"round_id: round {round_id} is {rnd.state}; purchases are taken while it is collecting",
        )
    names = (ledger.wallet_name(client.id), ledger.pool_shard_name(round_id, client.id))
    ids = ledger.account_ids(session, names)
    wallet = ids.get(names[0]) or ledger.ensure_account(session, names[0], client.id)
    pool = ids.get(names[1]) or ledger.ensure_account(session, names[1])
    # Lock only the buyer's wallet now; the pool shard's row is updated last (ledger.post), so it
    # is held for one statement and the commit, and 16 shards spread concurrent buyers.
    balances = ledger.lock_accounts(session, [wallet])
    # Checked under the wallet's lock: a client racing itself sees its own committed purchase.
    already = session.scalar(
        select(Purchase.id).where(Purchase.round_id == round_id, Purchase.client_id == client.id)
    )
    if already is not None:
        raise HTTPException(
            status.HTTP_409_CONFLICT,
            f"round_id: client {client.id} already bought round {round_id}",
        )
    price = rnd.price_micros
    if balances[wallet] < price:
        raise HTTPException(
            status.HTTP_402_PAYMENT_REQUIRED,
            f"balance: {from_micros(balances[wallet])} is below the price {from_micros(price)}",
        )
    txn = ledger.transfer(session, "purchase", wallet, pool, price, round_id, client.id)
    purchase = Purchase(
        round_id=round_id,
        client_id=client.id,
        price_micros=price,
        transaction_id=txn.id if txn is not None else None,  # a free model moves no money
    )
    session.add(purchase)
    record_decision(session, rnd, client.id, Strategy.BUY, from_purchase=True)
    session.flush()
    return PurchaseOut(
        purchase_id=purchase.id,
        round_id=round_id,
        client_id=client.id,
        price=from_micros(price),
        transaction_id=purchase.transaction_id,
        balance=from_micros(balances[wallet] - price),
    )
