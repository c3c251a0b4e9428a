"""The evaluation's Alembic scripts and the upgrade its API and worker run at start."""

from __future__ import annotations

from pathlib import Path

from mots.platform.migrations import upgrade as upgrade_scripts

SCRIPTS = Path(__file__).with_name("alembic")


def upgrade(database_url: str, revision: str = "head") -> None:
    """Bring the evaluation's database to ``revision``."""
    upgrade_scripts(database_url, SCRIPTS, revision)
