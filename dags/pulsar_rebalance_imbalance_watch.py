"""Imbalance watch (optional): start a rebalance run when the worst broker stays over a threshold.

Each run of this DAG is one sample: ``sample_imbalance`` reads every broker's load report through
Pulsar's admin API and records the worst broker's usage; after ``samples`` consecutive samples at or
over ``threshold``, inside the cluster's maintenance window (or any time if it has none), and with no
other run of the cluster planning, waiting or executing, ``trigger_rebalance`` starts one
``pulsar_rebalance`` run (run id ``imbalance__<this run's id>``). One run per episode: the watch re-arms
only after a sample with the worst broker back below the threshold. The triggered plan goes through the
same gate and maintenance-window wait as any other. Paused when created: unpause it to turn it on.
Logic lives in ``pulsar_rebalance.orchestration.imbalance``; this file only wires tasks.
"""

from __future__ import annotations

import os

import pendulum
from airflow.providers.standard.operators.python import ShortCircuitOperator
from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.sdk import DAG, Param

from pulsar_rebalance.orchestration.imbalance import REBALANCE_DAG_ID, should_trigger

with DAG(
    dag_id="pulsar_rebalance_imbalance_watch",
    description="Start a pulsar_rebalance run when the worst broker stays over a threshold (inside the window)",
    schedule=os.environ.get("PULSAR_REBALANCE_IMBALANCE_SCHEDULE", "*/5 * * * *") or None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    is_paused_upon_creation=True,
    render_template_as_native_obj=True,
    tags=["pulsar", "rebalance"],
    doc_md=__doc__,
    params={
        "threshold": Param(
            float(os.environ.get("PULSAR_REBALANCE_IMBALANCE_THRESHOLD", "0.85")),
            type="number",
            exclusiveMinimum=0,
            maximum=2,
            description="the worst broker's max resource usage (fraction: 0.85 = 85 %) that counts as over",
        ),
        "samples": Param(
            int(os.environ.get("PULSAR_REBALANCE_IMBALANCE_SAMPLES", "3")),
            type="integer",
            minimum=1,
            maximum=1000,
            description="consecutive samples (runs of this DAG) at or over the threshold before a run starts",
        ),
        "cluster": Param(None, type=["null", "string"], description="Pulsar cluster name; null = the first"),
    },
) as dag:
    sample_imbalance = ShortCircuitOperator(task_id="sample_imbalance", python_callable=should_trigger)
    trigger_rebalance = TriggerDagRunOperator(
        task_id="trigger_rebalance",
        trigger_dag_id=REBALANCE_DAG_ID,
        trigger_run_id="imbalance__{{ run_id }}",  # recorded by sample_imbalance before this task runs
        conf={"cluster": "{{ params.cluster }}"},
        skip_when_already_exists=True,  # a retry never starts a second run
    )

    sample_imbalance >> trigger_rebalance
