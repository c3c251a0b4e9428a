"""rounds.subsidy_budget_micros: a round's own subsidy budget

``POST /v1/rounds`` may give a round a subsidy budget other than MOTS_ROUND_SUBSIDY_BUDGET; the
round's quote carries it to the market, which caps the round's subsidy at settlement.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-26 17:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply this revision."""
    with op.batch_alter_table("rounds", schema=None) as batch_op:
        batch_op.add_column(sa.Column("subsidy_budget_micros", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    """Revert this revision."""
    with op.batch_alter_table("rounds", schema=None) as batch_op:
        batch_op.drop_column("subsidy_budget_micros")
