"""clients: one SuperNode key per client of a task, not per client overall (issue 36)

A device that takes part in two tasks is one client in each (each registered with its task's
enrolment code) and trains both on its one SuperNode, whose key each of its clients registers
(proving possession). The digest's uniqueness becomes (task, node_key_sha256); within a task a
key still belongs to one client. Downgrade restores the global uniqueness (it fails while two
tasks' clients share a key).

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-29 16:50:00
"""

from __future__ import annotations

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply this revision."""
    with op.batch_alter_table("clients", schema=None) as batch_op:
        batch_op.drop_constraint("uq_clients_node_key_sha256", type_="unique")
        batch_op.create_unique_constraint(
            "uq_clients_task_node_key_sha256", ["task", "node_key_sha256"]
        )


def downgrade() -> None:
    """Revert this revision."""
    with op.batch_alter_table("clients", schema=None) as batch_op:
        batch_op.drop_constraint("uq_clients_task_node_key_sha256", type_="unique")
        batch_op.create_unique_constraint("uq_clients_node_key_sha256", ["node_key_sha256"])
