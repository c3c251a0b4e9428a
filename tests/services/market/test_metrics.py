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
    wallets = {"account": "wallets", "task": ""}  # a wallet pays for any task: no task label
    assert REGISTRY.get_sample_value("mots_ledger_balance", wallets) == 7.0
    assert metrics.REFRESH_S <= 5


def test_round_pools_are_totalled_per_task(market: TestClient) -> None:
    """Issue 36: a round pool's balance shows under its task; the accounts of no task (wallets,
    the platform's) under ``task=""`` (no label to Prometheus); the sum over all stays the
    ledger's, 0."""
    from services.market.ledger import totals_by_category
    from services.market.models import Account

    factory = market.app.state.sessions
    with factory() as session, session.begin():
        session.add_all([
            Account(name="round:901:pool", category="round_pools", balance_micros=2_000_000, task="digits"),
            Account(name="round:902:pool", category="round_pools", balance_micros=500_000, task="digits"),
            Account(name="round:903:pool", category="round_pools", balance_micros=1_000_000, task="fashion-mnist"),
            Account(name="platform:test", category="platform_subsidy", balance_micros=-3_500_000),
        ])  # fmt: skip
    with factory() as session:
        totals = totals_by_category(session)
    assert totals[("round_pools", "digits")] == 2_500_000
    assert totals[("round_pools", "fashion-mnist")] == 1_000_000
    assert totals[("platform_subsidy", "")] == -3_500_000
    collector = watch_ledger(factory)
    collector.refresh()
    pools = {"account": "round_pools", "task": "digits"}
    assert REGISTRY.get_sample_value("mots_ledger_balance", pools) == 2.5
    declared = REGISTRY.get_sample_value("mots_purchases_total", {"task": "digits"})
    assert declared is not None  # exported (at 0 here) before the task's first sale
    samples = [s for f in collector.collect() for s in f.samples]
    assert {s.labels["task"] for s in samples} >= {"", "digits", "fashion-mnist"}
    assert abs(sum(s.value for s in samples)) < 1e-9
