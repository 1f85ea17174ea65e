"""The five stages run directly (no Airflow): real Spark session, real Postgres, real HTTP simulator.

Also the bad-input contract of issue #2: unreachable admin URL, a broker answering 500, a malformed
load report -> a clear error and nothing written.
"""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa

from pulsar_rebalance.errors import AdminConnectError, MalformedResponseError, ServerSideError
from pulsar_rebalance.pipeline.context import JobContext
from pulsar_rebalance.pulsar_admin import PulsarAdminClient
from pulsar_rebalance.simulator import SimulatedPulsar, generate_cluster
from pulsar_rebalance.store import repository as repo
from pulsar_rebalance.store.engine import make_engine, session_scope

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]


@pytest.fixture
def sim():
    with SimulatedPulsar(generate_cluster(seed=42), ephemeral=True) as s:
        yield s


def _count(url: str, table: str) -> int:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as c:
            return c.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one()
    finally:
        engine.dispose()


def _approve(db_url: str, plan_id: str) -> None:
    """Approve as bob, through the CLI's decision path (it reads the state DB from the environment)."""
    import os

    from pulsar_rebalance.cli.plans import decide

    os.environ["PULSAR_REBALANCE_DATABASE_URL"] = db_url
    try:
        decide(plan_id, "approved", by="bob", comment="ok")
    finally:
        del os.environ["PULSAR_REBALANCE_DATABASE_URL"]


def test_stages_plan_then_execute_an_approved_plan(spark, sim, db_url, tmp_path, capsys, monkeypatch):
    from pulsar_rebalance.pipeline import stages

    engine = make_engine(db_url)
    client = PulsarAdminClient.from_url(sim.admin_url)
    ctx = JobContext("manual__2026-11-22T01:00:00+00:00", str(tmp_path / "work"))
    collected = stages.stage_collect(spark, ctx, params_doc={"shedding_strategy": "ThresholdShedder"}, engine=engine, client=client)
    assert collected["brokers"] == 5 and collected["topics"] > 0
    usage = stages.stage_compute_usage(spark, ctx, engine=engine)
    assert usage["topicBundleMismatches"] == 0
    detected = stages.stage_detect(spark, ctx, engine=engine)
    assert detected["label"] == "Success" and detected["unloads"] > 0, detected
    planned = stages.stage_plan(spark, ctx, engine=engine)
    assert planned["status"] == "pending" and planned["actions"] > 0
    assert stages.stage_plan(spark, ctx, engine=engine)["plan_id"] == planned["plan_id"]  # retry: same plan

    _approve(db_url, planned["plan_id"])
    report = stages.stage_execute(spark, ctx, engine=engine, client=client)
    assert report["status"] == "executed", report
    assert report["unloads_executed"] == planned["summary"]["numBundleUnloads"]
    assert report["max_usage_after"] < report["max_usage_before"]
    # a retry of execute_unload after it finished does nothing again and returns the recorded outcome
    owners = sim.state.owners()
    assert stages.stage_execute(spark, ctx, engine=engine, client=client) == report
    assert sim.state.owners() == owners
    with session_scope(engine) as s:
        plan = repo.get_plan(s, plan_id=planned["plan_id"])
    assert all(a.attempts == 1 and a.state == "completed" for a in plan.actions)

    # "where was bundle X at time T and why did it move", from the CLI
    from pulsar_rebalance.cli import main

    moved = next(a for a in plan.actions if a.kind == "unload")
    monkeypatch.setenv("PULSAR_REBALANCE_DATABASE_URL", db_url)
    capsys.readouterr()
    assert main(["history", moved.bundle, "--json"]) == 0
    history = json.loads(capsys.readouterr().out)
    assert history[-1]["broker_id"] == moved.destination_broker and history[-1]["approved_by"] == "bob"
    assert history[-1]["action_reason"] == moved.reason and history[-1]["valid_to"] is None
    assert main(["history", moved.bundle, "--at", "2000-01-01T00:00:00"]) == 0
    assert "no ownership recorded" in capsys.readouterr().out


