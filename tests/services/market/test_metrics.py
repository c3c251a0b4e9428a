"""The market's ledger gauge reads cached totals: scrapes never query the ledger (issue 13)."""

from __future__ import annotations

import time

from fastapi.testclient import TestClient
from prometheus_client import REGISTRY

from services.market import metrics
from services.market.metrics import watch_ledger


def test_scrapes_read_the_cache_not_the_ledger(market: TestClient, register, fund) -> None:
    """A hundred scrapes cost no ledger read; the gauge shows the totals after a refresh."""
    collector = watch_ledger(market.app.state.sessions)
    a = register()
    fund(a["id"], "7")
    reads, start = collector.reads, time.monotonic()
    for _ in range(100):
        assert market.get("/metrics").status_code == 200
    refreshes = (time.monotonic() - start) / metrics.REFRESH_S + 1  # the background thread's
    assert collector.reads - reads <= refreshes
    collector.refresh()
    assert REGISTRY.get_sample_value("mots_ledger_balance", {"account": "wallets"}) == 7.0
    assert metrics.REFRESH_S <= 5
