"""round_sent_calls: every call a round's steps sent, kept after the step decides (issue 38)

``round_calls`` holds only the current step's calls and forgets them once the step decides; the
round's calls per round (at most 7, plus the collection's progress polls) are counted from this
history. A new table: no existing row changes; rounds before it have no history.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-29 05:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create the call history."""
    op.create_table(
        "round_sent_calls",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("round_id", sa.Integer(), sa.ForeignKey("rounds.id"), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("task", sa.String(64), nullable=False),
        sa.Column("sent_at", sa.Float(), nullable=False),
    )
    op.create_index("ix_round_sent_calls_round_id", "round_sent_calls", ["round_id"])


def downgrade() -> None:
    """Drop the call history (the rounds keep their state)."""
    op.drop_index("ix_round_sent_calls_round_id", "round_sent_calls")
    op.drop_table("round_sent_calls")
