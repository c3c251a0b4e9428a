"""The orchestration's Alembic revisions (``alembic/versions``) and the upgrade its processes run at start."""

from __future__ import annotations

from pathlib import Path

from mots.platform.migrations import ServiceMigrations
from services.orchestration.models import Base

MIGRATIONS = ServiceMigrations(
    "orchestration", Path(__file__).parent / "alembic" / "versions", Base.metadata
)
upgrade = MIGRATIONS.upgrade
"""Bring the orchestration's database to a revision (``head`` unless given)."""
