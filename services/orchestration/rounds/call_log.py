"""The call log on SQL: the calls each round's current step sent, keyed by (round, state, the
call's order within the step), and their replies. Claiming an order is an insert under a unique
key, so two deliveries of one step never both send its call; the first answer wins."""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, select
from sqlalchemy import update as sql_update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from mots.platform.api.base import RoundState
from services.orchestration.models import RoundCall
from services.orchestration.rounds.ports import CallEntry
from services.orchestration.rounds.sql_store import database


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
        except IntegrityError:
            return False
        return True

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
