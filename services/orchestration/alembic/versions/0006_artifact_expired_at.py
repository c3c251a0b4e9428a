"""rounds.artifact_expired_at: when retention removed the round's model artifact

``MOTS_ARTIFACT_RETENTION_ROUNDS`` keeps the last rounds' artifacts and those still within
``MOTS_DOWNLOAD_WINDOW_S`` of their round's end; the orchestration deletes the others' files and
marks the row here (the market then answers their download with 410 Gone).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-26 17:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply this revision."""
    with op.batch_alter_table("rounds", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("artifact_expired_at", sa.DateTime(timezone=True), nullable=True)
        )


def downgrade() -> None:
    """Revert this revision."""
    with op.batch_alter_table("rounds", schema=None) as batch_op:
        batch_op.drop_column("artifact_expired_at")
