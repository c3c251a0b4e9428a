"""Issue 37, deliverable 7, on the orchestration's side: a round whose database connections are
terminated in every stage (opening, collection and close, training, evaluation, settlement) still
publishes, each store operation run again on a fresh connection; a called service that answers
that its own database was out of reach is asked again, not taken as a refusal that fails the
round. The machine runs on the real SQL store and call log (PostgreSQL for the kills), the other
services are the scripted fakes (``test_replies``'s wire)."""

from __future__ import annotations

import pytest

from mots.platform.contracts import MARKET_CLOSE_ROUND, MARKET_SETTLE_ROUND
from services.orchestration.rounds.ports import CURRENT_STEP, RoundInFlight, RoundUpdate
from services.orchestration.rounds.sql_store import _RETRYING, SqlRoundStore
from tests.services.dropped import killing
from tests.services.orchestration.rounds.test_replies import PUBLISHED_PATH, S, Wire

AWAY = (
    "OperationalError: (psycopg.errors.AdminShutdown) terminating connection due to "
    "administrator command"
)


def test_a_round_publishes_while_its_connections_are_terminated_in_every_stage(
    wire: Wire, database_url: str
) -> None:
    """Every 4th statement of the orchestration's database meets a terminated connection, from
    the round's creation to its publication: the round takes the published path, once."""
    if not database_url.startswith("postgresql"):
        pytest.skip("an embedded SQLite database has no connection to terminate")
    engine = wire.store.sessions.kw["bind"]
    stages: set[str] = set()

    def every_fourth(n: int, _statement: str) -> bool:
        if n % 4:
            return False
        step = CURRENT_STEP.get()
        stages.add("opening" if step is None else step.state.value)
        return True

    with killing(engine, every_fourth) as met:
        round_id = wire.store.create()
        wire.queue.append((round_id, S.OPEN, 0.0))
        wire.deliver()
    assert wire.path(round_id) == PUBLISHED_PATH
    assert {"opening", "open", "collecting", "training", "evaluating", "settling"} <= stages
    assert len(met) >= 10
    assert wire.services.calls.count("close") == 1
    assert len(wire.services.settled) == 1


@pytest.mark.parametrize("task", [MARKET_CLOSE_ROUND.name, MARKET_SETTLE_ROUND.name])
def test_a_service_whose_database_was_away_is_asked_again(wire: Wire, task: str) -> None:
    """The market answers its close (or its settlement) once with its database out of reach:
    the step runs again and the round publishes (it used to fail, settled by rule)."""
    round_id = wire.store.create()
    wire.queue.append((round_id, S.OPEN, 0.0))
    answered_away: list[str] = []
    while wire.sent or wire.queue:
        if wire.sent and wire.sent[0].spec.name == task and not answered_away:
            call = wire.sent.pop(0)
            answered_away.append(call.call_id)
            wire.machine.answered(call.call_id, None, AWAY)
            continue
        wire.one()
    assert answered_away
    assert wire.path(round_id) == PUBLISHED_PATH
    rnd = wire.store.load(round_id)
    assert rnd is not None and rnd.rule is None


def test_a_retried_write_whose_commit_landed_reads_as_its_own(store: SqlRoundStore) -> None:
    """A drop that hits the COMMIT leaves the write done but unanswered; run again (as the store
    runs an operation after a dropped connection), the creation returns the round it made and
    the move its seconds, so the step that made them goes on. A first try (or a move another
    delivery made) still answers "in flight" / None."""
    round_id = store.create()
    with pytest.raises(RoundInFlight):
        store.create()
    again = _RETRYING.set(True)
    try:
        assert SqlRoundStore.create.__wrapped__(store) == round_id  # type: ignore[attr-defined]
        moved = store.move(round_id, S.OPEN, S.COLLECTING, "", RoundUpdate())
        assert moved is not None
        retried = SqlRoundStore.move.__wrapped__(  # type: ignore[attr-defined]
            store, round_id, S.OPEN, S.COLLECTING, "", RoundUpdate()
        )
        assert retried == moved
        assert (
            SqlRoundStore.move.__wrapped__(  # type: ignore[attr-defined]
                store, round_id, S.OPEN, S.FAILED, "", RoundUpdate()
            )
            is None
        )
        with pytest.raises(RoundInFlight):  # collecting: no longer the round just opened
            SqlRoundStore.create.__wrapped__(store)  # type: ignore[attr-defined]
    finally:
        _RETRYING.reset(again)
    assert store.move(round_id, S.OPEN, S.COLLECTING, "", RoundUpdate()) is None
    assert [t.to for t in store.transitions(round_id)] == ["collecting"]
