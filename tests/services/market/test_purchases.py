"""book_purchases on a migrated market database: a batch decided as if one request after another."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session, sessionmaker

from mots.platform import metrics
from mots.platform.api.market import PurchaseOut
from mots.platform.db import in_transaction, make_engine, make_sessionmaker
from mots.platform.money import from_micros, to_micros
from services.market import ledger, migrations, rounds
from services.market.api.errors import as_http, status_of
from services.market.auth import hash_token
from services.market.booking import purchase_batcher
from services.market.errors import Refusal, Unauthorized
from services.market.idempotency import request_hash
from services.market.models import Account, Client, Purchase
from services.market.purchases import (
    PATH,
    BookedBatch,
    Outcome,
    PurchaseRequest,
    book_purchases,
    purchase_body,
)
from services.market.purchases_pg import NeedsSetup, PgPurchaseBook, array_literal
from tests.services.conftest import PG_ADMIN, _create_pg_database, _drop_pg_database
from tests.services.market.conftest import open_round_payload

CLOSED, OPEN, MISSING = 1, 2, 99
PRICE = to_micros("2.5")


@dataclass
class Market:
    """A migrated market: engine, sessions and the seeded clients (name → id)."""

    engine: Engine
    sessions: sessionmaker[Session]
    clients: dict[str, int]
    url: str


def _seed(url: str, balances: dict[str, str | None]) -> dict[str, int]:
    """Migrate; clients with tokens ``token-<name>`` and funded wallets (None: no wallet at all);
    round 1 opened then closed, round 2 collecting at 2.5."""
    migrations.upgrade(url)
    engine = make_engine(url, pool_size=2)
    factory = make_sessionmaker(engine)
    try:

        def seed(session: Session) -> dict[str, int]:
            external = ledger.ensure_account(session, ledger.EXTERNAL)
            ids = {}
            for name, balance in balances.items():
                client = Client(
                    name=name,
                    type_name="small",
                    data_size=50,
                    cost_micros=500_000,
                    token_hash=hash_token(f"token-{name}"),
                )
                session.add(client)
                session.flush()
                ids[name] = client.id
                if balance is None:
                    continue
                wallet = ledger.ensure_account(session, ledger.wallet_name(client.id), client.id)
                ledger.lock_accounts(session, [wallet, external])
                ledger.transfer(
                    session, "deposit", external, wallet, to_micros(balance), client_id=client.id
                )
            return ids

        ids: dict[str, int] = in_transaction(factory, seed)
        in_transaction(factory, lambda s: rounds.open_round(s, open_round_payload(CLOSED)))
        in_transaction(factory, lambda s: rounds.close_round(s, CLOSED))
        in_transaction(factory, lambda s: rounds.open_round(s, open_round_payload(OPEN, "2.5")))
        return ids
    finally:
        engine.dispose()


def _market(url: str, clients: dict[str, int]) -> Market:
    engine = make_engine(url, pool_size=2)
    return Market(engine, make_sessionmaker(engine), clients, url)


def _fingerprint(round_id: int) -> str:
    return request_hash("POST", PATH, {"round_id": round_id})


def _req(
    client_id: int | None,
    round_id: int,
    key: str,
    fingerprint: str | None = None,
    verifier: str = "",
) -> PurchaseRequest:
    return PurchaseRequest(
        client_id,
        round_id,
        key,
        _fingerprint(round_id) if fingerprint is None else fingerprint,
        verifier,
    )


def _book(market: Market, requests: list[PurchaseRequest], shard: int = 0) -> BookedBatch:
    done: BookedBatch = in_transaction(
        market.sessions, lambda s: book_purchases(s, requests, shard)
    )
    return done


def _book_pipelined(market: Market, requests: list[PurchaseRequest], shard: int = 0) -> BookedBatch:
    """The batch on PostgreSQL's pipelined path (NeedsSetup if it needs an account made)."""

    async def book() -> BookedBatch:
        pipelined = PgPurchaseBook(market.url, connections=1)
        try:
            return await pipelined.book(requests, shard)
        finally:
            await pipelined.close()

    return asyncio.run(book())


BOOKERS = {"session": _book, "pipelined": _book_pipelined}


@pytest.fixture(params=list(BOOKERS))
def booker(request: pytest.FixtureRequest, database_url: str) -> Any:
    """Each way to book a batch on this database (the pipelined one on PostgreSQL only)."""
    if request.param == "pipelined" and not database_url.startswith("postgresql"):
        pytest.skip("the pipelined path is PostgreSQL's")
    return BOOKERS[request.param]


def _code(outcome: Outcome) -> int:
    return status_of(outcome) if isinstance(outcome, Refusal) else outcome[0]


