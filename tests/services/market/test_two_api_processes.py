"""Two market API processes on one PostgreSQL database: declarations and purchases from many
connections, spread over both, are booked exactly once, counted exactly, and the ledger is exact."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select

from benchmarks.bench_scale import enrolment_codes, register, registration_request, respond
from benchmarks.raw_http import exchange
from mots.local.launcher import Stack
from mots.platform.db import in_transaction, make_engine, make_sessionmaker
from services.market import ledger, rounds
from services.market.decisions import all_declared, declared
from services.market.models import Account, Client, Decision, Enrolment, Purchase
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
            quote = open_round_payload(1, rewards={"small": "1.0", "large": "4.0"})  # joins: no fee
            in_transaction(sessions, lambda s: rounds.open_round(s, quote))
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


def test_two_api_processes_never_overdraw_an_enrolment_code(pg_url: str, tmp_path: Path) -> None:
    """Three codes (150, 75 and 75 uses), 20 devices more than its uses per code, each device one
    request, over 32 connections to two API processes: exactly its uses per code are registered
    (each with its enrolment), the other 60 refused 401, no code overdrawn, ids and tokens
    distinct, the ledger exact."""
    stack = Stack(workdir=tmp_path, database_urls={"market": pg_url}, api_workers={"market": 2})
    stack.start(timeout_s=120, services=("market",))
    engine = make_engine(pg_url, pool_size=2)
    try:
        assert len(_workers(stack)) == 2
        base = stack.url("market")
        with httpx.Client(base_url=base, timeout=120) as market:
            codes = enrolment_codes(market, 300)  # counts(300): 150, 75, 75 uses
            by_code = {c: codes.count(c) for c in codes}
        tries = [c for c, n in by_code.items() for _ in range(n + 20)]
        host = base.removeprefix("http://")
        requests = iter(enumerate(registration_request(host, c, k) for k, c in enumerate(tries)))
        answers: list[tuple[int, bytes]] = [(0, b"")] * len(tries)

        async def connection() -> None:
            reader, writer = await asyncio.open_connection(*host.split(":"))
            try:
                for k, req in requests:
                    answers[k] = await exchange(reader, writer, req)
            finally:
                writer.close()

        async def all_connections() -> None:
            await asyncio.gather(*(connection() for _ in range(32)))

        asyncio.run(all_connections())
        made = [json.loads(b) for s, b in answers if s == 201]
        assert sorted(s for s, _ in answers if s != 201) == [401] * (len(tries) - 300)
        assert len(made) == 300 and len({c["id"] for c in made}) == 300
        assert len({c["token"] for c in made}) == 300
        for code, uses in by_code.items():  # each code: exactly its uses, of its type
            got = [c for c, (s, _) in zip(tries, answers, strict=True) if c == code and s == 201]
            assert len(got) == uses
        with make_sessionmaker(engine)() as s:
            assert s.scalars(select(Enrolment.uses_left)).all() == [0, 0, 0]
            assert s.scalar(select(func.count()).select_from(Client)) == 300
            assert (
                s.scalar(
                    select(func.count()).select_from(Client).where(Client.enrolment_id.is_(None))
                )
                == 0
            )
        with httpx.Client(base_url=base, timeout=120) as market:
            check = market.get("/v1/ledger/check", headers=OPERATOR).json()
        assert (check["unbalanced_transactions"], check["mismatched_accounts"]) == (0, 0)
    finally:
        engine.dispose()
        stack.stop()
