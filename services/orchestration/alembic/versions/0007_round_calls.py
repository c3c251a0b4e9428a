"""round_calls: the calls each round's current step sent, and their replies

Steps no longer wait for another service's task inside a task: a step sends its call and
returns, the reply (a Celery ``link``/``link_error`` task) is stored here by the call's order
within its step, and the step runs again from the top, reading its answered calls back.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-27 08:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply this revision."""
    op.create_table(
        "round_calls",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("round_id", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("call_id", sa.String(length=64), nullable=False),
        sa.Column("task", sa.String(length=64), nullable=False),
        sa.Column("sent_at", sa.Float(), nullable=False),
        sa.Column("timeout_s", sa.Float(), nullable=False),
        sa.Column("reply", sa.JSON(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["round_id"], ["rounds.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("call_id"),
        sa.UniqueConstraint("round_id", "state", "seq", name="uq_round_calls_step"),
    )
    op.create_index("ix_round_calls_round_id", "round_calls", ["round_id"], unique=False)


def downgrade() -> None:
    """Revert this revision."""
    op.drop_index("ix_round_calls_round_id", table_name="round_calls")
    op.drop_table("round_calls")
