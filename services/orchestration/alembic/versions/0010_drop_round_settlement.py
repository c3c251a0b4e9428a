"""drop rounds.settlement: a copy of the summary's settlement, never read (issue 25: one owner)

A finished round stored the market's settlement twice: in ``rounds.settlement`` and inside
``rounds.summary`` (``RoundSummary.settlement``), which the round API, the metrics and the CLI
read. Nothing read the column. The downgrade adds it back filled from each summary's settlement.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-27 12:00:00
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def _json() -> sa.types.TypeEngine[Any]:
    return sa.JSON(none_as_null=True).with_variant(
        postgresql.JSONB(none_as_null=True), "postgresql"
    )


def upgrade() -> None:
    """Apply this revision."""
    with op.batch_alter_table("rounds", schema=None) as batch_op:
        batch_op.drop_column("settlement")


def downgrade() -> None:
    """Revert this revision: the column back, each round's settlement from its summary."""
    with op.batch_alter_table("rounds", schema=None) as batch_op:
        batch_op.add_column(sa.Column("settlement", _json(), nullable=True))
    rounds = sa.table(
        "rounds",
        sa.column("id", sa.Integer()),
        sa.column("summary", _json()),
        sa.column("settlement", _json()),
    )
    conn = op.get_bind()
    rows = conn.execute(
        sa.select(rounds.c.id, rounds.c.summary).where(rounds.c.summary.is_not(None))
    ).all()
    for rid, summary in rows:
        body = json.loads(summary) if isinstance(summary, str) else summary
        settled = body.get("settlement") if isinstance(body, dict) else None
        if settled is not None:
            conn.execute(rounds.update().where(rounds.c.id == rid).values(settlement=settled))
