"""Tables of the evaluation service: one measurement per evaluated round's model."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import Boolean, DateTime, Float, Integer, String, Text, true
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from mots.platform.api.tasks import DEFAULT_TASK


def _now() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    """Declarative base of the evaluation tables."""


class Measurement(Base):
    """The test loss of one round's model with its coalition K and the types' data sizes;
    ``published`` once the round published the model (only those count in the fit)."""

    __tablename__ = "measurements"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    round_id: Mapped[int] = mapped_column(Integer, unique=True)
    task: Mapped[str] = mapped_column(String(63), server_default=DEFAULT_TASK, index=True)
    """The round's task: each task's error model learns from its own rounds only (issue 36)."""
    participants_json: Mapped[str] = mapped_column(Text)
    sizes_json: Mapped[str] = mapped_column(Text)
    test_loss: Mapped[float] = mapped_column(Float)
    accuracy: Mapped[float | None] = mapped_column(Float, nullable=True)
    artifact_sha256: Mapped[str] = mapped_column(String(64))
    seconds: Mapped[float] = mapped_column(Float)
    published: Mapped[bool] = mapped_column(Boolean, default=False, server_default=true())
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)
