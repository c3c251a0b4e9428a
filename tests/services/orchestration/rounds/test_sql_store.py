"""The SQL round store on both databases: compare-and-set moves, one round at a time, typed
products validated on the way in."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import fields

import pytest
from sqlalchemy.exc import StatementError

from mots.platform.api.base import RoundState
from mots.platform.api.rounds import TrainingProgress
from mots.platform.db import make_engine, make_sessionmaker
from services.orchestration.migrations import upgrade
from services.orchestration.models import rounds
from services.orchestration.products import RoundTerms
from services.orchestration.rounds.ports import RoundInFlight, RoundRecord, RoundUpdate
from services.orchestration.rounds.sql_store import SqlRoundStore

S = RoundState


@pytest.fixture
def store(database_url: str) -> Iterator[SqlRoundStore]:
    upgrade(database_url)
    engine = make_engine(database_url, pool_size=2)
    try:
        yield SqlRoundStore(make_sessionmaker(engine))
    finally:
        engine.dispose()


def test_a_move_is_a_compare_and_set_on_the_state(store: SqlRoundStore) -> None:
    """The first move from ``open`` wins and is recorded; a second finds the round elsewhere."""
    round_id = store.create()
    terms = RoundTerms.no_model(["a", "b"], [0, 0], [1, 0])
    seconds = store.move(round_id, S.OPEN, S.COLLECTING, "first", RoundUpdate(mechanism="swan"))
    assert seconds is not None and seconds >= 0
    assert store.move(round_id, S.OPEN, S.FAILED, "second", RoundUpdate(terms=terms)) is None
    rnd = store.load(round_id)
    assert rnd is not None and rnd.state == S.COLLECTING and rnd.mechanism == "swan"
    assert rnd.terms is None and rnd.created_at.tzinfo is not None
    assert [(t.from_state, t.to, t.note) for t in store.transitions(round_id)] == [
        ("open", "collecting", "first")
    ]
    assert list(store.phase_seconds(round_id)) == ["open"]
    assert store.unfinished() == [(round_id, S.COLLECTING)]


def test_the_rounds_table_has_a_column_per_record_field() -> None:
    """A row is read straight into the record: a column added without its field (or a field
    without its column) is caught here, not at the first load."""
    assert sorted(c.name for c in rounds.columns) == sorted(f.name for f in fields(RoundRecord))


def test_a_move_sets_the_products_it_names_and_leaves_the_others(store: SqlRoundStore) -> None:
    """A product the move leaves None keeps its value (the record's update sets what it names)."""
    round_id = store.create()
    store.move(round_id, S.OPEN, S.COLLECTING, "", RoundUpdate(mechanism="swan", rule="r"))
    store.move(round_id, S.COLLECTING, S.FAILED, "", RoundUpdate(rule="timeout"))
    rnd = store.load(round_id)
    assert rnd is not None and (rnd.mechanism, rnd.rule) == ("swan", "timeout")


def test_one_round_per_task_at_a_time(store: SqlRoundStore) -> None:
    """A round of another task opens beside one in flight; a second of the same task is refused
    (naming ``task``), and each round reads back its own task."""
    fashion = store.create()
    digits = store.create(task="digits")
    with pytest.raises(RoundInFlight, match=f"task: round {digits} is still open"):
        store.create(task="digits")
    with pytest.raises(RoundInFlight, match=f"task: round {fashion} is still open"):
        store.create()
    assert store.create(task="breast-cancer") == digits + 1
    loaded = [store.load(i) for i in (fashion, digits, digits + 1)]
    assert [r.task for r in loaded if r is not None] == ["fashion-mnist", "digits", "breast-cancer"]
    store.move(digits, S.OPEN, S.FAILED, "", RoundUpdate())
    store.move(digits, S.FAILED, S.SETTLED_BY_RULE, "", RoundUpdate())
    assert store.create(task="digits") == digits + 2


def test_a_round_keeps_the_task_version_it_was_opened_on(store: SqlRoundStore) -> None:
    """Issue 36: the version pinned at the open reads back on every load; None when not given."""
    pinned = store.create(task="digits", task_version=3)
    unpinned = store.create()
    loaded = [store.load(pinned), store.load(unpinned)]
    assert [r.task_version for r in loaded if r is not None] == [3, None]


def test_one_round_at_a_time(store: SqlRoundStore) -> None:
    first = store.create()
    with pytest.raises(RoundInFlight, match=f"round {first} is still open"):
        store.create()
    store.move(first, S.OPEN, S.FAILED, "", RoundUpdate())
    store.move(first, S.FAILED, S.SETTLED_BY_RULE, "", RoundUpdate())
    assert store.create() == first + 1
    assert store.load(first + 2) is None
    assert [r.id for r in store.latest(10)] == [first + 1, first]
    assert [r.id for r in store.latest(10, before=first + 1)] == [first]


def test_products_are_validated_on_write_and_read_back_as_models(store: SqlRoundStore) -> None:
    round_id = store.create()
    bad = RoundUpdate(terms={"type_names": ["a"]})  # type: ignore[typeddict-item]
    with pytest.raises(StatementError, match="participants"):
        store.move(round_id, S.OPEN, S.COLLECTING, "", bad)
    terms = RoundTerms.no_model(["a"], [0], [2])
    store.move(round_id, S.OPEN, S.COLLECTING, "", RoundUpdate(terms=terms))
    rnd = store.load(round_id)
    assert rnd is not None and rnd.terms == terms


def test_progress_is_recorded_only_while_training(store: SqlRoundStore) -> None:
    round_id = store.create()
    progress = TrainingProgress(
        fedavg_round=1,
        fedavg_rounds=2,
        clients_done=1,
        clients=2,
        epsilon=None,
        round_seconds=1.5,
        in_progress=True,
    )
    store.record_progress(round_id, progress)
    rnd = store.load(round_id)
    assert rnd is not None and rnd.training_progress is None
    store.move(round_id, S.OPEN, S.COLLECTING, "", RoundUpdate())
    store.move(round_id, S.COLLECTING, S.TRAINING, "", RoundUpdate())
    store.record_progress(round_id, progress)
    rnd = store.load(round_id)
    assert rnd is not None and rnd.training_progress == progress


def test_retention_marks_a_round_expired_and_latest_reads_it(store: SqlRoundStore) -> None:
    """``mark_expired`` stamps the row; the record reads the stamp back in UTC."""
    round_id = store.create()
    rnd = store.load(round_id)
    assert rnd is not None and rnd.artifact_expired_at is None
    store.mark_expired(round_id)
    (latest,) = store.latest(1)
    assert latest.id == round_id and latest.artifact_expired_at is not None
    assert latest.artifact_expired_at.tzinfo is not None
