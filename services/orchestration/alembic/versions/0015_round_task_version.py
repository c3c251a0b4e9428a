"""rounds.task_version: the task's version a round is pinned to at its open (issue 36)

``POST /v1/rounds`` records the task's version (its task file's ``version:``, else the market's
current stored version); pricing, training, evaluation and publication all read exactly that
version, so a version stored mid-round applies to the next round only. Rounds stored before the
pin keep NULL: read as the task's latest version, as they were.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-29 20:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply this revision (a plain ADD COLUMN: SQLite keeps the table and its 0013 triggers)."""
    op.add_column("rounds", sa.Column("task_version", sa.Integer(), nullable=True))


def downgrade() -> None:
    """Revert this revision."""
    op.drop_column("rounds", "task_version")  # ALTER TABLE … DROP COLUMN: SQLite keeps the table
