"""Buying a round's model: the buyer's wallet pays the quoted price into the round's pool.

Follow one purchase: ``api/routes/purchases.py`` → :func:`buy` (here) → :func:`ledger.post`
(two entries, wallet −p and a shard of the round's pool +p) → ``purchases`` row → buy decision →
idempotency row, one DB transaction. The path runs SQLAlchemy Core statements on the session's
connection (no ORM objects): it is the market's hottest call.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fastapi import HTTPException, status
from sqlalchemy import bindparam, insert, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from mots.platform.money import from_micros
from mots.platform.schemas import PurchaseOut, Strategy
from services.market import ledger
from services.market.models import Account, Base, Decision, MarketRound, Purchase

OPEN_FOR_PURCHASE = {"collecting"}

_ROUNDS = Base.metadata.tables[MarketRound.__tablename__]
_ACCOUNTS = Base.metadata.tables[Account.__tablename__]
_PURCHASES = Base.metadata.tables[Purchase.__tablename__]
_DECISIONS = Base.metadata.tables[Decision.__tablename__]

# FOR SHARE: purchases run side by side, but close_round's FOR UPDATE waits for them (and they for
# it), so no purchase lands in a round after it closed. (SQLite: BEGIN IMMEDIATE serialises.)
_ROUND = (
    select(_ROUNDS.c.state, _ROUNDS.c.price_micros)
    .where(_ROUNDS.c.id == bindparam("round_id"))
    .with_for_update(read=True)
)
# The buyer's wallet, locked, with the pool shard's id and whether the buyer already bought, in one
# round trip. The "already bought" subquery reads the statement's snapshot: if the buyer's own
# concurrent twin commits while we wait for the wallet lock, either the wallet is now too poor
# (buy() reads again) or the purchases row's unique (round_id, client_id) refuses our insert and
# in_transaction's retry reads the twin's row. Either way the twin's money moves once.
_BOUGHT = (
    select(_PURCHASES.c.id)
    .where(
        _PURCHASES.c.round_id == bindparam("round_id"),
        _PURCHASES.c.client_id == bindparam("client_id"),
    )
    .limit(1)
)
_WALLET = (
    select(
        _ACCOUNTS.c.id,
        _ACCOUNTS.c.balance_micros,
        select(_ACCOUNTS.c.id)
        .where(_ACCOUNTS.c.name == bindparam("shard"))
        .scalar_subquery()
        .label("shard_id"),
        _BOUGHT.scalar_subquery().label("bought"),
    )
    .where(_ACCOUNTS.c.name == bindparam("wallet"))
    .with_for_update(of=_ACCOUNTS)
)
_INSERT_PURCHASE = insert(_PURCHASES).returning(_PURCHASES.c.id)


def _buy_decision(dialect: str) -> Any:
    """Insert or switch the buyer's decision to buy (one upsert on the (round, client) key)."""
    ins = pg_insert(_DECISIONS) if dialect == "postgresql" else sqlite_insert(_DECISIONS)
    return ins.on_conflict_do_update(
        index_elements=["round_id", "client_id"],
        set_={"strategy": ins.excluded.strategy, "updated_at": ins.excluded.updated_at},
    )


_UPSERT_DECISION = {d: _buy_decision(d) for d in ("postgresql", "sqlite")}


def buy(session: Session, client_id: int, round_id: int) -> PurchaseOut:
    """Charge the client the round's price, record the purchase and its buy decision."""
    conn = session.connection()
    rnd = conn.execute(_ROUND, {"round_id": round_id}).one_or_none()
    if rnd is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"round_id: round {round_id} does not exist")
    state, price = rnd
    if state not in OPEN_FOR_PURCHASE:
        raise HTTPException(
            status.HTTP_409_CONFLICT,
            f"round_id: round {round_id} is {state}; purchases are taken while it is collecting",
        )
    wallet_name = ledger.wallet_name(client_id)
    shard_name = ledger.pool_shard_name(round_id, client_id)
    params = {"wallet": wallet_name, "shard": shard_name, "round_id": round_id}
    params["client_id"] = client_id
    row = conn.execute(_WALLET, params).one_or_none()
    if row is None or row.shard_id is None:  # accounts made at registration and round opening
        ledger.ensure_account(session, wallet_name, client_id)
        ledger.ensure_account(session, shard_name)
        row = conn.execute(_WALLET, params).one()
    wallet, balance, pool, bought = row
    # Lock only the buyer's wallet now; the pool shard's row is updated last (ledger.post), so it
    # is held for one statement and the commit, and 16 shards spread concurrent buyers.
    if balance < price and bought is None:
        # The lock may have waited for the buyer's own twin purchase, which our statement's
        # snapshot did not see; a fresh read tells "already bought" (409) from "too poor" (402).
        bought = conn.execute(_BOUGHT, params).scalar()
    if bought is not None:
        raise HTTPException(
            status.HTTP_409_CONFLICT,
            f"round_id: client {client_id} already bought round {round_id}",
        )
    if balance < price:
        raise HTTPException(
            status.HTTP_402_PAYMENT_REQUIRED,
            f"balance: {from_micros(balance)} is below the price {from_micros(price)}",
        )
    txn = ledger.transfer(session, "purchase", wallet, pool, price, round_id, client_id)
    purchase_id: int = conn.execute(
        _INSERT_PURCHASE,
        {
            "round_id": round_id,
            "client_id": client_id,
            "price_micros": price,
            "transaction_id": txn,  # a free model moves no money: None
            "refunded": False,
        },
    ).scalar_one()
    conn.execute(
        _UPSERT_DECISION[conn.dialect.name],
        {
            "round_id": round_id,
            "client_id": client_id,
            "strategy": Strategy.BUY.value,
            "dropped": False,
            "updated_at": datetime.now(UTC),
        },
    )
    return PurchaseOut(
        purchase_id=purchase_id,
        round_id=round_id,
        client_id=client_id,
        price=from_micros(price),
        transaction_id=txn,
        balance=from_micros(balance - price),
    )
