"""The round store on SQL (SQLite or PostgreSQL): rounds and their transitions, moved by
compare-and-set, read back as :class:`~.ports.RoundRecord`, and the call log (:class:`SqlCallLog`:
the calls each round's current step sent, keyed by (round, state, the call's order within the
step), and their replies; claiming an order is an insert under a unique key, so two deliveries of
one step never both send its call, and the first answer wins). A lost database connection (say,
PostgreSQL restarted) raises :class:`~.ports.ServiceUnavailable`: the step runs again later."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, ParamSpec, TypeVar, cast

from sqlalchemy import CursorResult, Row, delete, insert, select
from sqlalchemy import update as sql_update
from sqlalchemy.exc import IntegrityError, InterfaceError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from mots.platform.api.base import TERMINAL_STATES, RoundState
from mots.platform.api.rounds import TrainingProgress, TransitionOut
from mots.platform.api.tasks import DEFAULT_TASK
from mots.platform.db import dropped_connection
from services.orchestration.models import (
    RoundCall,
    SentCall,
    round_transitions,
    rounds,
)
from services.orchestration.rounds.ports import (
    CallEntry,
    RoundInFlight,
    RoundRecord,
    RoundUpdate,
    ServiceUnavailable,
)

P = ParamSpec("P")
R = TypeVar("R")

_UNFINISHED = rounds.c.state.notin_(list(TERMINAL_STATES))
_SHOWN_TRANSITION = [
    round_transitions.c.from_state,
    round_transitions.c.to_state.label("to"),
    round_transitions.c.seconds_in_from,
    round_transitions.c.note,
    round_transitions.c.at,
]
"""A transition's columns under the names of the :class:`TransitionOut` it is read as."""


DROP_TRIES = 6
"""Tries of one store operation whose connection dropped (``pg_terminate_backend``, a restart):
each is its own transaction, so it runs again on a fresh connection (waits 0.05 s doubling, 1.55 s
in all) before the step is left to run again later (:class:`ServiceUnavailable`)."""
_RETRYING: ContextVar[bool] = ContextVar("mots_rounds_store_retrying", default=False)
"""Set while an operation runs again after a dropped connection: a write whose COMMIT the drop
may have hit then recognises its own committed work (:meth:`SqlRoundStore.move`,
:meth:`SqlRoundStore.create`)."""


def database(method: Callable[P, R]) -> Callable[P, R]:
    """Run the operation again after a dropped connection (:data:`DROP_TRIES` in all); turn a
    database still unreachable, or any other operational error, into :class:`ServiceUnavailable`."""

    @functools.wraps(method)
    def wrapped(*args: P.args, **kwargs: P.kwargs) -> R:
        for attempt in range(DROP_TRIES):
            token = _RETRYING.set(attempt > 0)
            try:
                return method(*args, **kwargs)
            except (OperationalError, InterfaceError) as exc:
                if attempt == DROP_TRIES - 1 or not dropped_connection(exc):
                    raise ServiceUnavailable(f"the rounds database: {exc.orig or exc}") from exc
                time.sleep(0.05 * 2**attempt)
            finally:
                _RETRYING.reset(token)
        raise AssertionError("unreachable")

    return wrapped


def record(row: Row[Any]) -> RoundRecord:
    """A round row as the machine reads it: its columns are the record's fields (the column
    types give the state as :class:`RoundState`, the instants in UTC, the products as models)."""
    return RoundRecord(**row._mapping)


def _just_opened(state: RoundState, created_at: datetime) -> bool:
    """The round (in ``state``, made at ``created_at``) is still ``open`` with no transition,
    made in the last minute: on a try after a dropped connection, the round our first try created
    (a duplicate delivery of the opening is harmless: its first step runs once, the others find it
    moved)."""
    age = (datetime.now(UTC) - created_at).total_seconds()
    return state == RoundState.OPEN and age < 60