def test_the_default_planner_runs_through_the_stages_and_its_plan_executes(spark, sim, db_url, tmp_path):
    """GlobalPlanner (the default): detect reads the busiest bundles' topics from topics.parquet, the
    plan keeps the planner's destinations and predictions, and executing it lowers the busiest broker."""
    from pulsar_rebalance.pipeline import stages

    engine = make_engine(db_url)
    client = PulsarAdminClient.from_url(sim.admin_url)
    ctx = JobContext("manual__2026-11-22T02:00:00+00:00", str(tmp_path / "work"))
    stages.stage_collect(spark, ctx, params_doc={}, engine=engine, client=client)
    stages.stage_compute_usage(spark, ctx, engine=engine)
    detected = stages.stage_detect(spark, ctx, engine=engine)
    assert detected["label"] == "Success" and detected["unloads"] > 0, detected
    scenario = stages.read_json(spark, ctx.path(stages.SCENARIO_JSON))  # the busiest bundles' topics went along
    assert scenario["shedding"] == "GlobalPlanner" and scenario["cycles"][0]["bundleTopics"]
    planned = stages.stage_plan(spark, ctx, engine=engine)
    assert planned["summary"]["maxUsageAfterPredicted"] < planned["summary"]["maxUsageBefore"]
    with session_scope(engine) as s:
        plan = repo.get_plan(s, plan_id=planned["plan_id"])
        assert plan.summary["strategies"]["shedding"] == plan.summary["strategies"]["placement"] == "GlobalPlanner"
        unloads = [a for a in plan.actions if a.kind == "unload"]
        assert unloads and all(a.reason.startswith("Overloaded: GlobalPlanner") and a.destination_broker for a in unloads)

    _approve(db_url, planned["plan_id"])
    report = stages.stage_execute(spark, ctx, engine=engine, client=client)
    assert report["status"] == "executed", report
    assert report["max_usage_after"] < report["max_usage_before"]


def test_unreachable_admin_url_fails_clearly_and_writes_nothing(spark, db_url, tmp_path):
    from pulsar_rebalance.pipeline import stages

    client = PulsarAdminClient.from_url("http://127.0.0.1:9", timeout=2, retries=0)
    with pytest.raises(AdminConnectError) as exc:
        stages.stage_collect(spark, JobContext("r1", str(tmp_path)), params_doc={"shedding_strategy": "ThresholdShedder"}, engine=make_engine(db_url), client=client)
    assert "127.0.0.1:9" in str(exc.value)
    assert _count(db_url, "runs") == 0 and _count(db_url, "broker_load") == 0


def test_broker_answering_500_fails_clearly_and_writes_nothing(spark, sim, db_url, tmp_path):
    from pulsar_rebalance.pipeline import stages

    sim.inject_error(sim.broker_ids[2], status=500)
    client = PulsarAdminClient.from_url(sim.admin_url, retries=0)
    with pytest.raises(ServerSideError) as exc:
        stages.stage_collect(spark, JobContext("r1", str(tmp_path)), params_doc={"shedding_strategy": "ThresholdShedder"}, engine=make_engine(db_url), client=client)
    assert exc.value.status_code == 500
    assert _count(db_url, "runs") == 0 and _count(db_url, "bundle_ranges") == 0


def test_malformed_load_report_fails_clearly_and_writes_nothing(spark, sim, db_url, tmp_path):
    from pulsar_rebalance.pipeline import stages

    sim.inject_malformed_load_report(sim.broker_ids[1])
    client = PulsarAdminClient.from_url(sim.admin_url, retries=0)
    with pytest.raises(MalformedResponseError) as exc:
        stages.stage_collect(spark, JobContext("r1", str(tmp_path)), params_doc={"shedding_strategy": "ThresholdShedder"}, engine=make_engine(db_url), client=client)
    assert "load-report" in str(exc.value)
    assert _count(db_url, "runs") == 0 and _count(db_url, "ownership") == 0
