"""revoked_tokens: the revocation list kept with the market's durable data

Every token the market replaces (rotation, revocation, a revoked client) is written here in the
same transaction, and the unexpired rows are published to Redis at each start of the market, so
a dead token stays dead on every service after a restart with a new Redis key prefix (issue 37).

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-29 05:40:00
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
    op.create_table(
        "revoked_tokens",
        sa.Column("verifier", sa.String(length=64), nullable=False),
        sa.Column("reason", sa.String(length=16), nullable=False),
        sa.Column("until", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("verifier"),
    )
    op.create_index("ix_revoked_tokens_until", "revoked_tokens", ["until"])


def downgrade() -> None:
    """Revert this revision."""
    op.drop_index("ix_revoked_tokens_until", table_name="revoked_tokens")
    op.drop_table("revoked_tokens")
