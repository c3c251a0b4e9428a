"""evaluation tables: measurements

Revision ID: 0001
Revises:
Create Date: 2026-11-26 00:41:56.027803
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply this revision."""
    op.create_table(
        "measurements",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("round_id", sa.Integer(), nullable=False),
        sa.Column("participants_json", sa.Text(), nullable=False),
        sa.Column("sizes_json", sa.Text(), nullable=False),
        sa.Column("test_loss", sa.Float(), nullable=False),
        sa.Column("accuracy", sa.Float(), nullable=True),
        sa.Column("artifact_sha256", sa.String(length=64), nullable=False),
        sa.Column("seconds", sa.Float(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("round_id"),
    )


def downgrade() -> None:
    """Revert this revision."""
    op.drop_table("measurements")
