"""Alembic environment of the market: runs on the connection :func:`migrations.upgrade` passes."""

from __future__ import annotations

from alembic import context

from services.market.models import Base

target_metadata = Base.metadata
connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run the market's migrations through services.market.migrations.upgrade")
context.configure(
    connection=connection,
    target_metadata=target_metadata,
    render_as_batch=True,
    version_table="alembic_version_market",
)
with context.begin_transaction():
    context.run_migrations()
