"""`pulsar-rebalance windows show|set|clear` against a real Postgres: the setting, its audit, bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from pulsar_rebalance.store import repository as repo
from pulsar_rebalance.store.engine import make_engine, session_scope

NIGHTLY = {"timezone": "Europe/Berlin", "windows": [{"cron": "0 2 * * *", "duration_minutes": 120}]}


@pytest.fixture
def cluster_db(db_url):
    with session_scope(make_engine(db_url)) as s:
        repo.get_or_create_cluster(s, name="c1", admin_url="http://pulsar:8080")
    return db_url


def cli(db_url: str, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PULSAR_REBALANCE_DATABASE_URL=db_url)
    return subprocess.run(
        [sys.executable, "-m", "pulsar_rebalance.cli", *args], capture_output=True, text=True, env=env, timeout=120
    )


def test_set_show_clear(cluster_db, tmp_path):
    assert "no maintenance window" in cli(cluster_db, "windows", "show").stdout
    out = cli(cluster_db, "windows", "set", json.dumps(NIGHTLY), "--by", "alice")
    assert out.returncode == 0, out.stderr
    assert "Europe/Berlin: 0 2 * * * for 120 min" in out.stdout
    shown = json.loads(cli(cluster_db, "windows", "show", "--json").stdout)
    assert [(r["cluster"], r["setting"], r["updatedBy"]) for r in shown] == [("c1", NIGHTLY, "alice")]
    assert shown[0]["open"] is (shown[0]["closesAt"] is not None) and (shown[0]["opensAt"] is None) is shown[0]["open"]
    text = cli(cluster_db, "windows", "show", "--cluster", "c1").stdout
    assert text.startswith("c1  Europe/Berlin: 0 2 * * * for 120 min") and "set by alice" in text
    path = tmp_path / "w.json"
    path.write_text(json.dumps({"windows": [{"cron": "0 22 * * 5", "duration_minutes": 600}]}))
    assert cli(cluster_db, "windows", "set", f"@{path}", "--cluster", "c1").returncode == 0
    assert json.loads(cli(cluster_db, "windows", "show", "--json").stdout)[0]["setting"]["timezone"] == "UTC"
    out = cli(cluster_db, "windows", "clear", "--by", "bob")
    assert out.returncode == 0 and "cleared" in out.stdout
    assert "no maintenance window was set" in cli(cluster_db, "windows", "clear").stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["set", "{not json"], "the setting is not valid JSON"),
        (["set", "[]"], "must be a JSON object"),
        (["set", json.dumps({**NIGHTLY, "timezone": "Nowhere/Land"})], "unknown timezone 'Nowhere/Land'"),
        (["set", json.dumps({"windows": [{"cron": "0 2 * *", "duration_minutes": 5}]})], "must have five fields"),
        (["set", "@/no/such/file.json"], "cannot read /no/such/file.json"),
        (["set", json.dumps(NIGHTLY), "--cluster", "nope"], "unknown cluster 'nope'"),
    ],
)
def test_bad_input_is_one_clear_line_and_changes_nothing(cluster_db, args, message):
    out = cli(cluster_db, "windows", *args)
    assert out.returncode == 2, out.stderr
    assert message in out.stderr and "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert json.loads(cli(cluster_db, "windows", "show", "--json").stdout) == []
