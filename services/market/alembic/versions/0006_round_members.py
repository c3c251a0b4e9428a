"""round_members: who may declare and buy in a round (its population when it opened)

A client registered or approved after a round opened was not priced in it: it may not declare or
buy there, nor count toward "everyone declared". Rounds collecting at this revision take the
clients active now.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-26 20:45:00
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
    op.create_table(
        "round_members",
        sa.Column("round_id", sa.Integer(), nullable=False),
        sa.Column("client_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["round_id"], ["market_rounds.id"]),
        sa.ForeignKeyConstraint(["client_id"], ["clients.id"]),
        sa.PrimaryKeyConstraint("round_id", "client_id"),
    )
    op.execute(
        "INSERT INTO round_members (round_id, client_id) SELECT r.id, c.id "
        "FROM market_rounds r, clients c WHERE r.state = 'collecting' AND c.status = 'active'"
    )


def downgrade() -> None:
    """Revert this revision."""
    op.drop_table("round_members")
