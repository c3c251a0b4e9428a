"""The double-entry ledger: every posting's legs sum to zero and move account balances atomically.

Accounts are locked in ascending id order (``SELECT … FOR UPDATE`` on PostgreSQL; SQLite's
``BEGIN IMMEDIATE`` serialises writers), so two postings never deadlock on each other.

Every booking is checked before it is written (:func:`guard_balances`): no account's balance may
pass :data:`~mots.platform.money.MAX_BALANCE_MICROS` either way, so no sum overflows BIGINT on
PostgreSQL or turns into a float on SQLite, and every balance reads back as Money.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TypeVar

from sqlalchemy import Connection, bindparam, func, insert, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from mots.platform.api.market import LedgerCheck
from mots.platform.db import BatchWrite, insert_rows, one_of, reserve_ids
from mots.platform.money import MAX_BALANCE_MICROS, from_micros
from services.market.errors import OutOfRange
from services.market.models import (
    DEFAULT_TASK,
    Account,
    Base,
    Entry,
    LedgerTransaction,
    MarketRound,
)

T = TypeVar("T")
EXTERNAL = "external:deposits"
SUBSIDY = "platform:subsidy"
SURPLUS = "platform:surplus"


class LedgerError(ValueError):
    """A posting that would break the ledger's rules."""


def wallet_name(client_id: int) -> str:
    """The wallet account of a client."""
    return f"wallet:{client_id}"


POOL_SHARDS = 16
"""Buyer payments land in one of this many shard accounts per round, so concurrent batches of
purchases do not queue on one hot row; settlement consolidates the shards into the round's pool."""


def pool_name(round_id: int) -> str:
    """The account that holds a round's money at settlement."""
    return f"round:{round_id}:pool"


def pool_shard_name(round_id: int, key: int) -> str:
    """Shard ``key`` (mod :data:`POOL_SHARDS`) of the round's pool, where payments land."""
    return f"round:{round_id}:pool:{key % POOL_SHARDS}"


def pool_shard_names(round_id: int) -> list[str]:
    """Every shard account of a round's pool."""
    return [f"round:{round_id}:pool:{i}" for i in range(POOL_SHARDS)]


def _category(name: str) -> str:
    if name.startswith("wallet:"):
        return "wallets"
    if name.startswith("round:"):
        return "round_pools"
    return name.replace(":", "_")


def _task_of(session: Session, name: str) -> str | None:
    """A round pool's task (its round's; ``fashion-mnist`` for a round not open here), else None:
    wallets and the platform's accounts belong to no task (one ledger, issue 36)."""
    if not name.startswith("round:"):
        return None
    round_id = int(name.split(":")[1])
    found = session.scalar(select(MarketRound.task).where(MarketRound.id == round_id))
    return found or DEFAULT_TASK


def ensure_account(session: Session, name: str, client_id: int | None = None) -> int:
    """The id of account ``name``, created if missing (safe under concurrent creators)."""
    found = session.scalar(select(Account.id).where(Account.name == name))
    if found is not None:
        return found
    values = {
        "name": name,
        "category": _category(name),
        "client_id": client_id,
        "balance_micros": 0,
        "task": _task_of(session, name),
    }
    dialect = session.get_bind().dialect.name
    ins = pg_insert(Account) if dialect == "postgresql" else sqlite_insert(Account)
    session.execute(ins.values(**values).on_conflict_do_nothing(index_elements=["name"]))
    account_id = session.scalar(select(Account.id).where(Account.name == name))
    assert account_id is not None
    return account_id


def guard_balances(conn: Connection, delta: Mapping[int, int]) -> None:
    """Refuse (:class:`OutOfRange`, before anything is written) a change ``delta`` (account id →
    micro-units) that would take any account's balance past ``MAX_BALANCE_MICROS`` either way."""
    moved = sorted(a for a, d in delta.items() if d)
    stmt = select(_ACCOUNTS.c.id, _ACCOUNTS.c.name, _ACCOUNTS.c.balance_micros).where(
        one_of(_ACCOUNTS.c.id, "ids", conn.dialect.name)
    )
    past = [
        f"{name} to {from_micros(int(balance) + delta[account_id]):f}"
        for part in chunks(conn, moved)
        for account_id, name, balance in conn.execute(stmt, {"ids": list(part)})
        if abs(int(balance) + delta[account_id]) > MAX_BALANCE_MICROS
    ]
    if past:
        raise OutOfRange(
            "amount",
            f"this booking would take {', '.join(sorted(past))}: past the limit of "
            f"±{from_micros(MAX_BALANCE_MICROS):f} an account may hold (MAX_BALANCE_MICROS); "
            "nothing was booked",
        )


def lock_accounts(session: Session, account_ids: Sequence[int]) -> dict[int, int]:
    """Lock accounts (ascending id) and return their balances in micro-units."""
    rows = session.execute(
        select(Account.id, Account.balance_micros)
        .where(Account.id.in_(sorted(set(account_ids))))
        .order_by(Account.id)
        .with_for_update()
    ).all()
    return {r[0]: r[1] for r in rows}


