"""Pulsar rebalance: collect → usage → detect → plan → **human approval** → execute.

Each Spark task runs one thin entry point of ``spark_jobs/``; state lives in Postgres (plans,
approvals, bundle ranges, ownership history) and run-scoped Parquet. Approve or reject the plan
with ``pulsar-rebalance plans approve|reject PLAN_ID``; nothing moves before that. Logic lives in
the ``pulsar_rebalance`` package; this file only wires tasks.
"""

from __future__ import annotations

import os
from datetime import timedelta

import pendulum
from airflow.sdk import DAG, Param

from pulsar_rebalance.orchestration.approval import PlanApprovalSensor
from pulsar_rebalance.orchestration.operators import PulsarSparkJobOperator
from pulsar_rebalance.pipeline.params import SHEDDERS, RunParams
PLACEMENTS = ["LeastLongTermMessageRate", "LeastResourceUsageWithWeight", "AvgShedder"]
SPLIT_ALGORITHMS = [None, "range_equally_divide", "topic_count_equally_divide", "specified_positions_divide",
                    "flow_or_qps_equally_divide"]

with DAG(
    dag_id="pulsar_rebalance",
    description="Approval-gated Pulsar bundle rebalancing (a whole-cluster planner, or Pulsar's own algorithms)",
    schedule=os.environ.get("PULSAR_REBALANCE_SCHEDULE", "@hourly") or None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["pulsar", "rebalance"],
    doc_md=__doc__,
    default_args={"retries": 1, "retry_delay": timedelta(seconds=20)},
    params={
        "namespaces": Param([], type="array", items={"type": "string"},
                            description="tenant/namespace list; empty = every namespace"),
        "shedding_strategy": Param(RunParams.shedding_strategy, enum=list(SHEDDERS),
                                   description="GlobalPlanner (whole-cluster plan) or a Pulsar loadBalancerLoadSheddingStrategy"),
        "placement_strategy": Param("LeastLongTermMessageRate", enum=PLACEMENTS,
                                    description="loadBalancerLoadPlacementStrategy"),
        "split_algorithm": Param(None, type=["null", "string"], enum=SPLIT_ALGORITHMS,
                                 description="defaultNamespaceBundleSplitAlgorithm; null = config/Pulsar default"),
        "dry_run": Param(False, type="boolean", description="plan and approve, but call no admin API"),
        "config": Param({}, type="object", description="broker.conf overrides, Pulsar key names verbatim"),
        "approval_timeout_minutes": Param(60, type="number", exclusiveMinimum=0,
                                          description="the plan expires (no change) if not decided in time"),
        "max_parallel_unloads": Param(4, type="integer", minimum=1, maximum=64),
        "cluster": Param(None, type=["null", "string"], description="Pulsar cluster name; null = the first"),
        "seed": Param(0, type="integer", description="seed for Pulsar's random tie-breaks"),
    },
) as dag:
    collect_load = PulsarSparkJobOperator(task_id="collect_load", job="collect_load", pass_params=True)
    compute_usage = PulsarSparkJobOperator(task_id="compute_usage", job="compute_usage")
    detect_overload = PulsarSparkJobOperator(task_id="detect_overload", job="detect_overload")
    plan_split = PulsarSparkJobOperator(task_id="plan_split", job="plan_split")
    await_approval = PlanApprovalSensor(task_id="await_approval", poll_interval=2.0, retries=0)
    execute_unload = PulsarSparkJobOperator(task_id="execute_unload", job="execute_unload")

    collect_load >> compute_usage >> detect_overload >> plan_split >> await_approval >> execute_unload
