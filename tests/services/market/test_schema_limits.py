"""Issue 37, deliverable 4: the schema refuses what the API's limits refuse, on SQLite and
PostgreSQL, at each boundary: a round id past 2^31 − 1 (``MAX_ID``) in every round id column of
the market and the orchestration, a balance past ``MAX_BALANCE_MICROS`` (10^18 − 1) either way;
and a round whose members could buy its pool past the balance limit is not opened (the purchase
batcher credits the pool without reading it)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from mots.platform.api.base import MAX_ID
from mots.platform.db import in_transaction, make_engine
from mots.platform.money import MAX_BALANCE_MICROS
from services.market import rounds
from services.market.errors import OutOfRange
from services.orchestration.migrations import upgrade as orchestration_upgrade
from tests.services.market.conftest import open_round_payload
from tests.services.market.test_purchases import OPEN, _market, _seed

ROUND_ID_WRITES = {
    "market_rounds.id": (
        "INSERT INTO market_rounds (id, state, mechanism, price_micros, quote_json, opened_at,"
        " population) VALUES (:v, 'published', 'swan', 0, '{}', CURRENT_TIMESTAMP, 0)"
    ),
    "round_members.round_id": "INSERT INTO round_members (round_id, client_id) VALUES (:v, 1)",
    "ledger_transactions.round_id": (
        "INSERT INTO ledger_transactions (kind, round_id, created_at)"
        " VALUES ('deposit', :v, CURRENT_TIMESTAMP)"
    ),
}


def _writes(url: str, sql: str, value: int) -> bool:
    """The statement with ``:v`` = ``value`` commits (True) or the database refuses it."""
    engine = make_engine(url, pool_size=1)
    try:
        with engine.begin() as conn:
            conn.execute(text(sql), {"v": value})
        return True
    except DBAPIError:
        return False
    finally:
        engine.dispose()


@pytest.mark.parametrize("column", list(ROUND_ID_WRITES))
def test_a_market_round_id_column_holds_max_id_and_refuses_one_more(
    database_url: str, column: str
) -> None:
    _seed(database_url, {"a": "1"})  # client 1, rounds 1 and 2
    sql = ROUND_ID_WRITES[column]
    assert _writes(database_url, sql, MAX_ID)
    assert not _writes(database_url, sql, MAX_ID + 1)
    assert not _writes(database_url, sql, 2**63 - 1)
    assert not _writes(database_url, sql, 0)


def test_a_balance_holds_the_limit_and_refuses_a_micro_unit_more(database_url: str) -> None:
    """Either way; and on SQLite a sum past 2^63 (which SQLite stores as a float) is refused."""
    _seed(database_url, {"a": "1"})
    update = "UPDATE accounts SET balance_micros = :v WHERE name = 'wallet:1'"
    for ok in (MAX_BALANCE_MICROS, -MAX_BALANCE_MICROS):
        assert _writes(database_url, update, ok)
    for past in (MAX_BALANCE_MICROS + 1, -MAX_BALANCE_MICROS - 1):
        assert not _writes(database_url, update, past)
    assert _writes(database_url, update, MAX_BALANCE_MICROS)
    overflow = "UPDATE accounts SET balance_micros = balance_micros + :v WHERE name = 'wallet:1'"
    assert not _writes(database_url, overflow, 2**63 - 1)


def test_an_orchestration_round_id_stops_at_max_id(database_url: str) -> None:
    orchestration_upgrade(database_url)
    insert = (
        "INSERT INTO rounds (id, state, created_at, state_entered_at)"
        " VALUES (:v, 'published', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
    )
    assert _writes(database_url, insert, MAX_ID)
    assert not _writes(database_url, insert, MAX_ID + 1)
    assert not _writes(database_url, insert.replace("published", "failed"), 0)


def test_a_round_whose_pool_could_pass_the_limit_is_not_opened(database_url: str) -> None:
    """Two members at a price of half the limit and a micro-unit could fill the pool past it:
    refused naming MAX_BALANCE_MICROS, nothing written; at half the limit it opens."""
    market = _market(database_url, _seed(database_url, {"a": "1", "b": "1"}))
    try:
        in_transaction(market.sessions, lambda s: rounds.close_round(s, OPEN))
        half = Decimal(MAX_BALANCE_MICROS // 2) / 1_000_000
        too_dear = open_round_payload(OPEN + 1, str(half + Decimal("0.000001")))
        with pytest.raises(OutOfRange, match="MAX_BALANCE_MICROS") as refused:
            in_transaction(market.sessions, lambda s: rounds.open_round(s, too_dear))
        assert refused.value.field == "price"
        with market.sessions() as s:
            assert s.execute(text("SELECT count(*) FROM market_rounds")).scalar_one() == 2
        opened = in_transaction(
            market.sessions, lambda s: rounds.open_round(s, open_round_payload(OPEN + 1, str(half)))
        )
        assert opened.population == 2 and opened.price_micros * 2 <= MAX_BALANCE_MICROS
    finally:
        market.engine.dispose()
