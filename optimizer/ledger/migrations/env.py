"""Alembic environment of the run ledger: always run on the caller's connection and
transaction (:func:`ptplan.ledger.db.migrate`), never from an ini file."""

from __future__ import annotations

from alembic import context

conn = context.config.attributes["connection"]
context.configure(connection=conn, target_metadata=None, transactional_ddl=True,
                  render_as_batch=conn.dialect.name == "sqlite")
with context.begin_transaction():
    context.run_migrations()
