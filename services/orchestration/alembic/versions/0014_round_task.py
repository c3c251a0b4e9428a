"""rounds.task: the task a round trains (issue 36)

A round names the task it prices, trains, evaluates and publishes (``POST /v1/rounds`` with
``"task": "digits"``); one round of each task may be in flight at a time. Every round stored
before tasks existed trained Fashion-MNIST, so existing rows become task ``fashion-mnist`` (the
market's migration 0011 does the same for its rows).

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-29 13:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

INDEX = "ix_rounds_task_state"


def upgrade() -> None:
    """Apply this revision (a plain ADD COLUMN: SQLite keeps the table and its 0013 triggers)."""
    op.add_column(
        "rounds",
        sa.Column("task", sa.String(63), nullable=False, server_default="fashion-mnist"),
    )
    op.create_index(INDEX, "rounds", ["task", "state"])


def downgrade() -> None:
    """Revert this revision."""
    op.drop_index(INDEX, table_name="rounds")
    op.drop_column("rounds", "task")  # ALTER TABLE … DROP COLUMN: SQLite keeps the table
