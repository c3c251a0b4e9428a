"""The market's migrations build exactly the schema its models describe, on both databases."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

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