class SqlRoundStore:
    """Rounds in the orchestration database (the ``rounds`` and ``round_transitions`` tables of
    :mod:`services.orchestration.models`)."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self.sessions = sessions

    @database
    def create(
        self,
        subsidy_budget_micros: int | None = None,
        collect_seconds: float | None = None,
        task: str = DEFAULT_TASK,
        task_version: int | None = None,
    ) -> int:
        """Insert a new round of ``task`` in ``open``, pinned to ``task_version`` (with its own
        subsidy budget and collection window, if given); refuse while another round of that task is in flight (rounds of other
        tasks run beside it)."""
        with self.sessions() as session, session.begin():
            query = select(rounds.c.id, rounds.c.state, rounds.c.created_at).where(
                _UNFINISHED, rounds.c.task == task
            )
            busy = session.execute(query.with_for_update()).first()
            if busy is not None and _RETRYING.get() and _just_opened(busy.state, busy.created_at):
                return int(busy.id)  # our first try committed before its connection dropped
            if busy is not None:
                raise RoundInFlight(
                    f"task: round {busy.id} is still {busy.state.value} (task {task!r}); one "
                    "round per task at a time"
                )
            opened = insert(rounds).values(
                task=task,
                task_version=task_version,
                state=RoundState.OPEN,
                subsidy_budget_micros=subsidy_budget_micros,
                collect_seconds=collect_seconds,
            )
            return int(session.execute(opened.returning(rounds.c.id)).scalar_one())

    @database
    def load(self, round_id: int) -> RoundRecord | None:
        """The round, or None."""
        with self.sessions() as session:
            row = session.execute(select(rounds).where(rounds.c.id == round_id)).first()
            return None if row is None else record(row)

    @database
    def latest(self, limit: int, before: int | None = None) -> list[RoundRecord]:
        """The newest ``limit`` rounds (older than round ``before`` if given), newest first."""
        query = select(rounds).order_by(rounds.c.id.desc()).limit(limit)
        if before is not None:
            query = query.where(rounds.c.id < before)
        with self.sessions() as session:
            return [record(r) for r in session.execute(query)]

    def transitions(self, round_id: int) -> list[TransitionOut]:
        """A round's transitions in the order they happened, as the round API shows them."""
        query = select(*_SHOWN_TRANSITION).where(round_transitions.c.round_id == round_id)
        with self.sessions() as session:
            rows = session.execute(query.order_by(round_transitions.c.id))
            return [TransitionOut.model_validate(dict(r._mapping)) for r in rows]

    @database
    def move(
        self, round_id: int, src: RoundState, dst: RoundState, note: str, update: RoundUpdate
    ) -> float | None:
        """Compare-and-set the round from ``src`` to ``dst``; seconds spent in ``src``, or None."""
        now = datetime.now(UTC)
        with self.sessions() as session, session.begin():
            query = select(rounds.c.state_entered_at).where(rounds.c.id == round_id)
            entered: datetime | None = session.scalar(query)
            if entered is None:
                return None
            seconds = (now - entered).total_seconds()
            result = session.execute(
                sql_update(rounds)
                .where(rounds.c.id == round_id, rounds.c.state == src)
                .values(state=dst, state_entered_at=now, **update.values())
            )
            if not cast(CursorResult[Any], result).rowcount:
                return self._moved_before(session, round_id, src, dst)
            session.execute(
                insert(round_transitions).values(
                    round_id=round_id,
                    from_state=src,
                    to_state=dst,
                    seconds_in_from=seconds,
                    note=note or None,
                )
            )
        return seconds

    @staticmethod
    def _moved_before(
        session: Session, round_id: int, src: RoundState, dst: RoundState
    ) -> float | None:
        """On a try after a dropped connection: the seconds of our own ``src`` → ``dst`` move if
        the first try committed it (the round's latest transition), so the step that moved it
        goes on; else None (another delivery moved the round)."""
        if not _RETRYING.get():
            return None
        t = round_transitions.c
        last = session.execute(
            select(t.from_state, t.to_state, t.seconds_in_from)
            .where(t.round_id == round_id)
            .order_by(t.id.desc())
        ).first()
        if last is None or (last.from_state, last.to_state) != (src, dst):
            return None
        return float(last.seconds_in_from)

    @database
    def record_progress(self, round_id: int, progress: TrainingProgress) -> None:
        """Note the latest FedAvg round, if the round is still training."""
        with self.sessions() as session, session.begin():
            session.execute(
                sql_update(rounds)
                .where(rounds.c.id == round_id, rounds.c.state == RoundState.TRAINING)
                .values(training_progress=progress)
            )

    @database
    def phase_seconds(self, round_id: int) -> dict[str, float]:
        """Seconds spent in each state the round has left."""
        phases: dict[str, float] = {}
        for t in self.transitions(round_id):
            phases[t.from_state.value] = phases.get(t.from_state.value, 0.0) + t.seconds_in_from
        return phases

    @database
    def unfinished(self) -> list[tuple[int, RoundState]]:
        """Every round not in a terminal state."""
        with self.sessions() as session:
            rows = session.execute(select(rounds.c.id, rounds.c.state).where(_UNFINISHED))
            return [(round_id, state) for round_id, state in rows]

    @database
    def mark_expired(self, round_id: int) -> None:
        """Note that retention removed the round's model artifact."""
        with self.sessions() as session, session.begin():
            session.execute(
                sql_update(rounds)
                .where(rounds.c.id == round_id)
                .values(artifact_expired_at=datetime.now(UTC))
            )