_TRANSACTIONS = Base.metadata.tables[LedgerTransaction.__tablename__]
_ENTRIES = Base.metadata.tables[Entry.__tablename__]
_ACCOUNTS = Base.metadata.tables[Account.__tablename__]
_INSERT_TRANSACTION = (
    insert(_TRANSACTIONS)
    .values(
        kind=bindparam("kind"), round_id=bindparam("round_id"), client_id=bindparam("client_id")
    )
    .returning(_TRANSACTIONS.c.id)
)
_INSERT_ENTRY = insert(_ENTRIES)
_MOVE_BALANCE = (
    update(_ACCOUNTS)
    .where(_ACCOUNTS.c.id == bindparam("acc"))
    .values(balance_micros=_ACCOUNTS.c.balance_micros + bindparam("amount"))
)


def post(
    session: Session,
    kind: str,
    legs: Sequence[tuple[int, int]],
    round_id: int | None = None,
    client_id: int | None = None,
) -> int:
    """Book one transaction of (account id, signed micro-units) legs that sum to zero; its id.

    The caller holds the locks it needs (:func:`lock_accounts`) and commits; the balance updates
    themselves lock any row not yet locked, credits last, so a hot account (a round's pool) is
    held only from its update to the commit. Core statements (three round trips), not the ORM:
    this is the purchase path's hot spot.
    """
    if not legs:
        raise LedgerError("legs: a transaction needs at least two legs")
    if sum(amount for _, amount in legs) != 0:
        raise LedgerError(f"legs: entries of a {kind} transaction must sum to zero, got {legs}")
    if any(amount == 0 for _, amount in legs):
        raise LedgerError("legs: zero-amount entries are not booked")
    conn = session.connection()
    guard_balances(conn, {acc: amount for acc, amount in legs})
    txn_id: int = conn.execute(
        _INSERT_TRANSACTION, {"kind": kind, "round_id": round_id, "client_id": client_id}
    ).scalar_one()
    conn.execute(
        _INSERT_ENTRY,
        [{"transaction_id": txn_id, "account_id": acc, "amount_micros": amt} for acc, amt in legs],
    )
    ordered = sorted(legs, key=lambda leg: (leg[1] > 0, leg[0]))  # credits last
    conn.execute(_MOVE_BALANCE, [{"acc": acc, "amount": amount} for acc, amount in ordered])
    return txn_id


def queue_transfers(
    writes: BatchWrite,
    kind: str,
    transfers: Sequence[tuple[int, int, int, int | None, int | None]],
    txn_ids: Sequence[int],
    now: datetime,
) -> None:
    """Queue the rows of two-leg transfers whose transaction ids are reserved (no I/O).

    Per transfer (source, destination, micros > 0, round, client): a transaction row under its
    id, the −micros and +micros entries, and each account's summed balance change.
    """
    queue_moves(writes, [(kind, *t) for t in transfers], txn_ids, now)


def queue_moves(
    writes: BatchWrite, moves: Sequence[Transfer], txn_ids: Sequence[int], now: datetime
) -> None:
    """:func:`queue_transfers` with a kind per transfer."""
    if any(micros <= 0 for _, _, _, micros, _, _ in moves):
        raise LedgerError("micros: every transfer moves a positive amount")
    if any(src == dst for _, src, dst, _, _, _ in moves):
        raise LedgerError("accounts: a transfer needs two distinct accounts")
    if len(txn_ids) < len(moves):
        raise LedgerError("txn_ids: one reserved transaction id per transfer is needed")
    entries = []
    delta: dict[int, int] = {}
    for txn, (_, src, dst, micros, _, _) in zip(txn_ids, moves, strict=False):
        entries.append({"transaction_id": txn, "account_id": src, "amount_micros": -micros})
        entries.append({"transaction_id": txn, "account_id": dst, "amount_micros": micros})
        delta[src] = delta.get(src, 0) - micros
        delta[dst] = delta.get(dst, 0) + micros
    writes.insert(
        _TRANSACTIONS,
        [
            {"id": t, "kind": k, "round_id": r, "client_id": c, "created_at": now}
            for t, (k, _, _, _, r, c) in zip(txn_ids, moves, strict=False)
        ],
    )
    writes.insert(_ENTRIES, entries)
    writes.add(_ACCOUNTS, "id", "balance_micros", {a: d for a, d in delta.items() if d})


Transfer = tuple[str, int, int, int, int | None, int | None]
"""(kind, source account, destination account, micros, round, client) of one two-leg transfer;
micros 0 moves nothing, negative micros move the other way (as :func:`transfer`)."""

SQLITE_CHUNK = 10_000
"""Most list parameters in one SQLite statement (its limit is 32,766 variables)."""


def chunks(conn: Connection, items: Sequence[T]) -> list[Sequence[T]]:
    """``items`` in pieces a statement takes: whole on PostgreSQL (one array parameter)."""
    if conn.dialect.name == "postgresql":
        return [items] if items else []
    return [items[i : i + SQLITE_CHUNK] for i in range(0, len(items), SQLITE_CHUNK)]


