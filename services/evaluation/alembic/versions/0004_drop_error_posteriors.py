"""drop error_posteriors: the posterior snapshots were written and never read

The error model is recomputed from the published measurements whenever it is read
(services.evaluation.worker.posterior), so the snapshot table only grew.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-27 04:50:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply this revision."""
    op.drop_table("error_posteriors")


def downgrade() -> None:
    """Revert this revision (the table comes back empty)."""
    op.create_table(
        "error_posteriors",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("round_id", sa.Integer(), nullable=False),
        sa.Column("points", sa.Integer(), nullable=False),
        sa.Column("mean_json", sa.Text(), nullable=False),
        sa.Column("cov_json", sa.Text(), nullable=False),
        sa.Column("noise_var", sa.Float(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("round_id"),
    )
