"""URL handling, engines, sessions and migrations against a real Postgres."""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.pool import NullPool

from pulsar_rebalance.errors import StoreError
from pulsar_rebalance.store import (
    check_schema,
    database_url,
    head_revision,
    make_engine,
    migrate,
    redact_url,
    schema_revision,
    session_scope,
)
from pulsar_rebalance.store import repository as repo
from pulsar_rebalance.store.engine import VERSION_TABLE, create_database, drop_database, url_for_database
from pulsar_rebalance.store.tables import Base

EXPECTED_TABLES = {
    "clusters", "brokers", "runs", "broker_load", "bundle_load", "bundle_time_averages", "strategy_state",
    "bundle_ranges", "ownership", "plans", "plan_actions", "approvals", "approval_votes", "audit_log", VERSION_TABLE,
    "placement_policies", "cordoned_brokers", "maintenance_windows", "imbalance_watch",
}  # fmt: skip


# ------------------------------------------------------------------------------------------ URLs


def test_database_url_prefers_project_variable_and_forces_psycopg2() -> None:
    env = {"PULSAR_REBALANCE_DATABASE_URL": "postgres://u:pw@db:5432/pr", "DATABASE_URL": "postgresql://x@y/z"}
    assert database_url(env) == "postgresql+psycopg2://u:pw@db:5432/pr"
    assert database_url({"DATABASE_URL": "postgresql://x@y/z"}) == "postgresql+psycopg2://x@y/z"
    assert database_url({"PULSAR_REBALANCE_DATABASE_URL": "  ", "DATABASE_URL": "postgresql://x@y/z"}) == (
        "postgresql+psycopg2://x@y/z"
    )
    already = "postgresql+psycopg2://postgres:@/postgres?host=/tmp/pg"
    assert database_url({"DATABASE_URL": already}) == already


def test_database_url_missing_says_what_to_set() -> None:
    with pytest.raises(StoreError, match="set PULSAR_REBALANCE_DATABASE_URL"):
        database_url({})


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("sqlite:///x.db", "scheme 'sqlite'"),
        ("postgresql+asyncpg://u@h/db", "scheme 'postgresql\\+asyncpg'"),
        ("just-a-name", "is not a URL"),
        ("postgresql://u@h", "names no database"),
    ],
)
def test_database_url_rejects_non_postgres(value: str, message: str) -> None:
    with pytest.raises(StoreError, match=message) as info:
        database_url({"DATABASE_URL": value})
    assert "DATABASE_URL" in str(info.value)


def test_password_never_appears_in_errors_or_redacted_urls() -> None:
    url = "postgresql://alice:s3cret-pw@db.example:5432/pr"
    assert "s3cret-pw" not in redact_url(url)
    assert "alice:***@db.example" in redact_url(url)
    with pytest.raises(StoreError) as info:
        database_url({"DATABASE_URL": "postgresql://alice:s3cret-pw@db.example:5432"})
    assert "s3cret-pw" not in str(info.value)


def test_unreachable_database_is_a_store_error_without_password() -> None:
    url = "postgresql://alice:s3cret-pw@127.0.0.1:1/pr"  # port 1: connection refused at once
    with pytest.raises(StoreError) as info:
        check_schema(make_engine(url))
    assert "s3cret-pw" not in str(info.value)
    assert "127.0.0.1" in str(info.value)


def test_make_engine_is_cached_per_url(db_url: str) -> None:
    assert make_engine(db_url) is make_engine(db_url)
    assert make_engine(db_url).pool._pre_ping  # type: ignore[attr-defined]


# ------------------------------------------------------------------------------------ migrations


def _fresh_database(pg_server: object) -> str:
    return pg_server.create_database(f"m_{uuid.uuid4().hex[:12]}")  # type: ignore[attr-defined]


