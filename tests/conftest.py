"""Shared test fixtures: one embedded Postgres and one SparkSession per test session.

Airflow reads its configuration at import time, so the environment is set here, before any test
module imports airflow. Airflow's own metadata DB is SQLite in a temp AIRFLOW_HOME (the product's
state store is the real Postgres below); the quick start puts both in one Postgres.
"""

from __future__ import annotations

import os
import sys
import tempfile
import uuid
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Test this checkout's code even when the shared .venv's editable install points at another one
# (git worktrees); subprocesses (spark-submit, the CLI) inherit it through PYTHONPATH.
sys.path.insert(0, str(ROOT / "src"))
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH")) if p)

_AIRFLOW_HOME = tempfile.mkdtemp(prefix="pr-test-airflow-")
os.environ["AIRFLOW_HOME"] = _AIRFLOW_HOME
os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(ROOT / "dags")
os.environ["AIRFLOW__CORE__PLUGINS_FOLDER"] = str(ROOT / "plugins")
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
os.environ["AIRFLOW__CORE__UNIT_TEST_MODE"] = "False"
os.environ.setdefault("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", f"sqlite:///{_AIRFLOW_HOME}/airflow.db")
os.environ["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS"] = "True"
os.environ["AIRFLOW_CONN_SPARK_DEFAULT"] = '{"conn_type": "spark", "host": "local[2]"}'
os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def _server_url() -> str | None:
    return os.environ.get("PULSAR_REBALANCE_TEST_DATABASE_URL") or os.environ.get("DATABASE_URL")


class _ExternalServer:
    """A Postgres given by URL (DATABASE_URL): databases are created on it like on the embedded one."""

    def __init__(self, url: str) -> None:
        from pulsar_rebalance.store.engine import database_url

        self.url = database_url({"DATABASE_URL": url})

    def create_database(self, name: str) -> str:
        from pulsar_rebalance.store.engine import create_database

        return create_database(self.url, name)

    def stop(self) -> None:
        pass


@contextmanager
def _embedded_server():
    from pulsar_rebalance.store.embedded import EmbeddedPostgres

    pgdata = Path(tempfile.mkdtemp(prefix="pr-test-pg-", dir="/tmp"))
    server = EmbeddedPostgres(pgdata)
    server.start()
    try:
        yield server
    finally:
        server.stop()
        import shutil

        shutil.rmtree(pgdata, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_server():
    """One Postgres server for the whole test session (embedded unless DATABASE_URL is set)."""
    url = _server_url()
    if url:
        server = _ExternalServer(url)
        yield server
        return
    with _embedded_server() as server:
        yield server


@pytest.fixture
def own_pg_server():
    """An embedded Postgres server of this test alone, for tests that stop and restart it."""
    with _embedded_server() as server:
        yield server


@pytest.fixture(scope="session")
def new_database(pg_server):
    """``with new_database(prefix) as url:`` a new, migrated database on the shared server (pools closed after)."""
    import contextlib

    from pulsar_rebalance.store.engine import dispose_engines, migrate

    @contextlib.contextmanager
    def make(prefix: str = "t"):
        url = pg_server.create_database(f"{prefix}_{uuid.uuid4().hex[:12]}")
        migrate(url)
        try:
            yield url
        finally:
            dispose_engines(url)

    return make


@pytest.fixture
def db_url(new_database):
    """A fresh, migrated database on the shared server, unique to this test (pools closed after)."""
    with new_database() as url:
        yield url


@pytest.fixture(scope="session")
def spark():
    """The one SparkSession of the test session (local[2], UI off)."""
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("pulsar-rebalance-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def airflow_db():
    """Airflow's metadata DB (SQLite in the temp AIRFLOW_HOME), created once per test session."""
    from airflow.utils import db

    db.initdb()


def pytest_sessionfinish(session, exitstatus):
    import shutil

    shutil.rmtree(_AIRFLOW_HOME, ignore_errors=True)
