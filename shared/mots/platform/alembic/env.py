"""Alembic environment of every service, run on what :meth:`ServiceMigrations.upgrade` passes.

:class:`mots.platform.migrations.ServiceMigrations` points Alembic here (``script_location``) and at
the service's own revisions (``version_locations``), and passes the open connection, the service's
models' metadata and its version table (``alembic_version_<service>``) as attributes.
"""

from __future__ import annotations

from alembic import context

attributes = context.config.attributes
connection = attributes.get("connection")
if connection is None:
    raise RuntimeError(
        "run a service's migrations through its migrations.upgrade "
        "(mots.platform.migrations.ServiceMigrations), which passes the connection"
    )
context.configure(
    connection=connection,
    target_metadata=attributes["target_metadata"],
    render_as_batch=True,
    version_table=attributes["version_table"],
)
with context.begin_transaction():
    context.run_migrations()
