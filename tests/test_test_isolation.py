"""The test suite never touches a user's systems (issue 15).

A small real pytest session runs in a subprocess with the user's variables set (DATABASE_URL, the admin
and Airflow URLs, an Airflow Connection) all pointing at a TCP port that only records connections: it
must never be connected to. With the test-only PULSAR_REBALANCE_TEST_DATABASE_URL set, the databases
the session creates on that server (through the fixtures and past them) are all dropped at its end.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

ROOT = Path(__file__).resolve().parents[1]

INNER_TESTS = (
    "tests/store/test_engine.py::test_migrate_from_empty_then_again_is_a_noop",  # pg_server.create_database
    "tests/store/test_engine.py::test_create_and_drop_database",  # create_database past the fixtures
    "tests/store/test_plans.py::test_create_plan_is_idempotent_per_run",  # the db_url fixture
    "tests/cli/test_plans_cli.py::test_approve_records_who_when_and_comment",  # the CLI in a subprocess
)


def _query(url: str, sql: str) -> list:
    engine = create_engine(url, poolclass=NullPool, connect_args={"connect_timeout": 5})
    try:
        with engine.connect() as conn:
            return list(conn.execute(text(sql)).scalars())
    finally:
        engine.dispose()


def _admin_query(url: str, sql: str) -> None:
    engine = create_engine(url, poolclass=NullPool, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.execute(text(sql))
    finally:
        engine.dispose()


class _UserSystem:
    """A listening TCP port standing in for the user's own Postgres, Pulsar and Airflow. It never
    accepts while the session runs: the kernel queues every connection made to it, counted after."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.port = self.sock.getsockname()[1]

    def connections(self) -> int:
        self.sock.setblocking(False)
        n = 0
        while True:
            try:
                conn, _ = self.sock.accept()
            except BlockingIOError:
                return n
            conn.close()
            n += 1

    def env(self) -> dict[str, str]:
        pg = f"postgresql://alice:pw@127.0.0.1:{self.port}/production"
        http = f"http://127.0.0.1:{self.port}"
        return {
            "DATABASE_URL": pg,
            "PULSAR_REBALANCE_DATABASE_URL": pg,
            "PULSAR_ADMIN_URL": http,
            "PULSAR_REBALANCE_AIRFLOW_URL": http,
            "PULSAR_REBALANCE_AIRFLOW_TOKEN": "t",
            "AIRFLOW_CONN_PULSAR_REBALANCE_DB": json.dumps({"conn_type": "postgres", "extra": {"url": pg}}),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": pg,
            "PGHOST": "127.0.0.1",
            "PGPORT": str(self.port),
        }


def _log_ddl(server_url: str) -> None:
    """Log every CREATE/DROP DATABASE on this server (new sessions see it once the reload is done)."""
    _admin_query(server_url, "ALTER SYSTEM SET log_statement = 'ddl'")
    _admin_query(server_url, "SELECT pg_reload_conf()")
    deadline = time.monotonic() + 30
    while _query(server_url, "SHOW log_statement") != ["ddl"]:
        assert time.monotonic() < deadline, "the server did not take log_statement = 'ddl'"


def _run_session(env: dict[str, str]) -> subprocess.CompletedProcess:
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--timeout=300", *INNER_TESTS],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, f"inner session failed:\n{out.stdout[-4000:]}\n{out.stderr[-2000:]}"
    assert f"{len(INNER_TESTS)} passed" in out.stdout, out.stdout[-2000:]
    return out


@pytest.mark.timeout(700)
def test_a_test_server_gets_back_exactly_the_databases_it_had(own_pg_server):
    import os

    server_url = own_pg_server.url_for("postgres")
    _log_ddl(server_url)
    log_start = (own_pg_server.pgdata / "log").stat().st_size
    before = set(_query(server_url, "SELECT datname FROM pg_database"))
    user = _UserSystem()
    _run_session({**os.environ, **user.env(), "PULSAR_REBALANCE_TEST_DATABASE_URL": server_url})

    assert set(_query(server_url, "SELECT datname FROM pg_database")) == before
    with open(own_pg_server.pgdata / "log", encoding="utf-8", errors="replace") as fh:
        fh.seek(log_start)
        log = fh.read()
    created = set(re.findall(r'CREATE DATABASE "([^"]+)"', log))
    dropped = set(re.findall(r'DROP DATABASE IF EXISTS "([^"]+)"', log))
    assert len(created) >= 4, f"the session did not use the test server:\n{log[-3000:]}"  # it really ran there
    assert created <= dropped
    assert user.connections() == 0  # DATABASE_URL & co. were never connected to


@pytest.mark.timeout(700)
def test_without_the_test_variable_the_suite_uses_its_own_embedded_postgres():
    import os

    user = _UserSystem()
    env = {k: v for k, v in os.environ.items() if k != "PULSAR_REBALANCE_TEST_DATABASE_URL"}
    _run_session({**env, **user.env()})
    assert user.connections() == 0
