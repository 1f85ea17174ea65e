"""`pulsar-rebalance plans ...` against a real Postgres: decisions, and the errors an operator can hit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest

from pulsar_rebalance.store import repository as repo
from pulsar_rebalance.store.engine import make_engine, session_scope


@pytest.fixture(params=[1])
def pending_plan(db_url, request):
    with session_scope(make_engine(db_url)) as s:
        cid = repo.get_or_create_cluster(s, name="c1", admin_url="http://pulsar:8080")
        repo.start_run(s, run_id="run-1", cluster_id=cid, params={}, work_dir="/tmp/w")
        plan_id = repo.create_plan(
            s,
            run_id="run-1",
            cluster_id=cid,
            status="pending",
            expires_at=datetime.now(UTC) + timedelta(hours=1),
            dry_run=False,
            strategies={"shedding": "ThresholdShedder"},
            config={},
            summary={"maxUsageBefore": 0.9},
            decision={},
            actions=[
                {
                    "kind": "unload",
                    "bundle": "public/default/0x00000000_0x40000000",
                    "source_broker": "b1:8080",
                    "destination_broker": "b2:8080",
                    "reason": "b1 overloaded",
                }
            ],
            required_approvals=request.param,
        )
    return db_url, plan_id


def cli(db_url: str, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PULSAR_REBALANCE_DATABASE_URL=db_url)
    return subprocess.run(
        [sys.executable, "-m", "pulsar_rebalance.cli", *args], capture_output=True, text=True, env=env, timeout=120
    )


def test_approve_records_who_when_and_comment(pending_plan):
    db_url, plan_id = pending_plan
    out = cli(db_url, "plans", "approve", plan_id, "--by", "alice", "-m", "off-peak")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["decision"] == "approved" and doc["decided_by"] == "alice" and doc["comment"] == "off-peak"
    shown = json.loads(cli(db_url, "plans", "show", plan_id, "--json").stdout)
    assert shown["status"] == "approved" and shown["approval"]["decided_by"] == "alice"
    assert shown["actions"][0]["reason"] == "b1 overloaded"
    listed = cli(db_url, "plans", "list")
    assert plan_id in listed.stdout and "approved" in listed.stdout


@pytest.mark.parametrize("pending_plan", [2], indirect=True)
def test_a_plan_needing_two_approvers_takes_two_different_people(pending_plan):
    db_url, plan_id = pending_plan
    first = cli(db_url, "plans", "approve", plan_id, "--by", "alice", "-m", "one")
    assert first.returncode == 0, first.stderr
    doc = json.loads(first.stdout)
    assert (doc["decision"], doc["approvals"], doc["required_approvals"]) == ("pending", ["alice"], 2)
    assert "approval 1 of 2 recorded" in doc["note"]
    again = cli(db_url, "plans", "approve", plan_id, "--by", "alice")
    assert again.returncode == 2 and "already has the approval of alice" in again.stderr
    second = cli(db_url, "plans", "approve", plan_id, "--by", "bob", "-m", "two")
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["decided_by"] == "alice + bob"
    shown = json.loads(cli(db_url, "plans", "show", plan_id, "--json").stdout)
    assert shown["status"] == "approved" and [v["voter"] for v in shown["votes"]] == ["alice", "bob"]


def test_approving_an_already_decided_plan_is_a_clear_error(pending_plan):
    db_url, plan_id = pending_plan
    assert cli(db_url, "plans", "reject", plan_id, "--by", "bob").returncode == 0
    out = cli(db_url, "plans", "approve", plan_id, "--by", "alice")
    assert out.returncode == 2 and out.stdout == ""
    assert plan_id in out.stderr and "rejected" in out.stderr and "bob" in out.stderr
    with session_scope(make_engine(db_url)) as s:
        assert repo.get_plan(s, plan_id=plan_id).approval.decided_by == "bob"  # unchanged


def test_unknown_plan_id_is_a_clear_error(pending_plan):
    db_url, _ = pending_plan
    out = cli(db_url, "plans", "approve", "p-19700101-000000")
    assert out.returncode == 2 and "p-19700101-000000" in out.stderr and out.stdout == ""


def test_missing_database_url_says_what_to_set(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("PULSAR_REBALANCE_DATABASE_URL", "DATABASE_URL")}
    out = subprocess.run(
        [sys.executable, "-m", "pulsar_rebalance.cli", "plans", "list"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode != 0 and "PULSAR_REBALANCE_DATABASE_URL" in out.stderr


def test_show_plot_writes_a_png_chart(pending_plan, tmp_path):
    db_url, plan_id = pending_plan
    out = cli(db_url, "plans", "show", plan_id, "--plot", str(tmp_path / "plan.png"))
    assert out.returncode == 0, out.stderr
    png = (tmp_path / "plan.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000


@pytest.fixture
def interrupted_plan(db_url):
    """A plan of two unloads on a simulated cluster whose executor died mid-way (first action in progress)."""
    from pulsar_rebalance.simulator.generator import generate_cluster
    from pulsar_rebalance.simulator.server import SimulatedPulsar

    with SimulatedPulsar(generate_cluster(seed=42), ephemeral=True) as sim:
        brokers = sim.state.broker_ids()
        actions = []
        for bundle, owner in sorted(sim.state.owners().items())[:2]:
            ns, rng = bundle.rsplit("/", 1)
            dest = next(b for b in brokers if b != owner)
            actions.append(
                {"kind": "unload", "namespace": ns, "bundle_range": rng, "source_broker": owner}
                | {"destination_broker": dest, "reason": "test move"}
            )
        engine = make_engine(db_url)
        with session_scope(engine) as s:
            cid = repo.get_or_create_cluster(s, name=sim.state.cluster, admin_url=sim.admin_url)
            repo.start_run(s, run_id="run-1", cluster_id=cid, params={}, work_dir="/tmp/w")
            plan_id = repo.create_plan(
                s,
                run_id="run-1",
                cluster_id=cid,
                status="pending",
                expires_at=datetime.now(UTC) + timedelta(hours=1),
                dry_run=False,
                strategies={},
                config={},
                summary={"maxUsageBefore": 0.9},
                decision={},
                actions=actions,
            )
        with session_scope(engine) as s:
            repo.decide_plan(s, plan_id=plan_id, decision="approved", decided_by="alice")
        with session_scope(engine) as s:
            repo.set_plan_status(s, plan_id=plan_id, status="executing")
            repo.transition_action(s, action_id=repo.get_plan(s, plan_id=plan_id).actions[0].id, to="in_progress")
        yield db_url, plan_id, sim


def test_resume_measures_and_records_the_cluster_afterwards(interrupted_plan):
    db_url, plan_id, sim = interrupted_plan
    env = dict(os.environ, PULSAR_REBALANCE_DATABASE_URL=db_url, PULSAR_ADMIN_URL=sim.admin_url)
    out = subprocess.run(
        [sys.executable, "-m", "pulsar_rebalance.cli", "plans", "resume", plan_id, "--by", "bob"],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["status"] == "executed" and report["unloads_executed"] == 2
    assert set(report["broker_usage_after"]) == set(sim.state.broker_ids())  # was {}
    assert report["max_usage_after"] == max(report["broker_usage_after"].values())  # was null
    shown = json.loads(cli(db_url, "plans", "show", plan_id, "--json").stdout)
    assert shown["result"] == report
    text = cli(db_url, "plans", "show", plan_id).stdout
    assert f"max broker usage measured after execution: {100 * report['max_usage_after']:5.1f}%" in text
    assert "measured after" in text.split("brokers (", 1)[1].splitlines()[0]


def test_abort_without_an_admin_url_still_aborts_and_says_why_nothing_was_measured(interrupted_plan):
    db_url, plan_id, _ = interrupted_plan
    out = cli(db_url, "plans", "abort", plan_id, "--by", "carol")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["status"] == "aborted" and doc["actions"] == {"failed": 1, "skipped": 1}
    assert doc["max_usage_after"] is None and doc["broker_usage_after"] == {}
    assert doc["not_measured"].startswith("the cluster was not re-read after the abort: PULSAR_ADMIN_URL is not set")
    text = cli(db_url, "plans", "show", plan_id).stdout
    assert "not measured after execution: the cluster was not re-read after the abort: PULSAR_ADMIN_URL" in text
