"""The orchestration's migrations build exactly the schema its models describe, on both databases."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from mots.platform.db import make_engine
from services.orchestration.migrations import upgrade
from services.orchestration.models import Base


def test_migrations_match_the_models_and_keep_rounds(database_url: str) -> None:
    """From 0001 to head: no table, column or index differs from the models (the version table
    aside); a round written at 0001 is still there, its training progress empty."""
    upgrade(database_url, "0001")
    engine = make_engine(database_url, pool_size=1)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(
                "INSERT INTO rounds (id, state, created_at, state_entered_at)"
                " VALUES (1, 'published', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
            )
        upgrade(database_url)
        with engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
            columns = {c["name"] for c in inspect(conn).get_columns("rounds")}
            row = conn.exec_driver_sql(
                "SELECT state, training_progress_json FROM rounds WHERE id = 1"
            ).one()
    finally:
        engine.dispose()
    assert [
        d for d in diff if not (d[0] == "remove_table" and d[1].name.startswith("alembic"))
    ] == []
    assert "training_progress_json" in columns
    assert tuple(row) == ("published", None)
