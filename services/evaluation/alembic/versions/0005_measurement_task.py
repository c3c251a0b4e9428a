"""measurements.task: the task whose round was measured (issue 36)

Each task learns its own error model (Eq. 3) from its own published rounds, so a measurement
names its task. Every measurement stored before tasks existed is of Fashion-MNIST.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-29 13:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

INDEX = "ix_measurements_task"


def upgrade() -> None:
    """Apply this revision."""
    op.add_column(
        "measurements",
        sa.Column("task", sa.String(63), nullable=False, server_default="fashion-mnist"),
    )
    op.create_index(INDEX, "measurements", ["task"])


def downgrade() -> None:
    """Revert this revision."""
    op.drop_index(INDEX, table_name="measurements")
    op.drop_column("measurements", "task")  # ALTER TABLE … DROP COLUMN: SQLite keeps the table
