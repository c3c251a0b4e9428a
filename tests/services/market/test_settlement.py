"""Settlement booked set-based equals settlement booked one transfer at a time, on both databases."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from mots.platform.api.base import Strategy
from mots.platform.api.rounds import SettleResult
from mots.platform.contracts import SettlePayload
from mots.platform.db import in_transaction
from services.market import ledger, rounds
from services.market.decisions import Declaration, book_declarations
from services.market.models import Account, Decision, Entry, LedgerTransaction, Purchase
from tests.services.conftest import _create_pg_database, _drop_pg_database
from tests.services.market.test_purchases import OPEN, Market, _book, _market, _req, _seed

BALANCES: dict[str, str | None] = {f"c{i}": "10" for i in range(8)}


@pytest.fixture
def second_url(database_url: str, tmp_path: Path) -> Iterator[str]:
    """Another empty database of the same kind as ``database_url``."""
    if database_url.startswith("sqlite"):
        yield f"sqlite:///{tmp_path / 'second.db'}"
        return
    name = _create_pg_database()
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    finally:
        _drop_pg_database(name)


def _round(url: str) -> Market:
    """Eight funded clients; c0–c3 join, c4–c6 buy (c7 silent); the same on every database."""
    market = _market(url, _seed(url, BALANCES))
    ids = list(market.clients.values())
    joins = [Declaration(c, OPEN, Strategy.JOIN) for c in ids[:4]]
    in_transaction(market.sessions, lambda s: book_declarations(s, joins))
    for i, c in enumerate(ids[4:7]):
        _book(market, [_req(c, OPEN, f"k{c}")], shard=i)
    return market


def _settle(market: Market, payload: SettlePayload, bulk: bool) -> SettleResult:
    result: SettleResult = in_transaction(
        market.sessions, lambda s: rounds.settle_round(s, payload, bulk=bulk)
    )
    return result


def _books(market: Market) -> tuple[dict[str, int], Counter[Any], Any]:
    """Balances by account name; the postings as (kind, round, client, legs by account name);
    the decisions' and purchases' flags."""
    with market.sessions() as s:
        names = dict(s.execute(select(Account.id, Account.name)).all())
        balances = {names[i]: b for i, b in s.execute(select(Account.id, Account.balance_micros))}
        legs: dict[int, list[tuple[str, int]]] = {}
        for txn, acc, amount in s.execute(
            select(Entry.transaction_id, Entry.account_id, Entry.amount_micros)
        ):
            legs.setdefault(txn, []).append((names[acc], amount))
        postings = Counter(
            (kind, round_id, client_id, tuple(sorted(legs[txn])))
            for txn, kind, round_id, client_id in s.execute(
                select(
                    LedgerTransaction.id,
                    LedgerTransaction.kind,
                    LedgerTransaction.round_id,
                    LedgerTransaction.client_id,
                )
            )
        )
        flags = (
            sorted(s.execute(select(Decision.client_id, Decision.dropped)).all()),
            sorted(s.execute(select(Purchase.client_id, Purchase.refunded)).all()),
        )
        check = ledger.check(s)
    assert (check.unbalanced_transactions, check.mismatched_accounts, check.total) == (0, 0, 0)
    return balances, postings, flags


@pytest.mark.parametrize("refund", [False, True])
def test_bulk_settlement_books_what_one_transfer_at_a_time_books(
    database_url: str, second_url: str, refund: bool
) -> None:
    """Rewards, charges (a negative reward), a drop-out, a non-client participant, a lower
    realised price's refunds or a failed round's, subsidy and surplus: the same result, postings,
    balances and flags whether booked set-based or one posting per transfer."""
    markets = [_round(database_url), _round(second_url)]
    ids = list(markets[0].clients.values())
    assert ids == list(markets[1].clients.values())
    payload = SettlePayload(
        round_id=OPEN,
        rewards={"small": Decimal("-1.25")} if refund else {"small": Decimal("4.0")},
        participants=[*ids[:4], 999_999],
        dropped=[ids[3]],
        refund_buyers=refund,
        price=None if refund else Decimal("2.0"),
    )
    try:
        bulk = _settle(markets[0], payload, bulk=True)
        single = _settle(markets[1], payload, bulk=False)
        assert bulk == single
        assert _books(markets[0]) == _books(markets[1])
        assert _settle(markets[0], payload, bulk=True) == bulk  # once per round
    finally:
        for market in markets:
            market.engine.dispose()


def test_ensure_wallets_makes_the_missing_ones_once(database_url: str) -> None:
    """Existing wallets are found, missing ones made, in a few statements; asking again finds
    the same accounts."""
    market = _market(database_url, _seed(database_url, {"a": "1", "b": None}))
    a, b = market.clients["a"], market.clients["b"]
    try:
        first = in_transaction(market.sessions, lambda s: ledger.ensure_wallets(s, [a, b]))
        again = in_transaction(market.sessions, lambda s: ledger.ensure_wallets(s, [b, a]))
        assert first == again and set(first) == {a, b}
        with market.sessions() as s:
            names = set(s.scalars(select(Account.name).where(Account.id.in_(first.values()))))
        assert names == {ledger.wallet_name(a), ledger.wallet_name(b)}
    finally:
        market.engine.dispose()
