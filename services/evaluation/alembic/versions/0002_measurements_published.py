"""measurements.published: only rounds whose model was published count in the error model's fit

A round is measured before it settles; a round that then fails (settlement, the quality gate
upstream) must not shape the error model that prices later rounds. Measurements taken before
this revision were of published rounds (the machine only measured rounds on their way to
publication), so they stay counted.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-26 14:45:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply this revision."""
    with op.batch_alter_table("measurements", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("published", sa.Boolean(), nullable=False, server_default=sa.true())
        )


def downgrade() -> None:
    """Revert this revision."""
    with op.batch_alter_table("measurements", schema=None) as batch_op:
        batch_op.drop_column("published")
