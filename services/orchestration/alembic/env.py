"""Alembic environment of the orchestration service: runs on the connection :func:`migrations.upgrade` passes."""

from __future__ import annotations

from alembic import context

from services.orchestration.models import Base

target_metadata = Base.metadata
connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError(
        "run the orchestration migrations through services.orchestration.migrations.upgrade"
    )
context.configure(
    connection=connection,
    target_metadata=target_metadata,
    render_as_batch=True,
    version_table="alembic_version_orchestration",
)
with context.begin_transaction():
    context.run_migrations()
