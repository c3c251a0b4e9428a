"""Settings of the market service (environment variables with the prefix ``MOTS_``)."""

from __future__ import annotations

from functools import lru_cache

from pydantic import Field

from mots.platform.settings import PlatformSettings


class Settings(PlatformSettings):
    """The market API and worker read these."""

    database_url: str = Field(
        "sqlite:///out/platform/market.db",
        description="SQLAlchemy URL of the market's ledger database (SQLite default, or PostgreSQL)",
    )
    db_pool_size: int = Field(
        20, ge=1, description="connections the market keeps open to a PostgreSQL ledger"
    )
    purchase_max_batch: int = Field(
        256,
        ge=1,
        le=4096,
        description="most purchases booked in one database transaction (1: one transaction each)",
    )
    purchase_writers: int = Field(
        2,
        ge=1,
        le=16,
        description="purchase batches booked at once (each its own transaction, pool shard and,"
        " on PostgreSQL, connection)",
    )
    artifact_root: str = Field(
        "out/platform/artifacts",
        description="directory the published model artifacts must lie under to be downloadable",
    )


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings, read once."""
    return Settings()
