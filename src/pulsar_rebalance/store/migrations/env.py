"""Alembic environment for the state store, configured in code (see ``store.engine.alembic_config``).

``migrate()`` passes an open connection (holding the migration advisory lock, inside the one
transaction the whole upgrade runs in) through ``config.attributes["connection"]``. Without one
(a developer running ``command.revision(..., autogenerate=True)``), the URL comes from
``PULSAR_REBALANCE_DATABASE_URL`` / ``DATABASE_URL``. Offline (``--sql``) mode is not supported.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine
from sqlalchemy.pool import NullPool

from pulsar_rebalance.store.engine import VERSION_TABLE, database_url
from pulsar_rebalance.store.tables import OWNERSHIP_HISTORY_VIEW, Base

config = context.config


def _include_object(obj: object, name: str | None, type_: str, reflected: bool, compare_to: object) -> bool:
    # the view is created with raw SQL in the migration; autogenerate must not try to drop it as a table
    return not (type_ == "table" and name in {OWNERSHIP_HISTORY_VIEW, VERSION_TABLE})


def _run(connection: object) -> None:
    context.configure(
        connection=connection,  # type: ignore[arg-type]
        target_metadata=Base.metadata,
        version_table=VERSION_TABLE,
        include_object=_include_object,
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    raise RuntimeError("offline (--sql) migrations are not supported; run pulsar_rebalance.store.engine.migrate")

_connection = config.attributes.get("connection")
if _connection is not None:
    _run(_connection)
else:
    _engine = create_engine(database_url(), poolclass=NullPool)
    with _engine.connect() as _conn:
        _run(_conn)
        _conn.commit()
    _engine.dispose()
