"""clients.node_public_key and node_key_sha256: the SuperNode key a client trains on

A participant registers its device's SuperNode public key through its own token
(``PUT /v1/me/node-key``); the orchestration registers exactly these keys with the SuperLink
before a round trains. One key belongs to one client (unique digest). Existing clients have none.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-26 14:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply this revision."""
    with op.batch_alter_table("clients", schema=None) as batch_op:
        batch_op.add_column(sa.Column("node_public_key", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("node_key_sha256", sa.String(length=64), nullable=True))
        batch_op.create_unique_constraint("uq_clients_node_key_sha256", ["node_key_sha256"])


def downgrade() -> None:
    """Revert this revision."""
    with op.batch_alter_table("clients", schema=None) as batch_op:
        batch_op.drop_constraint("uq_clients_node_key_sha256", type_="unique")
        batch_op.drop_column("node_key_sha256")
        batch_op.drop_column("node_public_key")