def ensure_wallets(session: Session, client_ids: Sequence[int]) -> dict[int, int]:
    """client id → wallet account id for ``client_ids``, missing wallets made (set-based: one
    read, one insert of the missing ones, one read of those, whatever the number of clients)."""
    conn = session.connection()
    by_name = {wallet_name(c): c for c in client_ids}
    stmt = select(_ACCOUNTS.c.name, _ACCOUNTS.c.id).where(
        one_of(_ACCOUNTS.c.name, "names", conn.dialect.name)
    )

    def ids(names: list[str]) -> dict[str, int]:
        return {
            r[0]: r[1] for part in chunks(conn, names) for r in conn.execute(stmt, {"names": part})
        }

    found = ids(sorted(by_name))
    missing = sorted(n for n in by_name if n not in found)
    if missing:
        rows = [
            {"name": n, "category": "wallets", "client_id": by_name[n], "balance_micros": 0}
            for n in missing
        ]
        for part in chunks(conn, rows):
            insert_rows(conn, _ACCOUNTS, part, conflict=("name",))
        found.update(ids(missing))
    return {by_name[n]: i for n, i in found.items()}


def book_transfers(session: Session, transfers: Sequence[Transfer]) -> int:
    """Book ``transfers`` set-based: fresh transaction ids in one statement, then every
    transaction row, entry and summed balance change in one write (one statement on PostgreSQL,
    one per table on SQLite), whatever their number. The same rows and balances as
    :func:`transfer` one by one (ids aside). The caller holds the locks the sources need and
    commits; the balance update locks the other rows in ascending id order. Returns how many
    transactions were booked (zero amounts are skipped)."""
    moves: list[tuple[str, int, int, int, int | None, int | None]] = []
    for kind, src, dst, micros, round_id, client_id in transfers:
        if micros < 0:
            src, dst, micros = dst, src, -micros
        if micros:
            moves.append((kind, src, dst, micros, round_id, client_id))
    if not moves:
        return 0
    conn = session.connection()
    delta: dict[int, int] = {}
    for _, src, dst, micros, _, _ in moves:
        delta[src] = delta.get(src, 0) - micros
        delta[dst] = delta.get(dst, 0) + micros
    guard_balances(conn, delta)
    txn_ids = reserve_ids(conn, _TRANSACTIONS, len(moves))
    writes = BatchWrite()
    queue_moves(writes, moves, txn_ids, datetime.now(UTC))
    writes.flush(conn)
    return len(moves)


def transfer(
    session: Session,
    kind: str,
    source: int,
    destination: int,
    micros: int,
    round_id: int | None = None,
    client_id: int | None = None,
) -> int | None:
    """Move ``micros`` > 0 from ``source`` to ``destination``; the transaction's id (None for 0)."""
    if micros == 0:
        return None
    if micros < 0:
        source, destination, micros = destination, source, -micros
    return post(session, kind, [(source, -micros), (destination, micros)], round_id, client_id)


def check(session: Session) -> LedgerCheck:
    """Verify the invariants: transactions sum to zero; balances equal their entries; Σ = 0."""
    unbalanced = session.scalar(
        select(func.count()).select_from(
            select(Entry.transaction_id)
            .group_by(Entry.transaction_id)
            .having(func.sum(Entry.amount_micros) != 0)
            .subquery()
        )
    )
    sums = dict(
        session.execute(
            select(Entry.account_id, func.sum(Entry.amount_micros)).group_by(Entry.account_id)
        ).all()
    )
    accounts = session.execute(select(Account.id, Account.category, Account.balance_micros)).all()
    mismatched = sum(1 for a in accounts if int(sums.get(a[0], 0) or 0) != a[2])
    by_category: dict[str, int] = {}
    for _, category, balance in accounts:
        by_category[category] = by_category.get(category, 0) + balance
    return LedgerCheck(
        transactions=session.scalar(select(func.count()).select_from(LedgerTransaction)) or 0,
        entries=session.scalar(select(func.count()).select_from(Entry)) or 0,
        unbalanced_transactions=unbalanced or 0,
        mismatched_accounts=mismatched,
        total=from_micros(sum(a[2] for a in accounts)),
        accounts={k: from_micros(v) for k, v in sorted(by_category.items())},
    )


def totals_by_category(session: Session) -> dict[tuple[str, str], int]:
    """Σ balances per (account category, task), for the ``mots_ledger_balance`` gauge: a round
    pool's task is its round's; the accounts of no task (wallets, the platform's) have ``""``."""
    rows = session.execute(
        select(Account.category, Account.task, func.sum(Account.balance_micros)).group_by(
            Account.category, Account.task
        )
    ).all()
    totals: dict[tuple[str, str], int] = {}
    for category, task, total in rows:
        key = (category, task or "")
        totals[key] = totals.get(key, 0) + int(total or 0)
    return totals