def _refusal(outcome: Outcome) -> Refusal:
    assert isinstance(outcome, Refusal), outcome
    return outcome


def _body(outcome: Outcome) -> dict[str, Any]:
    assert not isinstance(outcome, Refusal), outcome
    return outcome[1]


def _balance(market: Market, name: str) -> int:
    with market.sessions() as s:
        value = s.scalar(select(Account.balance_micros).where(Account.name == name))
    assert value is not None, name
    return value


MIXED_BALANCES: dict[str, str | None] = {
    "rich": "10",
    "buyer": "10",
    "other": "10",
    "exact": "2.5",  # balance == price: buys
    "poor": "1",
    "nowallet": None,  # a client made without a wallet: one is made, empty
    "bytoken": "10",
}


@pytest.fixture
def mixed(database_url: str) -> Iterator[Market]:
    """The market of the mixed-batch test on each database."""
    market = _market(database_url, _seed(database_url, MIXED_BALANCES))
    try:
        yield market
    finally:
        market.engine.dispose()


def test_one_mixed_batch_applies_every_rule_in_order(mixed: Market, booker: Any) -> None:
    """One call decides each request as if alone, in order; money, rows and keys add up."""
    c = mixed.clients
    _book = booker
    if booker is _book_pipelined:  # it leaves a missing wallet to the session path (tested below)
        nowallet = c["nowallet"]
        in_transaction(
            mixed.sessions,
            lambda s: ledger.ensure_account(s, ledger.wallet_name(nowallet), nowallet),
        )
    # Before the batch: "rich" bought round 2 under key k-rich (its stored result).
    first = _book(mixed, [_req(c["rich"], OPEN, "k-rich")])
    assert [_code(o) for o in first.outcomes] == [201]
    stored_body = first.outcomes[0]
    assert not isinstance(stored_body, Refusal)

    batch = [
        _req(c["rich"], OPEN, "k-rich"),  # 0 stored key, same body: the stored result
        _req(c["rich"], OPEN, "k-rich", "another-body"),  # 1 stored key, other body: 409
        _req(c["rich"], OPEN, "k-rich-2"),  # 2 new key, but rich already bought: 409
        _req(c["buyer"], OPEN, "k-b"),  # 3 books: 201
        _req(c["buyer"], OPEN, "k-b"),  # 4 same key, same body in the batch: repeats 3
        _req(c["buyer"], OPEN, "k-b", "another-body"),  # 5 same key, other body: 409
        _req(c["buyer"], OPEN, "k-b-2"),  # 6 bought by 3 in this very batch: 409
        _req(c["other"], MISSING, "k-o1"),  # 7 unknown round: 404
        _req(c["other"], CLOSED, "k-o2"),  # 8 round not collecting: 409
        _req(c["poor"], OPEN, "k-p"),  # 9 balance below price: 402
        _req(c["nowallet"], OPEN, "k-n"),  # 10 wallet made now, empty: 402
        _req(None, OPEN, "k-t", verifier=hash_token("no-such-token")),  # 11 unknown token: 401
        _req(None, OPEN, "k-t", verifier=hash_token("token-bytoken")),  # 12 token resolved: 201
        _req(c["exact"], OPEN, "k-e"),  # 13 balance == price: 201
        _req(c["other"], OPEN, "k-o1"),  # 14 key refused at 7 (not stored), new body: 201
    ]
    done = _book(mixed, batch, shard=5)
    codes = [_code(o) for o in done.outcomes]
    assert codes == [201, 409, 409, 201, 201, 409, 409, 404, 409, 402, 402, 401, 201, 201, 201]
    out = done.outcomes
    assert out[0] == stored_body
    assert out[4] == out[3]
    assert done.booked == 4  # 3, 12, 13, 14
    assert done.rounds_booked == [OPEN]
    for i in (1, 5):
        assert "Idempotency-Key" in str(_refusal(out[i]).detail)
    assert "already bought" in str(_refusal(out[2]).detail)
    assert "already bought" in str(_refusal(out[6]).detail)
    assert "is training" in str(_refusal(out[8]).detail)  # closed: no more purchases
    assert isinstance(out[11], Unauthorized)
    assert as_http(_refusal(out[11])).headers == {"WWW-Authenticate": "Bearer"}

    bodies = {i: _body(out[i]) for i in (3, 12, 13, 14)}
    assert bodies[12]["client_id"] == c["bytoken"]
    balances = [Decimal(bodies[i]["balance"]) for i in (3, 12, 13, 14)]
    assert balances == [Decimal("7.5"), Decimal("7.5"), 0, Decimal("7.5")]
    assert all(b["round_id"] == OPEN and Decimal(b["price"]) == 2.5 for b in bodies.values())
    assert len({b["transaction_id"] for b in bodies.values()}) == 4

    # Money: the batch's payments, and only those, sit in shard 5; the ledger balances.
    assert _balance(mixed, ledger.pool_shard_name(OPEN, 5)) == PRICE * done.booked
    assert _balance(mixed, ledger.pool_shard_name(OPEN, 0)) == PRICE  # the earlier single buy
    for name, left in [("rich", "7.5"), ("buyer", "7.5"), ("exact", "0"), ("poor", "1")]:
        assert _balance(mixed, ledger.wallet_name(c[name])) == to_micros(left)
    assert _balance(mixed, ledger.wallet_name(c["nowallet"])) == 0
    with mixed.sessions() as s:
        check = ledger.check(s)
        buyers = sorted(s.scalars(select(Purchase.client_id).where(Purchase.round_id == OPEN)))
    assert check.unbalanced_transactions == 0
    assert check.mismatched_accounts == 0
    assert check.total == 0
    assert buyers == sorted(c[n] for n in ("rich", "buyer", "bytoken", "exact", "other"))

    # Replaying the whole batch: every booked key answers with its stored result, nothing moves.
    again = _book(mixed, batch, shard=6)
    assert again.booked == 0
    for i in (3, 4, 12, 13, 14):
        assert again.outcomes[i] == out[i]
    assert _balance(mixed, ledger.pool_shard_name(OPEN, 6)) == 0


