"""rounds.id within int32: the round ids every service and API takes (``MAX_ID`` = 2^31 − 1)

The orchestration numbers rounds; the market stores them in ``int4`` columns on PostgreSQL and
refuses any past 2^31 − 1 (its revision 0010), and every API answers such an id 422. Here the
database stops the sequence there too: PostgreSQL's ``int4`` serial does already, SQLite's
INTEGER would go on to 2^63, so there a trigger aborts the insert or update (AFTER: the id an
insert draws is known only then) (issue 37).

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-29 09:30:00
"""

from __future__ import annotations

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

MAX_ID = 2**31 - 1
NAME = "ck_rounds_id_int32"
CONDITION = f"id BETWEEN 1 AND {MAX_ID}"


def upgrade() -> None:
    """Apply this revision."""
    if op.get_bind().dialect.name != "sqlite":
        op.execute(f"ALTER TABLE rounds ADD CONSTRAINT {NAME} CHECK ({CONDITION})")
        return
    for event in ("INSERT", "UPDATE"):
        op.execute(
            f"CREATE TRIGGER {NAME}_{event.lower()} AFTER {event} ON rounds "
            f"WHEN NOT (typeof(NEW.id) = 'integer' AND NEW.id BETWEEN 1 AND {MAX_ID}) "
            f"BEGIN SELECT RAISE(ABORT, '{NAME}: rounds.id must meet {CONDITION}'); END"
        )


def downgrade() -> None:
    """Revert this revision."""
    if op.get_bind().dialect.name != "sqlite":
        op.execute(f"ALTER TABLE rounds DROP CONSTRAINT {NAME}")
        return
    for event in ("insert", "update"):
        op.execute(f"DROP TRIGGER {NAME}_{event}")
