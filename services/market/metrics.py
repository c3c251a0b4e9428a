"""The market's ledger gauge: ``mots_ledger_balance{account=…,task=…}``, Σ balances per account
category and task (issue 36: a round pool's task is its round's; wallets and the platform's
accounts belong to no task, ``task=""``, which Prometheus reads as no label: one ledger).

A scrape reads cached totals, never the ledger: a background thread refreshes them every
:data:`REFRESH_S` seconds (two queries, whatever the scrape rate), so scraping cannot load the
database (issue 13). The same refresh exports each stored task's ``mots_purchases_total{task}``
at 0, so that a new task's first purchase counts in ``increase()``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator

from prometheus_client import REGISTRY
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from mots.platform.metrics import PURCHASES
from services.market import ledger
from services.market.models import DEFAULT_TASK, Task

log = logging.getLogger(__name__)


REFRESH_S = 2.0
"""Seconds between two reads of the ledger's totals (the gauge is at most this stale)."""


class LedgerCollector(Collector):
    """Σ balances per account category (wallets, round pools, subsidy, surplus, deposits) and
    task, as last read by :meth:`refresh`."""

    def __init__(self) -> None:
        self.factory: sessionmaker[Session] | None = None
        self.totals: dict[tuple[str, str], int] | None = None
        self.reads = 0
        self.failing = False

    def refresh(self) -> None:
        """Read the totals from the ledger (kept as they were if it is briefly unreachable)."""
        factory = self.factory
        if factory is None:
            return
        try:
            with factory() as session:
                totals = ledger.totals_by_category(session)
                stored = set(session.scalars(select(Task.name).distinct()))
        except Exception:  # the gauge keeps its last values; the next refresh tries again
            # the traceback once per outage, not every REFRESH_S while the database is away
            log.warning(
                "mots_ledger_balance: the ledger could not be read", exc_info=not self.failing
            )
            self.failing = True
            return
        self.failing = False
        for category in ("wallets", "platform_subsidy", "platform_surplus", "external_deposits"):
            totals.setdefault((category, ""), 0)
        if not any(category == "round_pools" for category, _ in totals):
            totals[("round_pools", DEFAULT_TASK)] = 0  # before any round: the default task's
        self.totals = totals
        self.reads += 1
        for task in stored | {task for _, task in totals if task}:  # at 0 before their first sale
            PURCHASES.labels(task)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        totals = self.totals
        if totals is None:
            return
        family = GaugeMetricFamily(
            "mots_ledger_balance",
            "Sum of ledger balances by account category and task (empty: an account of no task),"
            " in currency units (Σ over all is 0).",
            labels=["account", "task"],
        )
        for (category, task), micros in sorted(totals.items()):
            family.add_metric([category, task], micros / 1_000_000)
        yield family


_collector: LedgerCollector | None = None
_lock = threading.Lock()


def _refresh_forever(collector: LedgerCollector) -> None:
    while True:
        time.sleep(REFRESH_S)
        collector.refresh()


def watch_ledger(factory: sessionmaker[Session]) -> LedgerCollector:
    """Export ``mots_ledger_balance`` from this database: read once now, then every
    :data:`REFRESH_S` seconds by one daemon thread (one collector per process, registered once)."""
    global _collector
    with _lock:
        if _collector is None:
            _collector = LedgerCollector()
            REGISTRY.register(_collector)
            # "background:": benchmarks/trace_paths lists this loop apart from a request's path
            threading.Thread(
                target=_refresh_forever,
                args=(_collector,),
                name="background:ledger-gauge",
                daemon=True,
            ).start()
        _collector.factory = factory
        _collector.refresh()
        return _collector


def unwatch_ledger(factory: sessionmaker[Session]) -> None:
    """Stop reading this database (an app's shutdown): the gauge keeps its last totals, and the
    thread does not read a database its app has closed (or a test has dropped)."""
    with _lock:
        if _collector is not None and _collector.factory is factory:
            _collector.factory = None
