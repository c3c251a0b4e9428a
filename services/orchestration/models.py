"""Tables of the orchestration service: rounds (the persisted state machine), their transitions,
and the calls the current step of each round has sent (with their replies)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from mots.economics.scenario import Scenario
from mots.platform.api.pricing import PricingResult
from mots.platform.api.rounds import RoundSummary, TrainingProgress
from mots.platform.contracts import EvaluationResult, RoundDecisions
from mots.platform.json_column import TypedJSON
from services.orchestration.products import Deadlines, RoundTerms, TrainingRecord


def _now() -> datetime:
    return datetime.now(UTC)


def _product(kind: Any) -> Mapped[Any]:
    """A nullable typed JSON column holding one of the round's products."""
    return mapped_column(TypedJSON(kind), nullable=True)


class Base(DeclarativeBase):
    """Declarative base of the orchestration tables."""


class Round(Base):
    """One market round: ``state`` is the machine's current state, the typed JSON columns the
    products of the states it went through (each validated against its model on write and read)."""

    __tablename__ = "rounds"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    state: Mapped[str] = mapped_column(String(16), index=True)
    mechanism: Mapped[str | None] = mapped_column(String(64), nullable=True)
    scenario: Mapped[Scenario | None] = _product(Scenario)
    quote: Mapped[PricingResult | None] = _product(PricingResult)
    decisions: Mapped[RoundDecisions | None] = _product(RoundDecisions)
    terms: Mapped[RoundTerms | None] = _product(RoundTerms)
    training: Mapped[TrainingRecord | None] = _product(TrainingRecord)
    training_progress: Mapped[TrainingProgress | None] = _product(TrainingProgress)
    evaluation: Mapped[EvaluationResult | None] = _product(EvaluationResult)
    summary: Mapped[RoundSummary | None] = _product(RoundSummary)
    rule: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)
    state_entered_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)
    collect_deadline: Mapped[float | None] = mapped_column(Float, nullable=True)
    deadlines: Mapped[Deadlines | None] = _product(Deadlines)
    artifact_expired_at: Mapped[datetime | None] = mapped_column(
        DateTime(timezone=True), nullable=True
    )
    subsidy_budget_micros: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    """The round's own subsidy budget (POST /v1/rounds); None: MOTS_ROUND_SUBSIDY_BUDGET."""
    collect_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)
    """The round's own collection window (POST /v1/rounds); None: MOTS_COLLECT_TIMEOUT_S."""


class Transition(Base):
    """An audit row per state change, with the seconds spent in the state it left."""

    __tablename__ = "round_transitions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    round_id: Mapped[int] = mapped_column(ForeignKey("rounds.id"), index=True)
    from_state: Mapped[str] = mapped_column(String(16))
    to_state: Mapped[str] = mapped_column(String(16))
    seconds_in_from: Mapped[float] = mapped_column(Float)
    note: Mapped[str | None] = mapped_column(Text, nullable=True)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)


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
