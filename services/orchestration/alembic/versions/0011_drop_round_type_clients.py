"""drop rounds.type_clients: a round's members are the market's (issue 25: one owner)

The orchestration kept each round's member client ids per type from its open for its whole life,
a second copy of the market's ``round_members``. The market now snapshots a round's population
when it is priced (``market.population`` for the round) and admits exactly those clients; the
orchestration keeps the counts (the scenario's per-type ``count``), and asks the market for the
members when training needs their SuperNode keys. The downgrade adds the column back empty: the
ids are the market's (an empty list authorised no client read before; every read is the client's
view now).

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-27 17:40:00
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def _json() -> sa.types.TypeEngine[Any]:
    return sa.JSON(none_as_null=True).with_variant(
        postgresql.JSONB(none_as_null=True), "postgresql"
    )


def upgrade() -> None:
    """Apply this revision."""
    with op.batch_alter_table("rounds", schema=None) as batch_op:
        batch_op.drop_column("type_clients")


def downgrade() -> None:
    """Revert this revision: the column back, empty (the members are the market's)."""
    with op.batch_alter_table("rounds", schema=None) as batch_op:
        batch_op.add_column(sa.Column("type_clients", _json(), nullable=True))
