"""The market's migrations build exactly the schema its models describe, on both databases."""

from __future__ import annotations

from datetime import UTC, datetime

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect, text

from mots.platform.api.base import RoundState
from mots.platform.db import make_engine
from services.market.migrations import upgrade
from services.market.models import Base


def test_migrations_match_the_models(database_url: str) -> None:
    """From 0001 to head: no table, column or index differs from the models (the version table
    aside), and the redundant round_id indexes are gone."""
    upgrade(database_url, "0001")
    upgrade(database_url)
    engine = make_engine(database_url, pool_size=1)
    try:
        with engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
            indexes = {
                table: {i["name"] for i in inspect(conn).get_indexes(table)}
                for table in ("purchases", "decisions")
            }
    finally:
        engine.dispose()
    assert [
        d for d in diff if not (d[0] == "remove_table" and d[1].name.startswith("alembic"))
    ] == []
    assert "ix_purchases_round_id" not in indexes["purchases"]
    assert "ix_decisions_round_id" not in indexes["decisions"]


def test_stored_market_round_states_become_the_one_round_state(database_url: str) -> None:
    """0009: rows written with the market's old state names (0008) read as the shared
    :class:`RoundState` afterwards, each the state it always showed as; none is left unreadable."""
    old = {1: "collecting", 2: "closed", 3: "settled", 4: "refunded", 5: "published"}
    upgrade(database_url, "0008")
    engine = make_engine(database_url, pool_size=1)
    try:
        with engine.begin() as conn:
            for rid, state in old.items():
                conn.execute(
                    text(
                        "INSERT INTO market_rounds (id, state, mechanism, price_micros, "
                        "quote_json, opened_at) VALUES (:id, :state, 'swan', 0, '{}', :at)"
                    ),
                    {"id": rid, "state": state, "at": datetime(2026, 11, 1, tzinfo=UTC)},
                )
        upgrade(database_url)
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT id, state FROM market_rounds ORDER BY id")).all()
    finally:
        engine.dispose()
    assert {rid: RoundState(state) for rid, state in rows} == {
        1: RoundState.COLLECTING,
        2: RoundState.TRAINING,
        3: RoundState.SETTLING,
        4: RoundState.SETTLED_BY_RULE,
        5: RoundState.PUBLISHED,
    }
