"""Rollback: a run with ``rollback_plan`` plans the return of another plan's completed unloads to their
previous owners, as an ordinary plan that needs approval; executing it restores the ownership."""

from __future__ import annotations

import pytest

from pulsar_rebalance.pipeline.context import JobContext
from pulsar_rebalance.pulsar_admin import PulsarAdminClient
from pulsar_rebalance.simulator.generator import generate_cluster
from pulsar_rebalance.simulator.server import SimulatedPulsar
from pulsar_rebalance.store import repository as repo
from pulsar_rebalance.store.engine import make_engine, session_scope

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]


def _run(spark, ctx, engine, client, params):
    from pulsar_rebalance.pipeline import stages

    stages.stage_collect(spark, ctx, params_doc=params, engine=engine, client=client)
    stages.stage_compute_usage(spark, ctx, engine=engine)
    stages.stage_detect(spark, ctx, engine=engine)
    return stages.stage_plan(spark, ctx, engine=engine)["plan_id"]


def _approve_and_execute(engine, client, plan_id):
    from pulsar_rebalance.pipeline.execute import execute_plan

    with session_scope(engine) as s:
        repo.decide_plan(s, plan_id=plan_id, decision="approved", decided_by="alice")
    return execute_plan(engine, client, plan_id=plan_id)


def test_rollback_returns_moved_bundles_and_needs_approval(spark, db_url, tmp_path):
    with SimulatedPulsar(generate_cluster(seed=42), ephemeral=True) as sim:
        engine = make_engine(db_url)
        client = PulsarAdminClient.from_url(sim.admin_url, retries=0)
        before = sim.state.owners()
        first = _run(
            spark,
            JobContext("run-1", str(tmp_path)),
            engine,
            client,
            {"shedding_strategy": "ThresholdShedder", "split_algorithm": None},
        )
        assert _approve_and_execute(engine, client, first).unloads_executed >= 1
        with session_scope(engine) as s:
            moved = {
                a.bundle: a.source_broker
                for a in repo.get_plan(s, plan_id=first).actions
                if a.kind == "unload" and a.state == "completed"
            }
        back = _run(
            spark,
            JobContext("run-2", str(tmp_path)),
            engine,
            client,
            {"shedding_strategy": "ThresholdShedder", "rollback_plan": first},
        )
        with session_scope(engine) as s:
            plan = repo.get_plan(s, plan_id=back)
        assert plan.status == "pending" and plan.summary["rollbackOf"] == first  # needs approval like any plan
        rolled = {a.bundle: a.destination_broker for a in plan.actions}
        # bundles that existed before the first plan go back to their owner; split children stay (no merge)
        assert {b: o for b, o in rolled.items() if b in before} == {b: before[b] for b in moved if b in before}
        assert all(f"rollback of plan {first}" in a.reason for a in plan.actions)
        # returning the load re-creates the overload the first plan removed: the reviewer is warned
        assert any("predicted to raise the busiest broker" in w for w in plan.summary["warnings"]), plan.summary
        # the do-no-harm guard checks a rollback but cuts nothing: the operator asked for these moves back
        guard = plan.summary["guard"]
        assert guard["mode"] == "warn" and guard["dropped"] == 0 and guard["kept"] == len(plan.actions)
        assert bool(guard["failed"]) == any(w.startswith("do-no-harm guard: ") for w in plan.summary["warnings"])
        assert any("not reversed" in n for n in plan.summary["notes"]) or not any(
            a.kind == "split" for a in repo_actions(engine, first)
        )
        _approve_and_execute(engine, client, back)
        after = sim.state.owners()
        assert all(after[b] == before[b] for b in rolled if b in before)


def repo_actions(engine, plan_id):
    with session_scope(engine) as s:
        return repo.get_plan(s, plan_id=plan_id).actions
