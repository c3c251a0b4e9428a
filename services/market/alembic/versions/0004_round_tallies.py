"""round_tallies and market_rounds.population: "everyone declared" in O(1) per declaration

A round counts its population when it opens (``market_rounds.population``) and its declarations
as they are booked, in ``round_tallies``: one counter row per (round, shard), so batches booked
side by side each add to their own row instead of queueing on one. A round is fully declared
when the shards' sum reaches the population (16 rows read, whatever the population).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-26 16:40:00
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
    with op.batch_alter_table("market_rounds", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("population", sa.Integer(), nullable=False, server_default="0")
        )
    op.create_table(
        "round_tallies",
        sa.Column("round_id", sa.Integer(), nullable=False),
        sa.Column("shard", sa.Integer(), nullable=False),
        sa.Column("declared", sa.BigInteger(), nullable=False, server_default="0"),
        sa.ForeignKeyConstraint(["round_id"], ["market_rounds.id"]),
        sa.PrimaryKeyConstraint("round_id", "shard"),
    )
    # Rounds opened before this revision: their population and tallies as they stand.
    op.execute("UPDATE market_rounds SET population = (SELECT count(*) FROM clients)")
    op.execute(
        "INSERT INTO round_tallies (round_id, shard, declared) "
        "SELECT round_id, 0, count(*) FROM decisions GROUP BY round_id"
    )


def downgrade() -> None:
    """Revert this revision."""
    op.drop_table("round_tallies")
    with op.batch_alter_table("market_rounds", schema=None) as batch_op:
        batch_op.drop_column("population")
