"""tasks: the market per task (issue 36)

A ``tasks`` table keeps each version of each task the operator created (the task file's text and
its validated form). Enrolment codes, clients, rounds (their quotes and published models),
declarations, purchases and the rounds' pool accounts name their task; everything stored before
is task ``fashion-mnist``, the one model the market sold until now (the column's server default
writes it into every existing row). Wallets and the platform's accounts belong to no task: money
stays one ledger. Downgrade drops the table and the columns (rows of other tasks then read as
the one task there was).

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-29 09:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

DEFAULT_TASK = "fashion-mnist"
TASK_TABLES = ("clients", "enrolments", "market_rounds", "decisions", "purchases")
"""Tables whose every row names a task (all ``fashion-mnist`` after the upgrade)."""


def upgrade() -> None:
    """Apply this revision."""
    op.create_table(
        "tasks",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), server_default="active", nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("spec_json", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name", "version"),
    )
    op.create_index("ix_tasks_name", "tasks", ["name"])
    for table in TASK_TABLES:
        with op.batch_alter_table(table) as batch:
            batch.add_column(
                sa.Column("task", sa.String(length=64), server_default=DEFAULT_TASK, nullable=False)
            )
    with op.batch_alter_table("accounts") as batch:
        batch.add_column(sa.Column("task", sa.String(length=64), nullable=True))
    op.execute(f"UPDATE accounts SET task = '{DEFAULT_TASK}' WHERE category = 'round_pools'")


def downgrade() -> None:
    """Revert this revision."""
    for table in ("accounts", *TASK_TABLES):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("task")
    op.drop_index("ix_tasks_name", table_name="tasks")
    op.drop_table("tasks")