def test_migrate_from_empty_then_again_is_a_noop(pg_server: object) -> None:
    url = _fresh_database(pg_server)
    engine = make_engine(url)
    with pytest.raises(StoreError, match=r"database not migrated: run `pulsar-rebalance db upgrade`"):
        check_schema(engine)
    assert schema_revision(engine) is None

    migrate(url)
    assert set(inspect(engine).get_table_names()) == EXPECTED_TABLES
    assert "bundle_ownership_history" in inspect(engine).get_view_names()
    assert schema_revision(engine) == head_revision()
    check_schema(engine)

    with session_scope(engine) as s:
        repo.get_or_create_cluster(s, name="kept", admin_url="http://a")
    migrate(url)  # second run: nothing to do, data untouched
    with engine.connect() as conn:
        assert conn.execute(text(f"SELECT count(*) FROM {VERSION_TABLE}")).scalar() == 1
        assert conn.execute(text("SELECT name FROM clusters")).scalars().all() == ["kept"]


def test_models_match_the_migrated_schema(db_url: str) -> None:
    """tables.py and migrations/0001 describe the same schema (autogenerate finds nothing to do)."""
    engine = create_engine(db_url, poolclass=NullPool)
    with engine.connect() as conn:
        context = MigrationContext.configure(
            conn, opts={"compare_type": True, "include_object": _not_view_or_version_table}
        )
        diff = compare_metadata(context, Base.metadata)
    engine.dispose()
    assert diff == []


def _not_view_or_version_table(obj: object, name: str | None, type_: str, reflected: bool, other: object) -> bool:
    return not (type_ == "table" and name in {"bundle_ownership_history", VERSION_TABLE})


def test_concurrent_migrations_serialise(pg_server: object) -> None:
    """Two processes migrating one empty database at once: both succeed, the schema is built once."""
    url = _fresh_database(pg_server)
    code = "import sys; from pulsar_rebalance.store import migrate; migrate(sys.argv[1])"
    procs = [subprocess.Popen([sys.executable, "-c", code, url], stderr=subprocess.PIPE) for _ in range(2)]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
    engine = make_engine(url)
    check_schema(engine)
    with engine.connect() as conn:
        assert conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars().all() == [head_revision()]


def test_check_schema_rejects_unknown_revision(db_url: str) -> None:
    engine = make_engine(db_url)
    with engine.begin() as conn:
        conn.execute(text(f"UPDATE {VERSION_TABLE} SET version_num = '9999'"))
    with pytest.raises(StoreError, match="revision '9999', which this version of pulsar-rebalance does not know"):
        check_schema(engine)


def test_create_and_drop_database(pg_server: object, db_url: str) -> None:
    name = f"x_{uuid.uuid4().hex[:8]}"
    server_url = url_for_database(db_url, "postgres")
    try:
        url = create_database(server_url, name)
        assert create_database(server_url, name) == url  # exists: no error
        with create_engine(url, poolclass=NullPool).connect() as conn:
            assert conn.execute(text("SELECT current_database()")).scalar() == name
    finally:  # created past the fixture: dropped here even when an assertion fails
        drop_database(server_url, name)
    with create_engine(server_url, poolclass=NullPool).connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM pg_database WHERE datname = :n"), {"n": name}).scalar() == 0
    with pytest.raises(StoreError, match="invalid database name"):
        create_database(server_url, 'x"; DROP DATABASE postgres; --')


# -------------------------------------------------------------------------------------- sessions


def test_session_scope_commits_on_success_and_rolls_back_on_error(db_url: str) -> None:
    engine = make_engine(db_url)
    with session_scope(engine) as s:
        repo.get_or_create_cluster(s, name="committed", admin_url="http://a")
    with pytest.raises(RuntimeError, match="boom"), session_scope(engine) as s:
        repo.get_or_create_cluster(s, name="rolled-back", admin_url="http://b")
        raise RuntimeError("boom")
    with engine.connect() as conn:
        assert conn.execute(text("SELECT name FROM clusters")).scalars().all() == ["committed"]
