"""Bulk statements on SQLite and PostgreSQL: insert_rows (unnest arrays / executemany), add_to_column."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import (
    BigInteger,
    Column,
    Engine,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Table,
    func,
    select,
)

from mots.platform.db import BatchWrite, add_to_column, insert_rows, make_engine, reserve_ids
from tests.services.conftest import _create_pg_database, _drop_pg_database, _listening

METADATA = MetaData()
ITEMS = Table(
    "bulk_items",
    METADATA,
    Column("id", Integer, primary_key=True),
    Column("name", String(32), nullable=False, unique=True),
    Column("amount", BigInteger, nullable=False),
    Column("note", String(64), nullable=True),
)


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    """A fresh database of each dialect with the throwaway table (PostgreSQL dropped after)."""
    pg_name = None
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'bulk.db'}"
    else:
        if not _listening(5432):
            pytest.fail("PostgreSQL is not listening on 127.0.0.1:5432: run `make system`")
        pg_name = _create_pg_database()
        url = f"postgresql+psycopg://postgres@127.0.0.1:5432/{pg_name}"
    eng = make_engine(url, pool_size=2)
    try:
        METADATA.create_all(eng)
        yield eng
    finally:
        eng.dispose()
        if pg_name is not None:
            _drop_pg_database(pg_name)


def _rows(engine: Engine) -> dict[str, tuple[int, int, str | None]]:
    with engine.connect() as conn:
        return {
            r.name: (r.id, r.amount, r.note)
            for r in conn.execute(select(ITEMS.c.id, ITEMS.c.name, ITEMS.c.amount, ITEMS.c.note))
        }


def test_insert_rows_returns_the_requested_columns(engine: Engine) -> None:
    """Every row is inserted; RETURNING gives one tuple per row with the named columns."""
    rows = [
        {"name": f"n{i}", "amount": i * 10, "note": None if i % 2 else f"x{i}"} for i in range(5)
    ]
    with engine.begin() as conn:
        got = insert_rows(conn, ITEMS, rows, returning=("id", "name", "amount"))
    assert sorted((name, amount) for _, name, amount in got) == [
        (f"n{i}", i * 10) for i in range(5)
    ]
    stored = _rows(engine)
    assert {name: (i, a) for name, (i, a, _) in stored.items()} == {
        name: (i, a) for i, name, a in got
    }
    assert stored["n0"][2] == "x0" and stored["n1"][2] is None
    # without returning: inserted, nothing returned
    with engine.begin() as conn:
        assert insert_rows(conn, ITEMS, [{"name": "plain", "amount": 1}]) == []
    assert _rows(engine)["plain"][1:] == (1, None)


def test_sorted_ids_line_up_with_the_rows_order(engine: Engine) -> None:
    """Ids drawn from the sequence ascend in the order of ``rows`` (the ledger's batched transfers rely on it)."""
    with engine.begin() as conn:  # some rows first, so ids do not start at 1
        insert_rows(conn, ITEMS, [{"name": f"pre{i}", "amount": 0} for i in range(3)])
    names = [f"r{i:03d}" for i in range(200)]
    random.Random(7).shuffle(names)
    rows = [{"name": n, "amount": k} for k, n in enumerate(names)]
    with engine.begin() as conn:
        ids = sorted(r[0] for r in insert_rows(conn, ITEMS, rows, returning=("id",)))
    assert len(ids) == len(rows) == len(set(ids))
    stored = _rows(engine)
    assert [stored[n][0] for n in names] == ids
    assert all(stored[n][1] == k for k, n in enumerate(names))


def test_conflict_with_update_overwrites_the_named_columns(engine: Engine) -> None:
    """ON CONFLICT (name) DO UPDATE: colliding rows take the new values; new rows are inserted."""
    with engine.begin() as conn:
        insert_rows(
            conn,
            ITEMS,
            [{"name": "a", "amount": 1, "note": "old"}, {"name": "b", "amount": 2, "note": "old"}],
        )
    before = _rows(engine)
    with engine.begin() as conn:
        got = insert_rows(
            conn,
            ITEMS,
            [
                {"name": "b", "amount": 20, "note": "new"},
                {"name": "c", "amount": 30, "note": "new"},
            ],
            returning=("id", "name"),
            conflict=("name",),
            conflict_update=("amount",),
        )
    after = _rows(engine)
    assert after["a"] == before["a"]
    assert after["b"] == (before["b"][0], 20, "old")  # same row, amount updated, note kept
    assert after["c"][1:] == (30, "new")
    assert sorted(name for _, name in got) == ["b", "c"]
    assert dict((n, i) for i, n in got) == {"b": before["b"][0], "c": after["c"][0]}


def test_conflict_without_update_skips_the_colliding_rows(engine: Engine) -> None:
    """ON CONFLICT (name) DO NOTHING: existing rows untouched, only new rows inserted/returned."""
    with engine.begin() as conn:
        insert_rows(conn, ITEMS, [{"name": "a", "amount": 1}, {"name": "b", "amount": 2}])
    before = _rows(engine)
    with engine.begin() as conn:
        got = insert_rows(
            conn,
            ITEMS,
            [{"name": "a", "amount": 100}, {"name": "z", "amount": 26}],
            returning=("name", "amount"),
            conflict=("name",),
        )
    after = _rows(engine)
    assert after["a"] == before["a"] and after["b"] == before["b"]
    assert after["z"][1] == 26
    assert got == [("z", 26)]
    with engine.begin() as conn:  # only collisions, no returning: nothing happens
        assert insert_rows(conn, ITEMS, [{"name": "b", "amount": 9}], conflict=("name",)) == []
    assert _rows(engine) == after


def test_add_to_column_adds_exactly(engine: Engine) -> None:
    """column += amount per key, exactly (big and negative ints); other rows are untouched."""
    start = {"a": 0, "b": 5_000_000_000_000, "c": -7, "d": 42}
    with engine.begin() as conn:
        insert_rows(conn, ITEMS, [{"name": n, "amount": a} for n, a in start.items()])
    ids = {n: v[0] for n, v in _rows(engine).items()}
    amounts = {
        ids["a"]: 9_007_199_254_740_993,  # 2**53 + 1: not a float
        ids["b"]: -5_000_000_000_001,
        ids["c"]: 7,
        10_000_000: 5,  # no such row: nothing happens
    }
    with engine.begin() as conn:
        add_to_column(conn, ITEMS, "id", "amount", amounts)
    after = _rows(engine)
    assert after["a"][1] == 9_007_199_254_740_993
    assert after["b"][1] == -1
    assert after["c"][1] == 0
    assert after["d"][1] == 42
    assert all(type(v[1]) is int for v in after.values())
    with engine.begin() as conn:  # twice in one transaction: adds up
        add_to_column(conn, ITEMS, "id", "amount", {ids["d"]: -50})
        add_to_column(conn, ITEMS, "id", "amount", {ids["d"]: 8})
    assert _rows(engine)["d"][1] == 0


def test_empty_input_is_a_no_op(engine: Engine) -> None:
    """No rows, no amounts: nothing returned, nothing written."""
    with engine.begin() as conn:
        insert_rows(conn, ITEMS, [{"name": "only", "amount": 3}])
    with engine.begin() as conn:
        assert insert_rows(conn, ITEMS, [], returning=("id",)) == []
        assert insert_rows(conn, ITEMS, [], conflict=("name",), conflict_update=("amount",)) == []
        add_to_column(conn, ITEMS, "id", "amount", {})
    with engine.connect() as conn:
        assert conn.scalar(select(func.count()).select_from(ITEMS)) == 1
    assert _rows(engine)["only"][1] == 3


CHILDREN = Table(
    "bulk_children",
    METADATA,
    Column("id", Integer, primary_key=True),
    Column("item_id", Integer, ForeignKey("bulk_items.id"), nullable=False),
    Column("label", String(32), nullable=False),
)


def test_reserved_ids_and_one_batch_write_with_a_foreign_key(engine: Engine) -> None:
    """Reserved ids ascend and are not handed out again; a BatchWrite inserts parents, their
    children (a foreign key into rows of the same write) and adds to an existing row's column."""
    with engine.begin() as conn:
        insert_rows(conn, ITEMS, [{"name": "old", "amount": 5, "note": None}])
    old_row = _rows(engine)["old"][0]
    with engine.begin() as conn:
        ids = reserve_ids(conn, ITEMS, 3)
        assert ids == sorted(ids) and len(set(ids)) == 3
        writes = BatchWrite()
        writes.insert(ITEMS, [{"id": i, "name": f"r{i}", "amount": 1, "note": None} for i in ids])
        writes.insert(CHILDREN, [{"item_id": i, "label": f"child of {i}"} for i in ids])
        writes.insert(ITEMS, [{"name": "old", "amount": 0, "note": "x"}], conflict=("name",))
        writes.add(ITEMS, "id", "amount", {old_row: 37})  # rows that existed before the write
        writes.flush(conn)
        writes.flush(conn)  # nothing queued: a no-op
        assert old_row not in ids
    stored = _rows(engine)
    assert [stored[f"r{i}"][1] for i in ids] == [1, 1, 1]
    assert stored["old"][1:] == (42, None)  # the conflicting insert was skipped; 5 + 37
    with engine.connect() as conn:
        children = conn.execute(select(CHILDREN.c.item_id).order_by(CHILDREN.c.item_id)).all()
    assert [c[0] for c in children] == ids
    with engine.begin() as conn:  # the table's own id generator continues past the reserved ids
        (new_id,) = insert_rows(
            conn, ITEMS, [{"name": "later", "amount": 0, "note": None}], returning=("id",)
        )[0]
    assert new_id > max(ids)
    with engine.begin() as conn:
        assert reserve_ids(conn, ITEMS, 0) == []