# The call log


def _entry(row: RoundCall) -> CallEntry:
    return CallEntry(row.call_id, row.task, row.sent_at, row.timeout_s, row.reply, row.error)


class SqlCallLog:
    """Rounds' sent calls in the orchestration database (see :class:`~.ports.CallLog`)."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self.sessions = sessions

    @database
    def entry(self, round_id: int, state: RoundState, seq: int) -> CallEntry | None:
        """The step's call of that order, if it was sent."""
        with self.sessions() as session:
            row = session.scalars(
                select(RoundCall).where(
                    RoundCall.round_id == round_id,
                    RoundCall.state == state.value,
                    RoundCall.seq == seq,
                )
            ).first()
            return None if row is None else _entry(row)

    @database
    def claim(self, round_id: int, state: RoundState, seq: int, entry: CallEntry) -> bool:
        """Insert the call; False if another delivery of the step claimed that order first."""
        try:
            with self.sessions() as session, session.begin():
                session.add(
                    RoundCall(
                        round_id=round_id,
                        state=state.value,
                        seq=seq,
                        call_id=entry.call_id,
                        task=entry.task,
                        sent_at=entry.sent_at,
                        timeout_s=entry.timeout_s,
                    )
                )
                session.add(
                    SentCall(
                        round_id=round_id, state=state.value, task=entry.task, sent_at=entry.sent_at
                    )
                )
        except IntegrityError:
            return False
        return True

    @database
    def sent(self, round_id: int) -> list[str]:
        """The tasks the round's steps sent, in the order they were sent (its call history)."""
        with self.sessions() as session:
            return list(
                session.scalars(
                    select(SentCall.task).where(SentCall.round_id == round_id).order_by(SentCall.id)
                )
            )

    @database
    def answer(
        self, call_id: str, reply: dict[str, Any] | None = None, error: str | None = None
    ) -> tuple[int, RoundState] | None:
        """Store the first answer to the call; the step to run again (also for a repeated
        answer, whose first delivery may have died before running it), or None if forgotten."""
        with self.sessions() as session, session.begin():
            row = session.scalars(select(RoundCall).where(RoundCall.call_id == call_id)).first()
            if row is None:
                return None
            session.execute(
                sql_update(RoundCall)
                .where(
                    RoundCall.call_id == call_id,
                    RoundCall.reply.is_(None),
                    RoundCall.error.is_(None),
                )
                .values(reply=reply, error=None if reply is not None else (error or "no reply"))
            )
            return row.round_id, RoundState(row.state)

    @database
    def first_sent(self, round_id: int, state: RoundState) -> float | None:
        """When the step's first call was sent."""
        with self.sessions() as session:
            return session.scalar(
                select(RoundCall.sent_at).where(
                    RoundCall.round_id == round_id,
                    RoundCall.state == state.value,
                    RoundCall.seq == 0,
                )
            )

    @database
    def clear(self, round_id: int, state: RoundState) -> None:
        """Forget the step's calls."""
        with self.sessions() as session, session.begin():
            session.execute(
                delete(RoundCall).where(
                    RoundCall.round_id == round_id, RoundCall.state == state.value
                )
            )

    @database
    def overdue(self, now: float) -> list[tuple[int, RoundState, str]]:
        """Unanswered calls past their timeout."""
        with self.sessions() as session:
            rows = session.execute(
                select(RoundCall.round_id, RoundCall.state, RoundCall.call_id).where(
                    RoundCall.reply.is_(None),
                    RoundCall.error.is_(None),
                    RoundCall.sent_at + RoundCall.timeout_s < now,
                )
            )
            return [(r, RoundState(s), c) for r, s, c in rows]

    @database
    def pending(self, call_id: str) -> bool:
        """The call is in the log and unanswered."""
        with self.sessions() as session:
            row = session.scalars(select(RoundCall).where(RoundCall.call_id == call_id)).first()
            return row is not None and row.reply is None and row.error is None
