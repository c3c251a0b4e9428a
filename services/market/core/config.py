"""Settings of the market service (environment variables with the prefix ``MOTS_``)."""

from __future__ import annotations

from decimal import Decimal
from functools import lru_cache

from pydantic import Field
from sqlalchemy.engine import make_url

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
    purchase_writers: int | None = Field(
        None,
        ge=1,
        le=16,
        description="batches (purchases, declarations, registrations each) booked at once per"
        " process (each its own transaction, pool shard and, on PostgreSQL, connection); unset: 1"
        " on SQLite, and on PostgreSQL 2 shared among the API processes (2 for one, 1 each for"
        " two or more)",
    )
    api_processes: int = Field(
        1,
        ge=1,
        le=256,
        description="market API processes serving on this host and database (set by"
        " `python -m mots.platform.serve --workers N`); the default batch writers are shared"
        " among them",
    )
    round_subsidy_budget: Decimal = Field(
        Decimal(100),
        ge=0,
        le=10**9,
        description="most the platform subsidises one round (Σ payouts − Σ charges − Σ payments)"
        " when the round's quote names no budget of its own; payouts beyond it are scaled down",
    )
    artifact_root: str = Field(
        "out/platform/artifacts",
        description="directory the published model artifacts must lie under to be downloadable",
    )

    max_types: int = Field(
        32,
        ge=1,
        le=1024,
        description="most distinct client types the market accepts (the pricing service's bound,"
        " MOTS_MAX_TYPES): an enrolment or registration of one more type is refused with 409",
    )
    token_cache_s: float = Field(
        5.0,
        ge=0,
        le=300,
        description="seconds an API process trusts a verified client token without asking the"
        " database again: a revocation or approval takes effect within this time",
    )
    open_registration: bool = Field(
        False,
        description="let clients register without an enrolment code: they stay pending (not"
        " priced, cannot declare or buy) until the operator approves them",
    )
    open_registration_max_cost: Decimal = Field(
        Decimal(10),
        ge=0,
        description="largest participation cost C_i a self-registered client may declare",
    )
    open_registration_max_data_size: int = Field(
        100_000, ge=1, description="largest data size D_i a self-registered client may declare"
    )
    open_registration_per_minute: int = Field(
        5, ge=1, description="self-registrations one IP address may make per minute (then 429)"
    )

    @property
    def purchase_writer_count(self) -> int:
        """``purchase_writers``, else 1 on SQLite, and on PostgreSQL two batches in flight over
        all of this host's API processes (2 for one process, 1 each for two or more).

        SQLite lets one transaction write at a time: a second batch would only wait for the lock
        in SQLite's busy handler, which sleeps up to 100 ms a nap (measured: p99 120–444 ms with
        2 writers, 21–27 ms with 1, and 1.6× the purchases per second). On PostgreSQL one
        process books purchases about 7% faster with 2 writers than with 1 (``bench-market``);
        two processes with 2 writers each split the requests in flight into four half-size
        batches: at N = 10,000 (``bench-scale``'s declare phase, 2 cores) 3,571–3,598
        requests/s and 3.0 API CPU-s, with 1 writer each 4,335–4,365/s and 2.4 CPU-s.
        """
        if self.purchase_writers is not None:
            return self.purchase_writers
        if make_url(self.database_url).get_backend_name() == "sqlite":
            return 1
        return max(1, 2 // self.api_processes)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings, read once."""
    return Settings()
