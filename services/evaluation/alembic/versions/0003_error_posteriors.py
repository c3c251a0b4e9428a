"""error_posteriors: the error model's posterior after each published measurement

The Bayesian update of Eq. 3's parameters (mots.economics.error_online) replaces the refit that
waited for four distinct coalitions; each published round's measurement leaves a snapshot of the
Gaussian posterior that priced the rounds after it.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-26 16:55:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply this revision."""
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


def downgrade() -> None:
    """Revert this revision."""
    op.drop_table("error_posteriors")
