"""`pulsar-rebalance plans ... --cluster` with two clusters recorded, against a real Postgres."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from pulsar_rebalance.store import repository as repo
from pulsar_rebalance.store.engine import make_engine, session_scope
from tests.cli.test_plans_cli import cli


@pytest.fixture
def two_clusters(db_url):
    """A pending plan in cluster ``east`` and one in ``west`` (each of its own DAG's run)."""
    plans = {}
    with session_scope(make_engine(db_url)) as s:
        for name in ("east", "west"):
            cid = repo.get_or_create_cluster(s, name=name, admin_url=f"http://{name}:8080")
            run_id = f"scheduled__2026-11-23T10:00:00+00:00@{name}"
            repo.start_run(s, run_id=run_id, cluster_id=cid, params={})
            plans[name] = repo.create_plan(
                s,
                run_id=run_id,
                cluster_id=cid,
                status="pending",
                expires_at=datetime.now(UTC) + timedelta(hours=1),
                dry_run=False,
                strategies={},
                config={},
                summary={"maxUsageBefore": 0.9},
                decision={},
                actions=[
                    {
                        "kind": "unload",
                        "bundle": "public/default/0x00000000_0x40000000",
                        "source_broker": f"{name}-1:8080",
                        "destination_broker": f"{name}-2:8080",
                        "reason": "overloaded",
                    }
                ],
            )
    return db_url, plans


def test_plans_list_shows_every_cluster_or_one(two_clusters):
    db_url, plans = two_clusters
    every = cli(db_url, "plans", "list")
    assert every.returncode == 0, every.stderr
    assert "CLUSTER" in every.stdout.splitlines()[0]
    lines = {p: next(line for line in every.stdout.splitlines() if line.startswith(p)) for p in plans.values()}
    assert " east " in lines[plans["east"]] and " west " in lines[plans["west"]]
    west = cli(db_url, "plans", "list", "--cluster", "west")
    assert west.returncode == 0 and plans["west"] in west.stdout and plans["east"] not in west.stdout
    unknown = cli(db_url, "plans", "list", "--cluster", "north")
    assert unknown.returncode != 0 and "unknown cluster 'north'; known: east, west" in unknown.stderr


def test_a_plan_of_another_cluster_is_refused_before_anything_is_decided(two_clusters):
    db_url, plans = two_clusters
    shown = cli(db_url, "plans", "show", plans["east"], "--cluster", "east", "--json")
    assert shown.returncode == 0 and json.loads(shown.stdout)["cluster"] == "east"
    assert "cluster=west" in cli(db_url, "plans", "show", plans["west"]).stdout
    wrong = cli(db_url, "plans", "approve", plans["east"], "--cluster", "west", "--by", "alice")
    assert wrong.returncode != 0 and f"plan {plans['east']} is of cluster 'east', not 'west'" in wrong.stderr
    assert json.loads(cli(db_url, "plans", "show", plans["east"], "--json").stdout)["status"] == "pending"
    right = cli(db_url, "plans", "approve", plans["east"], "--cluster", "east", "--by", "alice")
    assert right.returncode == 0, right.stderr
    assert json.loads(right.stdout)["decision"] == "approved"
