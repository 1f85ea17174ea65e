"""execute_unload under faults: a failed admin call is retried without repeating finished work, and an
action whose effect happened before a crash (intent recorded, outcome not) is reconciled, not redone."""

from __future__ import annotations

import os

import pytest

from pulsar_rebalance.errors import ExecutionError
from pulsar_rebalance.pipeline.context import JobContext
from pulsar_rebalance.pulsar_admin import PulsarAdminClient
from pulsar_rebalance.simulator.generator import generate_cluster
from pulsar_rebalance.simulator.server import SimulatedPulsar
from pulsar_rebalance.store import repository as repo
from pulsar_rebalance.store.engine import make_engine, session_scope

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]


@pytest.fixture
def approved(spark, db_url, tmp_path):
    """A simulated cluster with an approved plan of this run (collect -> plan, approved by carol)."""
    from pulsar_rebalance.cli.plans import decide
    from pulsar_rebalance.pipeline import stages

    with SimulatedPulsar(generate_cluster(seed=42), ephemeral=True) as sim:
        engine = make_engine(db_url)
        client = PulsarAdminClient.from_url(sim.admin_url, retries=0)
        ctx = JobContext("run-faults", str(tmp_path / "work"))
        stages.stage_collect(
            spark, ctx, params_doc={"shedding_strategy": "ThresholdShedder"}, engine=engine, client=client
        )
        stages.stage_compute_usage(spark, ctx, engine=engine)
        stages.stage_detect(spark, ctx, engine=engine)
        plan_id = stages.stage_plan(spark, ctx, engine=engine)["plan_id"]
        os.environ["PULSAR_REBALANCE_DATABASE_URL"] = db_url
        try:
            decide(plan_id, "approved", by="carol")
        finally:
            del os.environ["PULSAR_REBALANCE_DATABASE_URL"]
        yield sim, engine, client, ctx, plan_id


def _plan(engine, plan_id):
    with session_scope(engine) as s:
        return repo.get_plan(s, plan_id=plan_id)


def test_failed_unload_is_retried_and_finished_actions_are_not_repeated(spark, approved):
    from pulsar_rebalance.pipeline import stages

    sim, engine, client, ctx, plan_id = approved
    unloads = [a for a in _plan(engine, plan_id).actions if a.kind == "unload"]
    victim = unloads[-1]
    # the broker answers 500 to this one unload (whichever broker the request reaches)
    sim.inject_request_error(500, method="PUT", path_contains=f"/{victim.bundle_range}/unload")
    with pytest.raises(ExecutionError) as exc:
        stages.stage_execute(spark, ctx, engine=engine, client=client)
    assert victim.bundle in str(exc.value)
    first = {a.id: a for a in _plan(engine, plan_id).actions}
    assert first[victim.id].state == "failed" and first[victim.id].error
    done_first = {i for i, a in first.items() if a.state == "completed"}
    assert done_first, "the other actions ran despite one failure"
    assert _plan(engine, plan_id).status == "partially_executed"

    sim.clear_faults()
    report = stages.stage_execute(spark, ctx, engine=engine, client=client)  # the Airflow retry
    assert report["status"] == "executed" and report["failed"] == 0
    final = {a.id: a for a in _plan(engine, plan_id).actions}
    assert all(a.state == "completed" for a in final.values())
    assert all(final[i].attempts == 1 for i in done_first)  # finished work was not redone
    assert final[victim.id].attempts == 2
    assert sim.state.owner(victim.bundle) == victim.destination_broker


def test_effect_applied_before_a_crash_is_reconciled_not_repeated(spark, approved):
    from pulsar_rebalance.pipeline import stages

    sim, engine, client, ctx, plan_id = approved
    unload = next(a for a in _plan(engine, plan_id).actions if a.kind == "unload" and a.bundle in sim.state.owners())
    # the executor recorded its intent and Pulsar applied the unload, then the worker died
    with session_scope(engine) as s:
        repo.set_plan_status(s, plan_id=plan_id, status="executing")
        repo.transition_action(s, action_id=unload.id, to="in_progress")
    client.unload_bundle(unload.namespace, unload.bundle_range, destination_broker=unload.destination_broker)
    with session_scope(engine) as s:
        repo.set_plan_status(s, plan_id=plan_id, status="failed")

    report = stages.stage_execute(spark, ctx, engine=engine, client=client)
    assert report["status"] == "executed" and report["reconciled"] == 1
    after = {a.id: a for a in _plan(engine, plan_id).actions}
    assert after[unload.id].state == "completed" and after[unload.id].attempts == 1
    assert after[unload.id].result == {"reconciled": True}
    assert sim.state.owner(unload.bundle) == unload.destination_broker