def test_a_batch_of_only_unknown_tokens_books_nothing(mixed: Market, booker: Any) -> None:
    """Every caller unknown: 401 each, nothing written."""
    done = booker(mixed, [_req(None, OPEN, f"k{i}", verifier=f"v{i}") for i in range(3)])
    assert [_code(o) for o in done.outcomes] == [401, 401, 401]
    assert done.booked == 0 and done.rounds_booked == []


def test_the_pipelined_path_leaves_a_missing_wallet_to_the_session_path(pg_url: str) -> None:
    """A caller without a wallet: NeedsSetup and nothing written; the batcher books the batch
    on a session, which makes the wallet, and the pipelined path takes the next one."""
    market = _market(pg_url, _seed(pg_url, {"funded": "5", "bare": None}))
    funded, bare = market.clients["funded"], market.clients["bare"]
    batch = [_req(funded, OPEN, "f1"), _req(bare, OPEN, "b1")]
    try:
        with pytest.raises(NeedsSetup):
            _book_pipelined(market, batch)
        assert _balance(market, ledger.pool_shard_name(OPEN, 0)) == 0  # rolled back

        async def through_batcher() -> list[Any]:
            pipelined = PgPurchaseBook(market.url, connections=1)
            batcher = purchase_batcher(market.sessions, pipelined=pipelined)
            try:
                first = await asyncio.gather(
                    *(batcher.submit(r) for r in batch), return_exceptions=True
                )
                again = await asyncio.gather(
                    batcher.submit(_req(bare, OPEN, "b2")), return_exceptions=True
                )
                return [*first, *again]
            finally:
                batcher.close()
                await pipelined.close()

        codes = [_code(o) for o in asyncio.run(through_batcher())]
        assert codes == [201, 402, 402]  # the bare wallet was made, empty
        assert _balance(market, ledger.wallet_name(bare)) == 0
        pool = sum(_balance(market, name) for name in ledger.pool_shard_names(OPEN))
        assert pool == PRICE  # in whichever shard the batcher drew
    finally:
        market.engine.dispose()


