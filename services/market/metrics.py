"""The market's scrape-time collector: ``mots_ledger_total{account=…}`` read from the ledger itself."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator

from prometheus_client import REGISTRY
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy.orm import Session, sessionmaker

from services.market import ledger

log = logging.getLogger(__name__)


class LedgerCollector(Collector):
    """Σ balances per account category (wallets, round pools, subsidy, surplus, deposits)."""

    def __init__(self) -> None:
        self.factory: sessionmaker[Session] | None = None

    def collect(self) -> Iterator[GaugeMetricFamily]:
        if self.factory is None:
            return
        family = GaugeMetricFamily(
            "mots_ledger_total",
            "Sum of ledger balances by account category, in currency units (Σ over all is 0).",
            labels=["account"],
        )
        try:
            with self.factory() as session:
                totals = ledger.totals_by_category(session)
        except Exception:  # a scrape must not fail because the database is briefly unreachable
            log.warning("mots_ledger_total: the ledger could not be read", exc_info=True)
            return
        for category in ("wallets", "round_pools", "platform_subsidy", "platform_surplus"):
            totals.setdefault(category, 0)
        totals.setdefault("external_deposits", 0)
        for category, micros in sorted(totals.items()):
            family.add_metric([category], micros / 1_000_000)
        yield family


_collector: LedgerCollector | None = None
_lock = threading.Lock()


def watch_ledger(factory: sessionmaker[Session]) -> None:
    """Export ``mots_ledger_total`` from this database (one collector per process, registered once)."""
    global _collector
    with _lock:
        if _collector is None:
            _collector = LedgerCollector()
            REGISTRY.register(_collector)
        _collector.factory = factory
