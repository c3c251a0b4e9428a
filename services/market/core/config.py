"""Settings of the market service: the registry's groups it reads (``mots.platform.settings``)."""

from __future__ import annotations

from functools import lru_cache
from typing import ClassVar

from sqlalchemy.engine import make_url

from mots.platform.settings import PlatformSettings
from mots.platform.settings.common import Database
from mots.platform.settings.market import (
    Artifacts,
    Discovery,
    Ledger,
    Registration,
    SubsidyBudget,
    Types,
)


class Settings(
    PlatformSettings, Database, Ledger, Types, Registration, SubsidyBudget, Artifacts, Discovery
):
    """The market API and worker read these."""

    database_name: ClassVar[str] = "market"

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