def test_the_pipelined_path_reconnects_after_a_dropped_connection(pg_url: str) -> None:
    """The database ends the batch's connection between two batches: the next batch reopens it."""
    market = _market(pg_url, _seed(pg_url, {"a": "5", "b": "5"}))

    async def scenario() -> list[int]:
        pipelined = PgPurchaseBook(market.url, connections=1)
        try:
            first = await pipelined.book([_req(market.clients["a"], OPEN, "a1")], 0)
            with market.engine.connect() as conn:
                conn.exec_driver_sql(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
            second = await pipelined.book([_req(market.clients["b"], OPEN, "b1")], 0)
            return [_code(o) for o in (*first.outcomes, *second.outcomes)]
        finally:
            await pipelined.close()

    try:
        assert asyncio.run(scenario()) == [201, 201]
        with market.sessions() as s:
            assert ledger.check(s).unbalanced_transactions == 0
    finally:
        market.engine.dispose()


def test_the_round_is_complete_when_every_client_declared(database_url: str) -> None:
    """After the batch that makes every client declared commits, on_complete hears of the round;
    the purchases it booked are counted (mots_purchases_total)."""
    market = _market(database_url, _seed(database_url, {"a": "5", "b": "5"}))
    heard: list[int] = []
    counted = metrics.PURCHASES.labels("fashion-mnist")._value.get()  # the seeded round's task

    async def scenario() -> list[int]:
        batcher = purchase_batcher(market.sessions, on_complete=heard.append)
        a, b = market.clients["a"], market.clients["b"]
        first = await batcher.submit(_req(a, OPEN, "x"))
        assert first[0] == 201
        await asyncio.sleep(0.3)
        assert heard == []  # b has not declared yet
        second = await batcher.submit(_req(b, OPEN, "y"))
        assert second[0] == 201
        for _ in range(100):
            if heard:
                break
            await asyncio.sleep(0.05)
        batcher.close()
        return heard

    try:
        assert asyncio.run(scenario()) == [OPEN]
        assert metrics.PURCHASES.labels("fashion-mnist")._value.get() == counted + 2
    finally:
        market.engine.dispose()


# --- property: a batch answers as the same requests booked one at a time -----------------------

PROPERTY_BALANCES: dict[str, str | None] = {
    "c0": "10",
    "c1": "2.5",
    "c2": "1",  # poor
    "c3": None,  # no wallet
}


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int]]:
    """A migrated, seeded SQLite file that each example copies twice."""
    path = tmp_path_factory.mktemp("purchases") / "template.db"
    clients = _seed(f"sqlite:///{path}", PROPERTY_BALANCES)
    assert not Path(f"{path}-wal").exists() or Path(f"{path}-wal").stat().st_size == 0
    return path, clients


@st.composite
def _requests(draw: st.DrawFn, clients: list[int]) -> PurchaseRequest:
    client = draw(st.sampled_from([*clients, -1]))  # -1: an unknown token
    by_token = client == -1 or draw(st.booleans())
    round_id = draw(st.sampled_from([OPEN, OPEN, OPEN, CLOSED, MISSING]))
    fingerprint = draw(st.sampled_from([_fingerprint(round_id), "tampered"]))
    key = draw(st.sampled_from(["k0", "k1", "k2"]))
    if not by_token:
        return PurchaseRequest(client, round_id, key, fingerprint)
    name = {v: k for k, v in zip(PROPERTY_BALANCES, clients, strict=True)}.get(client, "nobody")
    return PurchaseRequest(None, round_id, key, fingerprint, hash_token(f"token-{name}"))


IDS = ("purchase_id", "transaction_id")


def _view(outcome: Outcome, ids: bool = True) -> tuple[int, Any]:
    """What a caller sees: the status and, for a booking, its body; refusals by their detail.

    ``ids=False`` leaves out the new rows' ids (the pipelined path reserves ids for every request
    of a batch, so its ids may skip numbers that one-at-a-time booking uses).
    """
    if isinstance(outcome, Refusal):
        return status_of(outcome), outcome.detail
    code, body = outcome
    return code, body if ids else {k: v for k, v in body.items() if k not in IDS}


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_a_batch_answers_as_its_requests_one_at_a_time(
    template: tuple[Path, dict[str, int]], data: st.DataObject
) -> None:
    """Two batches on one database; the same requests singly on a copy: same answers, same money."""
    path, clients = template
    ids = list(clients.values())
    batches = [
        data.draw(st.lists(_requests(ids), min_size=1, max_size=12), label=f"batch {i}")
        for i in range(2)
    ]
    with tempfile.TemporaryDirectory() as tmp:
        urls = []
        for name in ("batched", "single"):
            shutil.copy(path, Path(tmp) / f"{name}.db")
            urls.append(f"sqlite:///{Path(tmp) / name}.db")
        batched, single = _market(urls[0], clients), _market(urls[1], clients)
        try:
            _assert_batches_answer_as_singles(batched, single, batches, _book)
        finally:
            batched.engine.dispose()
            single.engine.dispose()


