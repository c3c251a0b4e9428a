"""The evaluation's Alembic revisions (``alembic/versions``) and the upgrade its processes run at start."""

from __future__ import annotations

from pathlib import Path

from mots.platform.migrations import ServiceMigrations
from services.evaluation.models import Base

MIGRATIONS = ServiceMigrations(
    "evaluation", Path(__file__).parent / "alembic" / "versions", Base.metadata
)


def upgrade(database_url: str, revision: str = "head") -> None:
    """Bring the evaluation's database to ``revision``."""
    MIGRATIONS.upgrade(database_url, revision)
