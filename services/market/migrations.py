"""Bringing the market's database to the newest schema with its Alembic migrations.

Both the API and the worker call :func:`upgrade` at start; on PostgreSQL an advisory lock makes
concurrent starters wait for each other, on SQLite ``BEGIN IMMEDIATE`` does the same.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import text

from services.market.db import make_engine

SCRIPTS = Path(__file__).with_name("alembic")
_ADVISORY_KEY = 424_242_001


def alembic_config() -> Config:
    """Alembic's configuration for the market's migration scripts."""
    cfg = Config()
    cfg.set_main_option("script_location", str(SCRIPTS))
    return cfg


def upgrade(database_url: str, revision: str = "head") -> None:
    """Apply every pending migration to ``database_url``."""
    engine = make_engine(database_url, pool_size=1)
    try:
        with engine.begin() as conn:
            if conn.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _ADVISORY_KEY})
            cfg = alembic_config()
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, revision)
    finally:
        engine.dispose()
