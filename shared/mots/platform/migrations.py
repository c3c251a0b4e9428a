"""Bringing a service's database to its newest schema: one Alembic environment for every service.

A service keeps only its revisions (``services/<service>/alembic/versions``); the environment
(``env.py``) and the revision template live beside this module (``alembic/``), and each service
records its revision in its own table (``alembic_version_<service>``), so services may share a
database. API and worker both upgrade at start; on PostgreSQL an advisory lock (one key per
service) makes concurrent starters wait for each other, on SQLite ``BEGIN IMMEDIATE`` does the same.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import MetaData, text

from mots.platform.db import make_engine

ENVIRONMENT = Path(__file__).with_name("alembic")
"""The shared Alembic environment: ``env.py`` and the revision template ``script.py.mako``."""


@dataclass(frozen=True)
class ServiceMigrations:
    """One service's Alembic revisions, run through the shared environment."""

    service: str
    versions: Path
    """The directory of the service's revision scripts."""
    metadata: MetaData
    """The service's tables (what ``alembic revision --autogenerate`` compares against)."""

    @property
    def version_table(self) -> str:
        """The table recording the service's applied revision."""
        return f"alembic_version_{self.service}"

    def config(self) -> Config:
        """Alembic's configuration: the shared environment, the service's revisions and tables."""
        cfg = Config()
        cfg.set_main_option("script_location", str(ENVIRONMENT))
        cfg.set_main_option("path_separator", "os")  # version_locations is one path, spaces allowed
        cfg.set_main_option("version_locations", str(self.versions))
        cfg.attributes["target_metadata"] = self.metadata
        cfg.attributes["version_table"] = self.version_table
        return cfg

    def upgrade(self, database_url: str, revision: str = "head") -> None:
        """Apply every pending revision up to ``revision`` to ``database_url``.

        On SQLite the revisions run with foreign keys off and are checked before the commit
        (``PRAGMA foreign_key_check``; a violation rolls every revision back): SQLite's own
        procedure for a schema change, since a batch revision that recreates a referenced table
        (e.g. market 0012's ``clients``) drops it, and with foreign keys on that DROP fails on
        the first row that references it. The pragma only takes effect outside a transaction,
        so it is set on the connection before the upgrade's transaction begins."""
        engine = make_engine(database_url, pool_size=1)
        try:
            with engine.connect() as conn:
                sqlite = conn.dialect.name == "sqlite"
                if sqlite:
                    conn.connection.dbapi_connection.execute("PRAGMA foreign_keys=OFF")  # type: ignore[union-attr]
                with conn.begin():
                    if conn.dialect.name == "postgresql":
                        key = zlib.crc32(f"alembic{self.service}".encode())
                        conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": key})
                    cfg = self.config()
                    cfg.attributes["connection"] = conn
                    command.upgrade(cfg, revision)
                    if sqlite:
                        broken = conn.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
                        if broken:
                            raise RuntimeError(f"{self.service}: foreign keys broken: {broken[:5]}")
        finally:
            engine.dispose()
