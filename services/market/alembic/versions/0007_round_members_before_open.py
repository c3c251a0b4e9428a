"""round_members: a round's population is snapshotted when it is priced, before it opens

``market.population`` for a round writes the round's members (the active clients then) before
``market.open_round`` creates the round, so a member row no longer references market_rounds
(the client reference stays). The table is rebuilt without that foreign key (SQLite cannot drop
one in place), its rows kept.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-27 17:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def _rebuild(with_round_fk: bool) -> None:
    """round_members rebuilt with or without its reference to market_rounds, rows kept."""
    keys = [sa.ForeignKeyConstraint(["client_id"], ["clients.id"])]
    if with_round_fk:
        keys.append(sa.ForeignKeyConstraint(["round_id"], ["market_rounds.id"]))
    op.create_table(
        "round_members_new",
        sa.Column("round_id", sa.Integer(), nullable=False),
        sa.Column("client_id", sa.Integer(), nullable=False),
        *keys,
        sa.PrimaryKeyConstraint("round_id", "client_id"),
    )
    rows = "SELECT round_id, client_id FROM round_members"
    if with_round_fk:  # snapshots of rounds not opened at the market have no round to reference
        rows += " WHERE round_id IN (SELECT id FROM market_rounds)"
    op.execute(f"INSERT INTO round_members_new (round_id, client_id) {rows}")
    op.drop_table("round_members")
    op.rename_table("round_members_new", "round_members")
    if op.get_bind().dialect.name == "postgresql":  # the primary key's name follows the table
        op.execute(
            "ALTER TABLE round_members RENAME CONSTRAINT round_members_new_pkey "
            "TO round_members_pkey"
        )


def upgrade() -> None:
    """Apply this revision."""
    _rebuild(with_round_fk=False)


def downgrade() -> None:
    """Revert this revision."""
    _rebuild(with_round_fk=True)
