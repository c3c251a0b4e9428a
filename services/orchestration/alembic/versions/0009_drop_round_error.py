"""drop rounds.error: written, never read (issue 25: write-only data goes)

The machine wrote a failed round's reason twice, as ``rule`` and as ``error``; nothing read
``error`` (the round API, the summary and the logs take ``rule``). The downgrade adds the column
back empty: nothing read it.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-27 11:55:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply this revision."""
    with op.batch_alter_table("rounds", schema=None) as batch_op:
        batch_op.drop_column("error")


def downgrade() -> None:
    """Revert this revision."""
    with op.batch_alter_table("rounds", schema=None) as batch_op:
        batch_op.add_column(sa.Column("error", sa.Text(), nullable=True))
