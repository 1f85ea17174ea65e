"""`pulsar-rebalance plans ... --cluster` with two clusters recorded, against a real Postgres."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from pulsar_rebalance.store import repository as repo
from pulsar_rebalance.store.engine import make_engine, session_scope
from tests.cli.test_plans_cli import cli, interrupted_plan  # noqa: F401 (a fixture)


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


def test_resume_with_another_clusters_admin_url_is_refused_and_sends_nothing(interrupted_plan):  # noqa: F811
    """An operator with several clusters exported the wrong PULSAR_ADMIN_URL: the plan's moves must not go there."""
    import os
    import subprocess
    import sys

    from pulsar_rebalance.simulator.generator import generate_cluster
    from pulsar_rebalance.simulator.server import SimulatedPulsar

    db_url, plan_id, sim = interrupted_plan
    with SimulatedPulsar(generate_cluster(seed=42, cluster="other"), ephemeral=True) as other:
        env = dict(os.environ, PULSAR_REBALANCE_DATABASE_URL=db_url, PULSAR_ADMIN_URL=other.admin_url)
        run = [sys.executable, "-m", "pulsar_rebalance.cli", "plans"]
        out = subprocess.run([*run, "resume", plan_id], capture_output=True, text=True, env=env, timeout=180)
        assert out.returncode == 1, out.stderr
        assert (
            f"not resumed: PULSAR_ADMIN_URL serves Pulsar cluster(s) other, not plan {plan_id}'s cluster" in out.stderr
        )
        assert other.executed() == [] and sim.executed() == []
        assert json.loads(cli(db_url, "plans", "show", plan_id, "--json").stdout)["status"] == "executing"
        # abort still ends the execution, but does not measure the other cluster as this plan's result
        out = subprocess.run([*run, "abort", plan_id], capture_output=True, text=True, env=env, timeout=180)
        assert out.returncode == 0, out.stderr
        result = json.loads(cli(db_url, "plans", "show", plan_id, "--json").stdout)["result"]
        assert "serves Pulsar cluster(s) other" in json.dumps(result) and not result.get("broker_usage_after")
        assert other.executed() == []
