"""rounds.collect_seconds: a round's own collection window

``POST /v1/rounds`` may give a round a collection window other than MOTS_COLLECT_TIMEOUT_S
(``mots rounds open --collect-seconds N``); the round's collecting deadline is then N seconds
after it opens.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-27 08:20:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply this revision."""
    with op.batch_alter_table("rounds", schema=None) as batch_op:
        batch_op.add_column(sa.Column("collect_seconds", sa.Float(), nullable=True))


def downgrade() -> None:
    """Revert this revision."""
    with op.batch_alter_table("rounds", schema=None) as batch_op:
        batch_op.drop_column("collect_seconds")
