"""drop the round_id indexes of purchases and decisions: their (round_id, client_id) keys serve

Each purchase inserts a row into both tables; the unique (round_id, client_id) index already
answers every lookup by round_id (its leading column), so the single-column indexes only cost
the purchase path two more index insertions.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-26 08:10:00
"""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

TABLES = ("purchases", "decisions")


def upgrade() -> None:
    """Apply this revision."""
    for table in TABLES:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_index(batch_op.f(f"ix_{table}_round_id"))


def downgrade() -> None:
    """Revert this revision."""
    for table in TABLES:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.create_index(batch_op.f(f"ix_{table}_round_id"), ["round_id"], unique=False)
