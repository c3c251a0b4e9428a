"""rounds.deadlines: the deadline of each state a round entered

The round machine records, on every move, the deadline of the state the round enters (the
collection, training and evaluation timeouts; one service call's elsewhere); the worker's
reconciler re-drives every round whose current state has outlived its deadline.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-26 16:30:00
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def _json() -> sa.types.TypeEngine[Any]:
    return sa.JSON(none_as_null=True).with_variant(
        postgresql.JSONB(none_as_null=True), "postgresql"
    )


def upgrade() -> None:
    """Apply this revision."""
    with op.batch_alter_table("rounds", schema=None) as batch_op:
        batch_op.add_column(sa.Column("deadlines", _json(), nullable=True))


def downgrade() -> None:
    """Revert this revision."""
    with op.batch_alter_table("rounds", schema=None) as batch_op:
        batch_op.drop_column("deadlines")
