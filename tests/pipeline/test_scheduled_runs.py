"""A scheduled run leaves a plan that awaits a decision alone; a manual run supersedes it.

Real stages (Spark, Postgres, the HTTP simulator): the operator's plan under review survives the hourly
run, which records an empty plan saying why it skipped (the gate then ends the run green without
asking); once the plan's approval window is over, a scheduled run plans as usual; an operator's own
run always makes a fresh plan that supersedes the pending one.
"""

from __future__ import annotations

import datetime as dt

import pytest

from pulsar_rebalance.pipeline.context import JobContext
from pulsar_rebalance.pulsar_admin import PulsarAdminClient
from pulsar_rebalance.simulator.generator import generate_cluster
from pulsar_rebalance.simulator.server import SimulatedPulsar
from pulsar_rebalance.store import repository as repo
from pulsar_rebalance.store.engine import make_engine, session_scope

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

PARAMS = {"shedding_strategy": "ThresholdShedder", "approval_timeout_minutes": 60}


@pytest.fixture
def sim():
    with SimulatedPulsar(generate_cluster(seed=42), ephemeral=True) as s:
        yield s


def _plan_run(spark, engine, client, tmp_path, run_id: str, *, run_type: str | None, now: dt.datetime) -> dict:
    from pulsar_rebalance.pipeline import stages

    ctx = JobContext(run_id, str(tmp_path / "work"))
    stages.stage_collect(spark, ctx, params_doc=PARAMS, engine=engine, client=client)
    stages.stage_compute_usage(spark, ctx, engine=engine)
    stages.stage_detect(spark, ctx, engine=engine)
    return stages.stage_plan(spark, ctx, engine=engine, now=now, run_type=run_type)


def _plan(engine, plan_id: str):
    with session_scope(engine) as s:
        return repo.get_plan(s, plan_id=plan_id)


def test_a_scheduled_run_leaves_a_plan_awaiting_a_decision_alone_and_a_manual_run_supersedes_it(
    spark, sim, db_url, tmp_path
):
    from pulsar_rebalance.orchestration.approval import check_plan

    engine = make_engine(db_url)
    client = PulsarAdminClient.from_url(sim.admin_url)
    t0 = dt.datetime.now(dt.UTC)
    manual = _plan_run(spark, engine, client, tmp_path, "manual__a", run_type="manual", now=t0)
    assert manual["status"] == "pending" and manual["actions"] > 0
    expires = _plan(engine, manual["plan_id"]).expires_at

    # the hourly run: an empty plan that says why; the operator's plan is untouched; no gate
    hourly = _plan_run(spark, engine, client, tmp_path, "scheduled__b", run_type="scheduled", now=t0)
    assert (hourly["status"], hourly["actions"]) == ("empty", 0), hourly
    skipped = _plan(engine, hourly["plan_id"])
    reason = f"skipped: plan {manual['plan_id']} awaits a decision (expires {expires:%Y-%m-%d %H:%M:%S} UTC)"
    assert skipped.summary["decision"]["reason"] == reason and skipped.decision["reason"] == reason
    assert skipped.summary["skipped"] == {"awaits": manual["plan_id"], "expiresAt": expires.isoformat()}
    assert _plan(engine, manual["plan_id"]).status == "pending"
    with session_scope(engine) as s:
        assert repo.plans_superseded_by(s, plan_id=hourly["plan_id"]) == []
        assert repo.get_run(s, run_id="scheduled__b").status == "nothing_to_do"
    assert check_plan(db_url, "scheduled__b")["status"] == "empty"  # the gate skips: the run ends green
    # told by its id alone (no run type given), a scheduled run does the same
    by_id = _plan_run(spark, engine, client, tmp_path, "scheduled__c", run_type=None, now=t0)
    assert by_id["status"] == "empty" and _plan(engine, manual["plan_id"]).status == "pending"

    # the operator asks for a fresh plan: it supersedes the pending one
    again = _plan_run(spark, engine, client, tmp_path, "manual__d", run_type="manual", now=t0)
    assert again["status"] == "pending"
    assert _plan(engine, manual["plan_id"]).status == "superseded"
    with session_scope(engine) as s:
        assert repo.plans_superseded_by(s, plan_id=again["plan_id"]) == [manual["plan_id"]]

    # once the approval window is over, the next scheduled run plans as usual (the old plan expires)
    later = _plan(engine, again["plan_id"]).expires_at + dt.timedelta(minutes=1)
    scheduled = _plan_run(spark, engine, client, tmp_path, "scheduled__e", run_type="DagRunType.SCHEDULED", now=later)
    assert scheduled["status"] == "pending" and scheduled["actions"] > 0
    assert _plan(engine, again["plan_id"]).status == "expired"


def test_run_type_as_airflow_renders_it():
    from pulsar_rebalance.pipeline.stages import is_scheduled

    assert is_scheduled("whatever", "scheduled") and is_scheduled("whatever", "DagRunType.SCHEDULED")
    assert not is_scheduled("scheduled__x", "manual") and not is_scheduled("x", "DagRunType.MANUAL")
    assert is_scheduled("scheduled__2026-11-25T00:00:00+00:00") and not is_scheduled("manual__2026-11-25")
