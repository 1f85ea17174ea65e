"""Database URL, engines, sessions and schema migrations for the Postgres state store.

Where the URL comes from (in this order; an empty value counts as unset):

1. ``PULSAR_REBALANCE_DATABASE_URL``
2. ``DATABASE_URL``

``postgres://`` and ``postgresql://`` are rewritten to ``postgresql+psycopg2://`` because psycopg2 is
the driver we ship. Any other scheme is refused: the store relies on Postgres features (``jsonb``,
partial unique indexes, ``SELECT ... FOR UPDATE``, advisory locks, PL/pgSQL triggers).

Passwords never reach a log line or an error message: everything that shows a URL goes
through :func:`redact_url`.

Migrations are the Alembic scripts shipped *inside* the package (``store/migrations``), driven
programmatically (no ``alembic.ini``). Their version table is ``pulsar_rebalance_alembic_version``
rather than Alembic's default ``alembic_version`` so that our schema can share a database with
Airflow's metadata tables (Airflow uses Alembic too) without the two fighting over one row.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, OperationalError
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool

from pulsar_rebalance.errors import StoreError

logger = logging.getLogger(__name__)

URL_ENV_VARS: tuple[str, ...] = ("PULSAR_REBALANCE_DATABASE_URL", "DATABASE_URL")
"""Environment variables consulted by :func:`database_url`, first match wins."""

VERSION_TABLE = "pulsar_rebalance_alembic_version"
"""Alembic's version table for our schema (not ``alembic_version``: see the module docstring)."""

MIGRATION_LOCK_KEY = 7_357_013_370_001
"""``pg_advisory_xact_lock`` key serialising concurrent :func:`migrate` calls on one database."""

_DRIVER = "postgresql+psycopg2"
_ACCEPTED_SCHEMES = {"postgres", "postgresql", _DRIVER}

_DATABASE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,62}")

_engines: dict[str, Engine] = {}
_engines_lock = threading.Lock()


def redact_url(url: str | URL) -> str:
    """Return ``url`` with its password replaced by ``***``, safe for logs and error messages."""
    try:
        parsed = url if isinstance(url, URL) else make_url(url)
    except (ArgumentError, ValueError):
        return "<unparseable database URL>"
    return parsed.render_as_string(hide_password=True)


def normalise_url(url: str, *, source: str = "database URL") -> str:
    """Validate a Postgres URL and force the psycopg2 driver.

    Args:
        url: e.g. ``postgres://u:p@host:5432/db`` or ``postgresql+psycopg2://postgres:@/db?host=/sock``.
        source: what to name in error messages (an environment variable, a CLI option).

    Raises:
        StoreError: the URL cannot be parsed or is not a Postgres URL.
    """
    stripped = url.strip()
    scheme, sep, rest = stripped.partition("://")
    if not sep:
        raise StoreError(f"{source} is not a URL (expected postgresql://user:password@host:port/dbname)")
    if scheme not in _ACCEPTED_SCHEMES:
        raise StoreError(
            f"{source} has scheme {scheme!r}; the state store needs Postgres through psycopg2 "
            f"(postgres://, postgresql:// or {_DRIVER}://)"
        )
    candidate = f"{_DRIVER}://{rest}"
    try:
        parsed = make_url(candidate)
    except (ArgumentError, ValueError):  # ValueError: a port that is not a number
        raise StoreError(
            f"{source} cannot be parsed as a database URL (expected postgresql://user:password@host:port/dbname)"
        ) from None
    if not parsed.database:
        raise StoreError(f"{source} names no database: {redact_url(parsed)}")
    return candidate


def database_url(environ: Mapping[str, str] = os.environ) -> str:
    """The store's SQLAlchemy URL from the environment (see the module docstring for precedence).

    Raises:
        StoreError: neither variable is set, or the value is not a Postgres URL.
    """
    for var in URL_ENV_VARS:
        value = environ.get(var, "").strip()
        if value:
            return normalise_url(value, source=var)
    raise StoreError(
        "no database configured: set PULSAR_REBALANCE_DATABASE_URL (or DATABASE_URL) to a Postgres URL, "
        "e.g. postgresql://user:password@host:5432/pulsar_rebalance"
    )


def url_for_database(url: str, name: str) -> str:
    """``url`` with its database name replaced by ``name`` (host, user, socket query kept)."""
    _check_database_name(name)
    return make_url(normalise_url(url)).set(database=name).render_as_string(hide_password=False)


def make_engine(url: str) -> Engine:
    """The process-wide engine for ``url`` (created once per normalised URL, then cached).

    ``pool_pre_ping`` is on because Airflow workers and Spark drivers hold engines across long idle
    gaps (approval waits) during which Postgres or a proxy may drop connections.
    """
    key = normalise_url(url)
    with _engines_lock:
        engine = _engines.get(key)
        if engine is None:
            engine = create_engine(
                key,
                pool_pre_ping=True,
                connect_args={"connect_timeout": 10, "application_name": "pulsar-rebalance"},
            )
            _engines[key] = engine
            logger.debug("created engine for %s", redact_url(key))
        return engine


def dispose_engines(url: str | None = None) -> None:
    """Close pooled connections of the cached engine for ``url`` (all engines if None) and forget it.

    Call this after ``fork()`` in a child, or before dropping a database.
    """
    with _engines_lock:
        keys = list(_engines) if url is None else [normalise_url(url)]
        for key in keys:
            engine = _engines.pop(key, None)
            if engine is not None:
                engine.dispose()


