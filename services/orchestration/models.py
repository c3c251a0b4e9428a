"""Tables of the orchestration service: rounds (the persisted state machine), their transitions,
and the calls the current step of each round has sent (with their replies). The rounds and their
transitions are plain tables, read straight into the one shape each has in Python (the machine's
``RoundRecord``, the API's ``TransitionOut``), not restated as ORM classes (issue 38)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    Text,
    TypeDecorator,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from mots.economics.scenario import Scenario
from mots.platform.api.base import RoundState
from mots.platform.api.pricing import PricingResult
from mots.platform.api.rounds import RoundSummary, TrainingProgress
from mots.platform.api.tasks import DEFAULT_TASK
from mots.platform.contracts import EvaluationResult, RoundDecisions
from mots.platform.json_column import TypedJSON
from services.orchestration.products import Deadlines, RoundTerms, TrainingRecord


def _now() -> datetime:
    return datetime.now(UTC)


def as_utc(at: datetime) -> datetime:
    """SQLite gives naive datetimes back; they were written in UTC."""
    return at if at.tzinfo else at.replace(tzinfo=UTC)


class UtcDateTime(TypeDecorator[datetime]):
    """A ``timestamp with time zone`` read back timezone-aware on every database (SQLite's naive
    ones were written in UTC): what the round record and the API's Timestamp expect."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """The stored instant, in UTC."""
        return None if value is None else as_utc(value)


class StateColumn(TypeDecorator[RoundState]):
    """A round state stored as its value (``varchar(16)``), read back as :class:`RoundState`."""

    impl = String(16)
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Dialect) -> str | None:
        """The state's value (a :class:`RoundState` or its string; an unknown one is refused)."""
        return None if value is None else RoundState(value).value

    def process_result_value(self, value: str | None, dialect: Dialect) -> RoundState | None:
        """The stored state as the enum."""
        return None if value is None else RoundState(value)


def _product(name: str, kind: Any) -> Column[Any]:
    """A nullable typed JSON column holding one of the round's products."""
    return Column(name, TypedJSON(kind), nullable=True)


class Base(DeclarativeBase):
    """Declarative base of the orchestration tables."""


rounds = Table(
    "rounds",
    Base.metadata,
    Column("id", Integer, primary_key=True),
    Column("state", StateColumn(), index=True, nullable=False),
    Column("mechanism", String(64), nullable=True),
    _product("scenario", Scenario),
    _product("quote", PricingResult),
    _product("decisions", RoundDecisions),
    _product("terms", RoundTerms),
    _product("training", TrainingRecord),
    _product("training_progress", TrainingProgress),
    _product("evaluation", EvaluationResult),
    _product("summary", RoundSummary),
    Column("rule", Text, nullable=True),
    Column("created_at", UtcDateTime(), default=_now, nullable=False),
    Column("state_entered_at", UtcDateTime(), default=_now, nullable=False),
    Column("collect_deadline", Float, nullable=True),
    _product("deadlines", Deadlines),
    Column("artifact_expired_at", UtcDateTime(), nullable=True),
    Column("subsidy_budget_micros", BigInteger, nullable=True),
    Column("collect_seconds", Float, nullable=True),
    Column("task", String(63), nullable=False, server_default=DEFAULT_TASK),
    Column("task_version", Integer, nullable=True),
    Index("ix_rounds_task_state", "task", "state"),
)
"""One market round per row, read as it is into
:class:`~services.orchestration.rounds.ports.RoundRecord` (one column per field: the record is
the row's only Python shape): ``state`` is the machine's current state, the typed JSON columns
the products of the states it went through (each validated against its model on write and read),
``subsidy_budget_micros`` and ``collect_seconds`` the round's own budget and collection window
(POST /v1/rounds; None: the task's), ``task`` the task it trains (issue 36: one round per task
in flight), ``task_version`` the task's version pinned at its open (NULL: opened before the pin,
read as the latest)."""

round_transitions = Table(
    "round_transitions",
    Base.metadata,
    Column("id", Integer, primary_key=True),
    Column("round_id", Integer, ForeignKey("rounds.id"), index=True, nullable=False),
    Column("from_state", StateColumn(), nullable=False),
    Column("to_state", StateColumn(), nullable=False),
    Column("seconds_in_from", Float, nullable=False),
    Column("note", Text, nullable=True),
    Column("at", UtcDateTime(), default=_now, nullable=False),
)
"""An audit row per state change, with the seconds spent in the state it left; read as the round
API's :class:`~mots.platform.api.rounds.TransitionOut` (its only Python shape)."""


class SentCallColumns:
    """What a sent call is, in both tables that hold one: its round, the state whose step sent
    it, its task and when (:class:`RoundCall` adds the reply, :class:`SentCall` keeps it)."""

    round_id: Mapped[int] = mapped_column(ForeignKey("rounds.id"), index=True)
    state: Mapped[str] = mapped_column(String(16))
    task: Mapped[str] = mapped_column(String(64))
    sent_at: Mapped[float] = mapped_column(Float)


class RoundCall(SentCallColumns, Base):
    """A call the current step of a round sent to another service (or to the training worker),
    keyed by its order within the step, with its reply once it came back: a step replayed from
    the top reads its answered calls here instead of sending them again."""

    __tablename__ = "round_calls"
    __table_args__ = (UniqueConstraint("round_id", "state", "seq", name="uq_round_calls_step"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    seq: Mapped[int] = mapped_column(Integer)
    call_id: Mapped[str] = mapped_column(String(64), unique=True)
    timeout_s: Mapped[float] = mapped_column(Float)
    reply: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True), nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)


class SentCall(SentCallColumns, Base):
    """The round's call history: every call its steps sent, kept after the step decides (the
    :class:`RoundCall` rows are forgotten then), so a round's calls can be counted."""

    __tablename__ = "round_sent_calls"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
