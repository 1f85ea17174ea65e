"""The product on a cluster whose clock runs: the DAG's stages, hour after hour, on a served closed-loop scenario
(``simulator.live``). What the executor did over HTTP is what the model runs next, and the next hour's run sees
it: the product's loop is the closed loop's DAG cadence (``benchmarks/bench_product.py`` measures it)."""

from __future__ import annotations

import os

import pytest

from pulsar_rebalance.pipeline.context import JobContext
from pulsar_rebalance.pulsar_admin import PulsarAdminClient
from pulsar_rebalance.simulator.cluster import ClusterState, resolve_load_model
from pulsar_rebalance.simulator.live import LiveCluster, move_to_today
from pulsar_rebalance.simulator.scenarios import build
from pulsar_rebalance.simulator.server import SimulatedPulsar
from pulsar_rebalance.store.engine import make_engine

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]


def _approve(db_url: str, plan_id: str) -> None:
    from pulsar_rebalance.cli.plans import decide

    os.environ["PULSAR_REBALANCE_DATABASE_URL"] = db_url
    try:
        decide(plan_id, "approved", by="bob")
    finally:
        del os.environ["PULSAR_REBALANCE_DATABASE_URL"]


def test_hourly_runs_on_a_live_scenario_act_once_and_the_model_runs_what_they_did(spark, db_url, tmp_path):
    from pulsar_rebalance.pipeline import stages

    model = build("one-hot-broker", 1, load_model=resolve_load_model("convex-cpu"), rate_noise=0.0).model
    move_to_today(model)
    engine = make_engine(db_url)
    with SimulatedPulsar(ClusterState.from_model(model, cluster="live"), ephemeral=True) as sim:
        live = LiveCluster(sim, model)
        client = PulsarAdminClient.from_url(sim.admin_url)
        worst, statuses, moved = [], [], []
        for hour in range(3):
            worst.append(max(model.true_usage().values()))
            ctx = JobContext(f"scheduled__2026-11-29T{hour:02d}:00:00+00:00", str(tmp_path / "work"))
            stages.stage_collect(spark, ctx, params_doc={}, engine=engine, client=client)  # the DAG's defaults
            stages.stage_compute_usage(spark, ctx, engine=engine)
            stages.stage_detect(spark, ctx, engine=engine, now_ms=model.now_ms)
            planned = stages.stage_plan(spark, ctx, engine=engine)
            statuses.append(planned["status"])
            live.advance(15)  # the approval delay: the load moves on
            if planned["status"] == "pending":
                owners = dict(model.owners)
                _approve(db_url, planned["plan_id"])
                report = stages.stage_execute(spark, ctx, engine=engine, client=client)
                assert report["status"] == "executed" and report["unloads_executed"] > 0, report
                live.advance(1)
                moved.append({b for b, o in model.owners.items() if owners.get(b) != o})
                assert len(moved[-1]) == report["unloads_executed"]  # the model runs what the executor did
                live.advance(44)
            else:
                live.advance(45)
        client.close()
    # the hot broker is relieved in the first hour, for real (the model's noise-free usage), and the next
    # hourly runs, which see the moved bundles where the executor put them, leave the cluster alone
    assert statuses[0] == "pending" and statuses[1:] == ["empty", "empty"], statuses
    assert worst[1] < worst[0] - 0.1 and abs(worst[2] - worst[1]) < 0.05, worst
