"""The orchestration's migrations build exactly the schema its models describe, on both databases,
and keep the rounds written before them readable."""

from __future__ import annotations

import json
import math
from decimal import Decimal
from pathlib import Path
from typing import Any

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect, text

from mots.platform.db import make_engine, make_sessionmaker
from services.orchestration.api.routes.rounds import _out
from services.orchestration.migrations import MIGRATIONS, upgrade
from services.orchestration.models import Base
from services.orchestration.rounds.sql_store import SqlRoundStore

ROUNDS_AT_0002 = Path(__file__).with_name("data") / "rounds_at_0002.json"
"""Two rounds as the 0002-era machine wrote them (a published round and one settled by rule),
copied from the SQLite database of a run of test_rounds.py."""
PRODUCTS = (
    "scenario",
    "quote",
    "decisions",
    "terms",
    "training",
    "training_progress",
    "evaluation",
    "summary",
)
"""The round's products at head; ``settlement`` was one too until 0010 (the summary holds it),
``type_clients`` until 0011 (the market owns a round's members)."""
PRODUCTS_AT_0002 = (*PRODUCTS, "settlement")


def _old_rounds() -> list[dict[str, Any]]:
    """The two recorded rounds, and a third like the first whose training ε is NaN (written by
    ``json.dumps`` as the bare token NaN, which JSONB refuses)."""
    rows: list[dict[str, Any]] = json.loads(ROUNDS_AT_0002.read_text())
    nan_row = dict(rows[0], id=3)
    training = json.loads(nan_row["training_json"])
    nan_row["training_json"] = json.dumps({**training, "epsilon": math.nan})
    return [*rows, nan_row]


def test_migrations_match_the_models_and_keep_rounds(database_url: str) -> None:
    """From 0001 to head: no table, column or index differs from the models (the version table
    aside); a round written at 0001 is still there, its products empty, its task version
    unpinned."""
    upgrade(database_url, "0001")
    engine = make_engine(database_url, pool_size=1)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(
                "INSERT INTO rounds (id, state, created_at, state_entered_at)"
                " VALUES (1, 'published', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
            )
        upgrade(database_url)
        with engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
            columns = {c["name"] for c in inspect(conn).get_columns("rounds")}
        rnd = SqlRoundStore(make_sessionmaker(engine)).load(1)
    finally:
        engine.dispose()
    assert [
        d for d in diff if not (d[0] == "remove_table" and d[1].name.startswith("alembic"))
    ] == []
    assert set(PRODUCTS) <= columns and not any(c.endswith("_json") for c in columns)
    assert rnd is not None and rnd.state == "published"
    assert all(getattr(rnd, name) is None for name in PRODUCTS)
    assert rnd.task_version is None  # opened before the pin (0015): read as the latest version


def _insert_at_0002(database_url: str, rows: list[dict[str, Any]]) -> None:
    upgrade(database_url, "0002")
    engine = make_engine(database_url, pool_size=1)
    names = list(rows[0])
    insert = text(
        f"INSERT INTO rounds ({', '.join(names)}) VALUES ({', '.join(f':{n}' for n in names)})"
    )
    try:
        with engine.begin() as conn:
            conn.execute(insert, rows)
    finally:
        engine.dispose()


def test_0003_keeps_rounds_written_before_it_readable(database_url: str) -> None:
    """Rounds written at 0002 read back after 0003 as validated products, and the round API shows
    the same JSON the 0002 API showed; the downgrade gives the text columns back."""
    rows = _old_rounds()
    _insert_at_0002(database_url, rows)
    upgrade(database_url)
    engine = make_engine(database_url, pool_size=1)
    try:
        store = SqlRoundStore(make_sessionmaker(engine))
        for row in rows[:2]:
            rnd = store.load(row["id"])
            assert rnd is not None and rnd.state == row["state"]
            shown = _out(rnd).model_dump(mode="json")
            for name in ("summary", "training_progress", "quote", "scenario"):
                old = row[f"{name}_json"]
                got = shown[name]
                if name == "summary" and got is not None:
                    got = _without_added_summary_fields(got)
                assert _same(got, json.loads(old) if old else None), name
            for name in PRODUCTS:  # every product survives, whatever the API shows of it
                old = row[f"{name}_json"]
                new = getattr(rnd, name)
                dumped = new if isinstance(new, dict) else new and new.model_dump(mode="json")
                if name == "summary" and dumped is not None:
                    dumped = _without_added_summary_fields(dumped)
                assert _same(dumped, json.loads(old) if old else None), name
        published = store.load(1)
        assert published is not None and published.summary is not None
        assert list(published.summary.phase_seconds) == [
            "open",
            "collecting",
            "training",
            "evaluating",
            "settling",
        ]
        nan_round = store.load(3)
        assert nan_round is not None and nan_round.training is not None
        assert math.isnan(nan_round.training.epsilon)
    finally:
        engine.dispose()
    engine = make_engine(database_url, pool_size=1)
    try:
        with engine.begin() as conn:
            cfg = MIGRATIONS.config()
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, "0002")
        with engine.connect() as conn:
            back = conn.execute(text("SELECT * FROM rounds ORDER BY id")).mappings().all()
    finally:
        engine.dispose()
    for row, after in zip(rows[:2], back[:2], strict=True):
        for name in PRODUCTS_AT_0002:  # the settlement rebuilt from the summary by 0010's downgrade
            old, new = row[f"{name}_json"], after[f"{name}_json"]
            assert _same(json.loads(new) if new else None, json.loads(old) if old else None)
        assert after["type_clients_json"] is None  # 0011 dropped them: the market's, not ours


SUMMARY_FIELDS_ADDED_SINCE_0002: dict[str, Any] = {
    "failed_verification": [],
    "verification": {},
    "waiting_seconds": 0.0,
}
"""Summary fields added after 0002, and the defaults a row written before them reads back with."""

SETTLEMENT_FIELDS_ADDED_SINCE_0002: dict[str, Any] = {
    "bonds_returned": "0.000000",
    "bonds_slashed": "0.000000",
}
"""The settlement's fields added after 0002 (issue 37's participation bond), read back at their
defaults: a round settled before bonds existed returned and slashed none."""


def _without_added_summary_fields(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary without the fields added since 0002, each checked to read at its default."""
    summary = dict(summary)
    for key, default in SUMMARY_FIELDS_ADDED_SINCE_0002.items():
        assert summary.pop(key) == default, key
    if summary.get("settlement") is not None:
        settlement = dict(summary["settlement"])
        for key, default in SETTLEMENT_FIELDS_ADDED_SINCE_0002.items():
            assert settlement.pop(key) == default, key
        summary["settlement"] = settlement
    return summary


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON data, ignoring the models' defaults (keys with a null or empty value that
    the old rows did not write); an amount written as a number then reads as a six-place string
    (the one money shape) of the same value."""
    if isinstance(a, dict) and isinstance(b, dict):
        keys = set(a) | set(b)
        return all(
            _same(a.get(k), b.get(k))
            if k in a and k in b
            else (a.get(k, b.get(k)) in (None, [], {}))
            for k in keys
        )
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    numbers = (int, float, str)
    if (
        isinstance(a, numbers)
        and isinstance(b, numbers)
        and isinstance(a, str) != isinstance(b, str)
    ):
        try:
            return Decimal(str(a)) == Decimal(str(b))
        except ArithmeticError:
            return False
    return bool(a == b)
