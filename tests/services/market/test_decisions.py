"""Declarations booked in batches, the rounds' declaration tallies, and reads off the write lock."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select, text

from mots.platform.api.base import Strategy
from mots.platform.api.market import DecisionOut
from mots.platform.db import in_transaction, make_engine, make_read_sessionmaker
from services.market import rounds
from services.market.api.errors import status_of
from services.market.booking import decision_batcher
from services.market.decisions import Declaration, all_declared, book_declarations, declared
from services.market.errors import Refusal
from services.market.models import Decision
from tests.services.market.test_purchases import (
    CLOSED,
    MISSING,
    OPEN,
    Market,
    _book,
    _book_pipelined,
    _market,
    _req,
    _seed,
)

BALANCES: dict[str, str | None] = {"c0": "10", "c1": "10", "c2": "10", "c3": "10"}


def _view(outcome: DecisionOut | BaseException) -> Any:
    if isinstance(outcome, Refusal):
        return status_of(outcome), outcome.detail
    assert isinstance(outcome, DecisionOut)
    return outcome.model_dump(mode="json")


def _declare(market: Market, batch: list[Declaration], shard: int = 0) -> list[Any]:
    out: list[Any] = in_transaction(market.sessions, lambda s: book_declarations(s, batch, shard))
    return out


def _decisions(market: Market, round_id: int) -> dict[int, str]:
    with market.sessions() as s:
        rows = s.execute(
            select(Decision.client_id, Decision.strategy).where(Decision.round_id == round_id)
        )
        return {r[0]: r[1] for r in rows}


def _tally_matches(market: Market, round_id: int) -> None:
    """The round's tally equals its decision rows (the count the tally replaces)."""
    with market.sessions() as s:
        rows = s.scalar(
            select(func.count()).select_from(Decision).where(Decision.round_id == round_id)
        )
        assert declared(s, round_id) == rows


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int]]:
    """A migrated, seeded SQLite file (4 funded clients, round 2 collecting, round 1 closed)."""
    path = tmp_path_factory.mktemp("decisions") / "template.db"
    return path, _seed(f"sqlite:///{path}", BALANCES)


@st.composite
def _declarations(draw: st.DrawFn, clients: list[int]) -> Declaration | tuple[int, str]:
    """A declaration, or (client, "buy!") for a purchase booked between declarations."""
    client = draw(st.sampled_from(clients))
    if draw(st.integers(0, 5)) == 0:
        return (client, "buy!")
    round_id = draw(st.sampled_from([OPEN, OPEN, OPEN, CLOSED, MISSING]))
    return Declaration(client, round_id, draw(st.sampled_from(list(Strategy))))


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_batched_declarations_answer_as_one_at_a_time(
    template: tuple[Path, dict[str, int]], data: st.DataObject
) -> None:
    """Batches of declarations (purchases between them) on one database, the same one at a time
    on a copy: the same answers, the same decisions, and tallies equal to the decision rows."""
    path, clients = template
    steps = data.draw(st.lists(_declarations(list(clients.values())), min_size=1, max_size=20))
    with tempfile.TemporaryDirectory() as tmp:
        markets = []
        for name in ("batched", "single"):
            shutil.copy(path, Path(tmp) / f"{name}.db")
            markets.append(_market(f"sqlite:///{Path(tmp) / name}.db", clients))
        batched, single = markets
        try:
            got: list[Any] = []
            want: list[Any] = []
            batch: list[Declaration] = []
            for i, step in enumerate([*steps, None]):
                if isinstance(step, Declaration):
                    batch.append(step)
                    want.extend(_view(o) for o in _declare(single, [step], shard=i % 3))
                    continue
                got.extend(_view(o) for o in _declare(batched, batch, shard=i % 3))
                batch = []
                if step is not None:  # the same purchase on both
                    for market in markets:
                        _book(market, [_req(step[0], OPEN, f"k{i}")], shard=i % 2)
            assert got == want
            assert _decisions(batched, OPEN) == _decisions(single, OPEN)
            for market in markets:
                _tally_matches(market, OPEN)
        finally:
            for market in markets:
                market.engine.dispose()


