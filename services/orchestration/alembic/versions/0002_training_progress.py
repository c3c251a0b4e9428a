"""rounds.training_progress_json: the latest FedAvg round reported while a round trains

The orchestration worker records each FedAvg round's progress (round r of R, clients done, ε so
far) on the round, so that ``GET /v1/rounds/{id}`` and the demo can show a training under way.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-26 10:45:00
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
    with op.batch_alter_table("rounds", schema=None) as batch_op:
        batch_op.add_column(sa.Column("training_progress_json", sa.Text(), nullable=True))


def downgrade() -> None:
    """Revert this revision."""
    with op.batch_alter_table("rounds", schema=None) as batch_op:
        batch_op.drop_column("training_progress_json")
