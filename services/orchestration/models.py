"""Tables of the orchestration service: rounds (the persisted state machine) and their transitions."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import BigInteger, DateTime, Float, ForeignKey, Integer, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from mots.economics.scenario import Scenario
from mots.platform.json_column import TypedJSON
from mots.platform.schemas import EvaluationResult, PricingResult, RoundDecisions, SettleResult
from services.orchestration.products import (
    Deadlines,
    RoundSummary,
    RoundTerms,
    TrainingProgress,
    TrainingRecord,
    TypeClients,
)


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
    type_clients: Mapped[TypeClients | None] = _product(TypeClients)
    quote: Mapped[PricingResult | None] = _product(PricingResult)
    decisions: Mapped[RoundDecisions | None] = _product(RoundDecisions)
    terms: Mapped[RoundTerms | None] = _product(RoundTerms)
    training: Mapped[TrainingRecord | None] = _product(TrainingRecord)
    training_progress: Mapped[TrainingProgress | None] = _product(TrainingProgress)
    evaluation: Mapped[EvaluationResult | None] = _product(EvaluationResult)
    settlement: Mapped[SettleResult | None] = _product(SettleResult)
    summary: Mapped[RoundSummary | None] = _product(RoundSummary)
    rule: Mapped[str | None] = mapped_column(Text, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)
    state_entered_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)
    collect_deadline: Mapped[float | None] = mapped_column(Float, nullable=True)
    deadlines: Mapped[Deadlines | None] = _product(Deadlines)
    artifact_expired_at: Mapped[datetime | None] = mapped_column(
        DateTime(timezone=True), nullable=True
    )
    subsidy_budget_micros: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    """The round's own subsidy budget (POST /v1/rounds); None: MOTS_ROUND_SUBSIDY_BUDGET."""


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
