"""enrolments and clients.status: operator-attested types

The operator issues enrolment codes for a type (D_i, C_i); a device redeems one at registration
and gets the code's type. Self-registered clients (only with MOTS_OPEN_REGISTRATION) are
``pending`` until approved. Existing clients were registered before attestation: they stay
``active``.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-26 16:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply this revision."""
    op.create_table(
        "enrolments",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("code_hash", sa.String(length=64), nullable=False),
        sa.Column("type_name", sa.String(length=64), nullable=False),
        sa.Column("data_size", sa.Integer(), nullable=False),
        sa.Column("cost_micros", sa.BigInteger(), nullable=False),
        sa.Column("uses_left", sa.Integer(), nullable=False),
        sa.Column("expires_at", sa.BigInteger(), nullable=False),
        sa.Column("revoked", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("code_hash"),
    )
    with op.batch_alter_table("clients", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("status", sa.String(length=16), server_default="active", nullable=False)
        )
        batch_op.add_column(sa.Column("enrolment_id", sa.Integer(), nullable=True))
        batch_op.create_foreign_key(
            "fk_clients_enrolment_id", "enrolments", ["enrolment_id"], ["id"]
        )


def downgrade() -> None:
    """Revert this revision."""
    with op.batch_alter_table("clients", schema=None) as batch_op:
        batch_op.drop_constraint("fk_clients_enrolment_id", type_="foreignkey")
        batch_op.drop_column("enrolment_id")
        batch_op.drop_column("status")
    op.drop_table("enrolments")
