"""Bringing a service's database to its newest schema with the service's Alembic scripts.

API and worker both upgrade at start; on PostgreSQL an advisory lock (one key per service) makes
concurrent starters wait for each other, on SQLite ``BEGIN IMMEDIATE`` does the same.
"""

from __future__ import annotations

import zlib
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import text

from mots.platform.db import make_engine


def alembic_config(script_location: Path) -> Config:
    """Alembic's configuration for one service's migration scripts."""
    cfg = Config()
    cfg.set_main_option("script_location", str(script_location))
    return cfg


def upgrade(database_url: str, script_location: Path, revision: str = "head") -> None:
    """Apply every pending migration in ``script_location`` to ``database_url``."""
    engine = make_engine(database_url, pool_size=1)
    try:
        with engine.begin() as conn:
            if conn.dialect.name == "postgresql":
                key = zlib.crc32(str(script_location.name + script_location.parent.name).encode())
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": key})
            cfg = alembic_config(script_location)
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, revision)
    finally:
        engine.dispose()
