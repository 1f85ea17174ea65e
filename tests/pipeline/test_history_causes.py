"""``history`` credits an approved plan's action only with the ownership change that action made.

Real stages (Spark, Postgres, the HTTP simulator): between approval and execution the cluster moves a
planned bundle elsewhere itself and a broker no action touches leaves; the execution skips that action
and records the ownership it then sees - those changes are observed, not credited to the plan.
"""

from __future__ import annotations

import json

import pytest

from pulsar_rebalance.pipeline.context import JobContext
from pulsar_rebalance.pulsar_admin import PulsarAdminClient
from pulsar_rebalance.simulator.generator import generate_cluster
from pulsar_rebalance.simulator.server import SimulatedPulsar
from pulsar_rebalance.store import repository as repo
from pulsar_rebalance.store.engine import make_engine, session_scope

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]


@pytest.fixture
def sim():
    with SimulatedPulsar(generate_cluster(seed=42), ephemeral=True) as s:
        yield s


def _history(main, capsys, bundle: str) -> list[dict]:
    capsys.readouterr()
    assert main(["history", bundle, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_history_credits_a_plan_only_with_the_moves_its_actions_made(spark, sim, db_url, tmp_path, capsys, monkeypatch):
    from pulsar_rebalance.cli import main
    from pulsar_rebalance.cli.plans import decide
    from pulsar_rebalance.pipeline import stages

    engine = make_engine(db_url)
    client = PulsarAdminClient.from_url(sim.admin_url)
    ctx = JobContext("manual__2026-11-25T01:00:00+00:00", str(tmp_path / "work"))
    stages.stage_collect(spark, ctx, params_doc={"shedding_strategy": "ThresholdShedder"}, engine=engine, client=client)
    stages.stage_compute_usage(spark, ctx, engine=engine)
    stages.stage_detect(spark, ctx, engine=engine)
    planned = stages.stage_plan(spark, ctx, engine=engine)
    with session_scope(engine) as s:
        plan = repo.get_plan(s, plan_id=planned["plan_id"])
    unloads = [a for a in plan.actions if a.kind == "unload"]
    assert len(unloads) >= 2, plan.actions
    monkeypatch.setenv("PULSAR_REBALANCE_DATABASE_URL", db_url)
    decide(plan.plan_id, "approved", by="bob", comment="ok")

    # the cluster, not the plan: one planned bundle moves elsewhere, and a broker of no action leaves
    gone = unloads[0]
    involved = {b for a in plan.actions for b in (a.source_broker, a.destination_broker)}
    elsewhere = next(b for b in sim.broker_ids if b not in (gone.source_broker, gone.destination_broker))
    client.unload_bundle(gone.namespace, gone.bundle_range, destination_broker=elsewhere)
    namespaces = {a.namespace for a in plan.actions}
    untouched = sorted(
        b for b in sim.state.owners() if b.rsplit("/", 1)[0] in namespaces and b not in {a.bundle for a in plan.actions}
    )[0]
    ns, rng = untouched.rsplit("/", 1)
    client.unload_bundle(ns, rng)  # placed by the cluster
    leaving = next(b for b in sim.broker_ids if b not in involved | {elsewhere})
    reassigned = sim.kill_broker(leaving)
    assert reassigned and sim.state.owner(gone.bundle) == elsewhere

    report = stages.stage_execute(spark, ctx, engine=engine, client=client)
    assert report["status"] == "partially_executed", report
    with session_scope(engine) as s:
        actions = {a.id: a for a in repo.get_plan(s, plan_id=plan.plan_id).actions}
    assert actions[gone.id].state == "skipped" and "no longer owns" in actions[gone.id].error

    # the skipped action's bundle: observed on its new owner, credited to no action or plan
    last = _history(main, capsys, gone.bundle)[-1]
    assert last["broker_id"] == elsewhere and last["valid_to"] is None
    assert last["action_id"] is None and last["plan_id"] is None and last["approved_by"] is None
    assert "none of its actions made this change" in last["cause"] and "approved" not in last["cause"]
    # a bundle of no action that the cluster moved: the same
    last = _history(main, capsys, untouched)[-1]
    assert last["broker_id"] == sim.state.owner(untouched) and last["valid_to"] is None, last
    assert last["action_id"] is None and last["plan_id"] is None, last
    assert "none of its actions made this change" in last["cause"]
    # the departed broker's bundles: never credited to the plan (execution re-reads the plan's namespaces)
    for bundle in reassigned:
        assert all(r["plan_id"] is None for r in _history(main, capsys, bundle)), bundle
    # what the plan did move is credited to its action, approved by bob
    for a in unloads[1:]:
        last = _history(main, capsys, a.bundle)[-1]
        assert actions[a.id].state == "completed"
        assert (last["broker_id"], last["action_id"], last["approved_by"]) == (a.destination_broker, a.id, "bob")
        assert last["cause"].startswith(f"unload approved in plan {plan.plan_id} by bob")
    # a split's children are credited to the split (unless an unload of this plan moved one afterwards)
    splits = [a for a in plan.actions if a.kind == "split"]
    assert splits and all(actions[a.id].state == "completed" for a in splits), plan.actions
    unloaded = {a.bundle for a in unloads}
    for a in splits:
        children = [f"{a.namespace}/{c}" for c in a.predicted["children"] if f"{a.namespace}/{c}" not in unloaded]
        assert children
        for child in children:
            last = _history(main, capsys, child)[-1]
            assert (last["action_id"], last["action_kind"]) == (a.id, "split"), last
            assert last["cause"].startswith(f"split approved in plan {plan.plan_id} by bob"), last
