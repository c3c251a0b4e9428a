"""Tables of the orchestration service: rounds (the persisted state machine) and their transitions."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import DateTime, Float, ForeignKey, Integer, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


def _now() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    """Declarative base of the orchestration tables."""


class Round(Base):
    """One market round; ``state`` is the machine's current state, the JSON columns its products."""

    __tablename__ = "rounds"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    state: Mapped[str] = mapped_column(String(16), index=True)
    mechanism: Mapped[str | None] = mapped_column(String(64), nullable=True)
    scenario_json: Mapped[str | None] = mapped_column(Text, nullable=True)
    type_clients_json: Mapped[str | None] = mapped_column(Text, nullable=True)
    quote_json: Mapped[str | None] = mapped_column(Text, nullable=True)
    decisions_json: Mapped[str | None] = mapped_column(Text, nullable=True)
    terms_json: Mapped[str | None] = mapped_column(Text, nullable=True)
    training_json: Mapped[str | None] = mapped_column(Text, nullable=True)
    training_progress_json: Mapped[str | None] = mapped_column(Text, nullable=True)
    evaluation_json: Mapped[str | None] = mapped_column(Text, nullable=True)
    settlement_json: Mapped[str | None] = mapped_column(Text, nullable=True)
    summary_json: Mapped[str | None] = mapped_column(Text, nullable=True)
    rule: Mapped[str | None] = mapped_column(Text, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)
    state_entered_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)
    collect_deadline: Mapped[float | None] = mapped_column(Float, nullable=True)


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