def _assert_batches_answer_as_singles(
    batched: Market,
    single: Market,
    batches: list[list[PurchaseRequest]],
    book: Any,
    same_ids: bool = True,
) -> None:
    """``book`` each batch on ``batched``, each request alone on ``single``: same answers (ids
    aside unless ``same_ids``), balanced ledgers, same balances; each answer's ids are its rows'."""
    got = [o for b in batches for o in book(batched, b).outcomes]
    want = [_book(single, [r]).outcomes[0] for b in batches for r in b]
    assert [_code(o) for o in got] == [_code(o) for o in want]
    assert [_view(o, same_ids) for o in got] == [_view(o, same_ids) for o in want]
    booked = {
        (b["purchase_id"], b["transaction_id"])
        for code, b in (o for o in got if not isinstance(o, Refusal))
        if code == 201
    }
    with batched.sessions() as s:
        rows = {(r[0], r[1]) for r in s.execute(select(Purchase.id, Purchase.transaction_id))}
    assert booked <= rows
    for market in (batched, single):
        with market.sessions() as s:
            check = ledger.check(s)
        assert (check.unbalanced_transactions, check.mismatched_accounts) == (0, 0)
        assert check.total == 0
    for cid in batched.clients.values():
        name = ledger.wallet_name(cid)
        with batched.sessions() as s1, single.sessions() as s2:
            q = select(Account.balance_micros).where(Account.name == name)
            assert s1.scalar(q) == s2.scalar(q)


PG_PROPERTY_BALANCES: dict[str, str | None] = {**PROPERTY_BALANCES, "c3": "0"}
"""Every client with a wallet (c3's empty), so that every batch stays on the pipelined path."""


@pytest.fixture(scope="module")
def pg_template() -> Iterator[tuple[str, dict[str, int]]]:
    """A migrated, seeded PostgreSQL database that each example copies twice (CREATE DATABASE
    … TEMPLATE)."""
    name = _create_pg_database()
    try:
        clients = _seed(
            f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}", PG_PROPERTY_BALANCES
        )
        yield name, clients
    finally:
        _drop_pg_database(name)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_a_pipelined_batch_answers_as_its_requests_one_at_a_time(
    pg_template: tuple[str, dict[str, int]], data: st.DataObject
) -> None:
    """PostgreSQL: two batches on the pipelined path; the same requests singly on a session."""
    template_name, clients = pg_template
    ids = list(clients.values())
    batches = [
        data.draw(st.lists(_requests(ids), min_size=1, max_size=12), label=f"batch {i}")
        for i in range(2)
    ]
    names = [f"{template_name}_{uuid.uuid4().hex[:6]}" for _ in range(2)]
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        for name in names:
            admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_name}"')
    markets = [_market(f"postgresql+psycopg://postgres@127.0.0.1:5432/{n}", clients) for n in names]
    try:
        _assert_batches_answer_as_singles(
            markets[0], markets[1], batches, _book_pipelined, same_ids=False
        )
    finally:
        for market, name in zip(markets, names, strict=True):
            market.engine.dispose()
            _drop_pg_database(name)


@given(
    ids=st.tuples(*[st.integers(1, 2**31 - 1)] * 3),
    price=st.integers(0, 10**15),
    transaction_id=st.none() | st.integers(1, 2**31 - 1),
    balance=st.integers(0, 10**15),
)
def test_the_purchase_body_is_purchase_outs_json(
    ids: tuple[int, int, int], price: int, transaction_id: int | None, balance: int
) -> None:
    """The hot path's body (built by model_construct) equals the validated PurchaseOut's JSON."""
    purchase_id, round_id, client_id = ids
    made = purchase_body(purchase_id, round_id, client_id, price, transaction_id, balance)
    model = PurchaseOut(
        purchase_id=purchase_id,
        round_id=round_id,
        client_id=client_id,
        price=from_micros(price),
        transaction_id=transaction_id,
        balance=from_micros(balance),
    )
    assert made == model.model_dump(mode="json")
    assert PurchaseOut.model_validate(made) == model


def test_a_batcher_has_at_most_one_writer_per_pool_shard(tmp_path: Path) -> None:
    """Each batch in flight holds its own pool shard, so writers beyond the shards are refused."""
    sessions = make_sessionmaker(make_engine(f"sqlite:///{tmp_path / 'm.db'}"))
    with pytest.raises(ValueError, match="writers: at most 16"):
        purchase_batcher(sessions, writers=ledger.POOL_SHARDS + 1)
    purchase_batcher(sessions, writers=ledger.POOL_SHARDS).close()


@settings(max_examples=40, deadline=None)
@given(
    strings=st.lists(
        st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\0"))
    ),
    ints=st.lists(st.integers(-(2**31), 2**31 - 1)),
)
def test_array_literals_read_back_as_the_lists_they_encode(
    strings: list[str], ints: list[int]
) -> None:
    """Quotes, backslashes, commas, braces, blanks and NULL-like words survive PostgreSQL's parser."""
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        cur = psycopg.ClientCursor(conn)
        cur.execute("SELECT %s::text[], %s::int[]", [array_literal(strings), array_literal(ints)])
        assert cur.fetchone() == (strings, ints)