@contextmanager
def session_scope(engine: Engine) -> Iterator[Session]:
    """One transaction: commit when the block succeeds, roll back when it raises.

    Repository functions never commit; this (or the caller's own ``Session.begin()``) owns the
    transaction. Objects stay readable after commit (``expire_on_commit=False``).

    Raises:
        StoreError: the database could not be reached or the connection failed mid-transaction
            (wrapping SQLAlchemy's ``OperationalError``). Other exceptions propagate unchanged.
    """
    session = Session(engine, expire_on_commit=False)
    try:
        yield session
        session.commit()
    except OperationalError as exc:
        session.rollback()
        raise StoreError(f"database operation failed on {redact_url(engine.url)}: {exc.orig}") from exc
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def migrations_dir() -> Path:
    """The directory holding ``env.py`` and ``versions/`` inside the installed package."""
    path = Path(str(resources.files("pulsar_rebalance.store") / "migrations"))
    if not (path / "env.py").is_file():
        raise StoreError(f"migration scripts are missing from the installed package (looked in {path})")
    return path


def alembic_config(connection: object | None = None) -> Config:
    """An Alembic ``Config`` for our migrations, built in code (no ``alembic.ini``).

    Developers can generate a new revision with::

        from alembic import command
        from pulsar_rebalance.store.engine import alembic_config
        command.revision(alembic_config(), message="...", autogenerate=True)   # needs a DB URL in env

    Args:
        connection: an open SQLAlchemy ``Connection`` for ``env.py`` to use; None makes ``env.py``
            connect with :func:`database_url`.
    """
    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def head_revision() -> str:
    """The newest migration revision shipped with this package."""
    heads = ScriptDirectory.from_config(alembic_config()).get_heads()
    if len(heads) != 1:
        raise StoreError(f"the packaged migrations have {len(heads)} heads {heads}; expected exactly one")
    return heads[0]


def migrate(url: str) -> None:
    """Upgrade the database at ``url`` to the newest schema (``alembic upgrade head``).

    Runs in ONE transaction (Postgres has transactional DDL) that first takes a transaction-scoped
    advisory lock (:data:`MIGRATION_LOCK_KEY`), so two processes migrating at once serialise: the
    second waits, then finds the schema at head and does nothing. A failed migration leaves the
    database as it was. Calling it on an up-to-date database is a no-op.

    Raises:
        StoreError: the database cannot be reached.
    """
    engine = create_engine(normalise_url(url), poolclass=NullPool)
    try:
        with engine.begin() as conn:
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
            command.upgrade(alembic_config(conn), "head")
    except OperationalError as exc:
        raise StoreError(f"cannot migrate {redact_url(url)}: {exc.orig}") from exc
    finally:
        engine.dispose()
    logger.info("schema of %s is at revision %s", redact_url(url), head_revision())


def schema_revision(engine: Engine) -> str | None:
    """The revision the database is at (None when it was never migrated)."""
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE})
            heads = context.get_current_heads()
    except OperationalError as exc:
        raise StoreError(f"cannot connect to {redact_url(engine.url)}: {exc.orig}") from exc
    if len(heads) > 1:
        raise StoreError(f"database {redact_url(engine.url)} is at several revisions {heads}; expected one")
    return heads[0] if heads else None


def check_schema(engine: Engine) -> None:
    """Fail fast, with the fix in the message, when the schema is not at this package's head.

    Raises:
        StoreError: not migrated / behind ("run `pulsar-rebalance db upgrade`"), at a revision this
            package does not know (a newer version migrated it), or the database is unreachable.
    """
    current = schema_revision(engine)
    head = head_revision()
    if current == head:
        return
    script = ScriptDirectory.from_config(alembic_config())
    known = {rev.revision for rev in script.walk_revisions()}
    if current is not None and current not in known:
        raise StoreError(
            f"database schema is at revision {current!r}, which this version of pulsar-rebalance does not "
            f"know (its newest is {head!r}); upgrade pulsar-rebalance"
        )
    raise StoreError(
        f"database not migrated: run `pulsar-rebalance db upgrade` (schema is at {current or 'nothing'}, "
        f"this version needs {head})"
    )


def create_database(server_url: str, name: str) -> str:
    """``CREATE DATABASE name`` on the server of ``server_url`` unless it exists; return its URL.

    Safe against a concurrent creator (a duplicate-database error counts as "exists").
    """
    _check_database_name(name)
    engine = create_engine(normalise_url(server_url), poolclass=NullPool, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            exists = conn.execute(text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name}).scalar()
            if not exists:
                try:
                    conn.execute(text(f'CREATE DATABASE "{name}"'))
                except Exception as exc:
                    if getattr(getattr(exc, "orig", None), "pgcode", None) != "42P04":  # duplicate_database
                        raise
    except OperationalError as exc:
        raise StoreError(f"cannot create database {name!r} on {redact_url(server_url)}: {exc.orig}") from exc
    finally:
        engine.dispose()
    return url_for_database(server_url, name)


def drop_database(server_url: str, name: str) -> None:
    """``DROP DATABASE IF EXISTS name WITH (FORCE)`` (disconnects its sessions first; PG >= 13)."""
    _check_database_name(name)
    dispose_engines(url_for_database(server_url, name))
    engine = create_engine(normalise_url(server_url), poolclass=NullPool, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    except OperationalError as exc:
        raise StoreError(f"cannot drop database {name!r} on {redact_url(server_url)}: {exc.orig}") from exc
    finally:
        engine.dispose()


def _check_database_name(name: str) -> None:
    """Database names are interpolated into DDL, so only plain identifiers are accepted."""
    if not _DATABASE_NAME.fullmatch(name):
        raise StoreError(
            f"invalid database name {name!r}: use 1-63 ASCII letters, digits, '_' or '-', starting with a letter"
        )