def test_tallies_count_declarations_and_purchases_on_both_databases(database_url: str) -> None:
    """Declarations and purchases (PostgreSQL: also the pipelined path) in several shards: the
    tally is the number of clients that declared, and the round is complete at its population."""
    market = _market(database_url, _seed(database_url, BALANCES))
    a, b, c, d = market.clients.values()
    try:
        assert _declare(market, [Declaration(a, OPEN, Strategy.JOIN)], shard=3)[0].paid is False
        _book(market, [_req(a, OPEN, "ka"), _req(b, OPEN, "kb")], shard=5)  # a: already declared
        _declare(market, [Declaration(b, OPEN, Strategy.BUY), Declaration(a, OPEN, Strategy.BUY)])
        if market.url.startswith("postgresql"):
            _book_pipelined(market, [_req(c, OPEN, "kc")], shard=7)
        else:
            _book(market, [_req(c, OPEN, "kc")], shard=7)
        _tally_matches(market, OPEN)
        with market.sessions() as s:
            assert declared(s, OPEN) == 3 and not all_declared(s, OPEN)
            assert rounds.progress(s, OPEN).registered == 4
        refused = _declare(market, [Declaration(c, OPEN, Strategy.JOIN)])[0]
        assert isinstance(refused, Refusal) and status_of(refused) == 409  # c paid
        _declare(market, [Declaration(d, OPEN, Strategy.ABSTAIN)], shard=1)
        _declare(market, [Declaration(d, OPEN, Strategy.JOIN)], shard=2)  # a change: not counted
        _tally_matches(market, OPEN)
        with market.sessions() as s:
            assert declared(s, OPEN) == 4 and all_declared(s, OPEN)
    finally:
        market.engine.dispose()


def test_the_declaration_batcher_tells_once_everyone_declared(database_url: str) -> None:
    """Declarations in flight are booked together; the last one makes the round complete."""
    market = _market(database_url, _seed(database_url, BALANCES))
    heard: list[int] = []

    async def scenario() -> list[Any]:
        batcher = decision_batcher(market.sessions, on_complete=heard.append)
        ids = list(market.clients.values())
        try:
            first = await asyncio.gather(
                *(batcher.submit(Declaration(c, OPEN, Strategy.JOIN)) for c in ids[:3]),
                batcher.submit(Declaration(ids[0], MISSING, Strategy.JOIN)),
                return_exceptions=True,
            )
            await asyncio.sleep(0.3)
            assert heard == []
            last = await batcher.submit(Declaration(ids[3], OPEN, Strategy.ABSTAIN))
            for _ in range(100):
                if heard:
                    break
                await asyncio.sleep(0.05)
            return [*first, last]
        finally:
            batcher.close()

    try:
        outcomes = asyncio.run(scenario())
        assert [isinstance(o, DecisionOut) for o in outcomes] == [True, True, True, False, True]
        assert heard == [OPEN]
        _tally_matches(market, OPEN)
    finally:
        market.engine.dispose()


def test_sqlite_reads_do_not_wait_for_a_writer(tmp_path: Path) -> None:
    """A read-only session reads while another transaction holds SQLite's write lock."""
    url = f"sqlite:///{tmp_path / 'm.db'}"
    market = _market(url, _seed(url, BALANCES))
    reads = make_read_sessionmaker(market.engine)
    writer = make_engine(url, pool_size=1)
    locked, release = threading.Event(), threading.Event()

    def hold_the_write_lock() -> None:
        with writer.begin() as conn:  # BEGIN IMMEDIATE
            conn.execute(text("UPDATE market_rounds SET state = state"))
            locked.set()
            release.wait(10)

    holder = threading.Thread(target=hold_the_write_lock)
    holder.start()
    try:
        assert locked.wait(10)
        with reads() as s, s.begin():
            assert rounds.progress(s, OPEN).state == "collecting"
        assert holder.is_alive()  # the read did not wait for the writer to finish
    finally:
        release.set()
        holder.join()
        writer.dispose()
        market.engine.dispose()
