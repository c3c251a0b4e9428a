"""orchestration tables: rounds and their transitions

Revision ID: 0001
Revises:
Create Date: 2026-11-26 00:41:14.582331
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply this revision."""
    op.create_table(
        "rounds",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("mechanism", sa.String(length=64), nullable=True),
        sa.Column("scenario_json", sa.Text(), nullable=True),
        sa.Column("type_clients_json", sa.Text(), nullable=True),
        sa.Column("quote_json", sa.Text(), nullable=True),
        sa.Column("decisions_json", sa.Text(), nullable=True),
        sa.Column("terms_json", sa.Text(), nullable=True),
        sa.Column("training_json", sa.Text(), nullable=True),
        sa.Column("evaluation_json", sa.Text(), nullable=True),
        sa.Column("settlement_json", sa.Text(), nullable=True),
        sa.Column("summary_json", sa.Text(), nullable=True),
        sa.Column("rule", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("state_entered_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("collect_deadline", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("rounds", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_rounds_state"), ["state"], unique=False)

    op.create_table(
        "round_transitions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("round_id", sa.Integer(), nullable=False),
        sa.Column("from_state", sa.String(length=16), nullable=False),
        sa.Column("to_state", sa.String(length=16), nullable=False),
        sa.Column("seconds_in_from", sa.Float(), nullable=False),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["round_id"],
            ["rounds.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("round_transitions", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_round_transitions_round_id"), ["round_id"], unique=False
        )


def downgrade() -> None:
    """Revert this revision."""
    with op.batch_alter_table("round_transitions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_round_transitions_round_id"))

    op.drop_table("round_transitions")
    with op.batch_alter_table("rounds", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_rounds_state"))

    op.drop_table("rounds")
