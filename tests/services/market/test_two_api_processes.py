"""Two market API processes on one PostgreSQL database: declarations and purchases from many
connections, spread over both, are booked exactly once, counted exactly, and the ledger is exact."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select

from benchmarks.bench_scale import register, respond
from mots.local.launcher import Stack
from mots.platform.db import make_engine, make_sessionmaker
from mots.platform.transactions import in_transaction
from services.market import ledger, rounds
from services.market.decisions import all_declared, declared
from services.market.models import Account, Decision, Purchase
from tests.services.market.conftest import OPERATOR, open_round_payload

pytestmark = pytest.mark.integration


def _workers(stack: Stack) -> list[int]:
    """The uvicorn worker processes of the market API (children of its supervisor, but for
    multiprocessing's resource tracker)."""
    (api,) = [p for p in stack.processes if p.name == "market-api"]
    tasks = Path(f"/proc/{api.popen.pid}/task").iterdir()
    children = [int(c) for t in tasks for c in (t / "children").read_text().split()]
    return [
        c for c in children if b"resource_tracker" not in Path(f"/proc/{c}/cmdline").read_bytes()
    ]


def test_two_api_processes_book_every_move_once(pg_url: str, tmp_path: Path) -> None:
    """300 clients registered in bulk; half join or abstain, half buy, over 32 connections to a
    market API of two processes (twice: the repeats change nothing): 300 decisions, a tally of
    300, the round complete, 150 purchases, the ledger exact."""
    stack = Stack(workdir=tmp_path, database_urls={"market": pg_url}, api_workers={"market": 2})
    stack.start(timeout_s=120, services=("market",))
    engine = make_engine(pg_url, pool_size=2)
    try:
        assert len(_workers(stack)) == 2
        with httpx.Client(base_url=stack.url("market"), timeout=120) as market:
            clients = register(market, 300)
            sessions = make_sessionmaker(engine)
            in_transaction(sessions, lambda s: rounds.open_round(s, open_round_payload(1)))
            moves = [
                ("buy" if i % 2 else ("join" if i % 4 == 0 else "abstain"), token, cid)
                for i, (cid, _, token) in enumerate(clients)
            ]
            for _ in range(2):
                asyncio.run(respond(stack.url("market"), 1, moves, 32))
            check = market.get("/v1/ledger/check", headers=OPERATOR).json()
        with sessions() as s:
            count = select(func.count()).select_from
            assert s.scalar(count(Decision).where(Decision.round_id == 1)) == 300
            assert declared(s, 1) == 300 and all_declared(s, 1)
            assert s.scalar(count(Purchase).where(Purchase.round_id == 1)) == 150
            pool = s.scalar(
                select(func.sum(Account.balance_micros)).where(
                    Account.name.in_(ledger.pool_shard_names(1))
                )
            )
        assert pool == 150 * 2_500_000  # each buyer paid the quoted 2.5 once
        assert (check["unbalanced_transactions"], check["mismatched_accounts"]) == (0, 0)
        assert float(check["total"]) == 0
    finally:
        engine.dispose()
        stack.stop()
