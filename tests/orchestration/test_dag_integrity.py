"""The DAG parses, wires the six tasks in order, and keeps parse time free of heavy imports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _dag():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags"))
    assert bag.import_errors == {}
    return bag.get_dag("pulsar_rebalance")


def test_dag_wires_the_six_tasks_in_order(airflow_db):
    dag = _dag()
    order = ["collect_load", "compute_usage", "detect_overload", "plan_split", "await_approval", "execute_unload"]
    assert [t for t in order if t in dag.task_ids] == order
    for a, b in zip(order, order[1:]):
        assert dag.get_task(b).upstream_task_ids == {a}
    # a run parked at its gate must not hold back an operator's run (executions are serialised per cluster)
    assert dag.max_active_runs == 3
    assert dag.schedule == "@hourly"  # the default of PULSAR_REBALANCE_SCHEDULE
    for task_id in order[:4] + ["execute_unload"]:
        assert type(dag.get_task(task_id)).__name__ == "PulsarSparkJobOperator"
        assert dag.get_task(task_id).application.endswith(f"spark_jobs/{task_id}.py")
    from airflow.providers.standard.operators.hitl import HITLOperator

    gate = dag.get_task("await_approval")
    assert isinstance(gate, HITLOperator) and gate.options == ["Approve", "Reject"]
    assert set(gate.params) >= {"comment", "plan_hash"}  # the form the approver fills in
    assert set(dag.params) >= {
        "namespaces",
        "shedding_strategy",
        "split_algorithm",
        "dry_run",
        "auto_approve_max_unloads",
        "max_unloads_per_broker",
        "allow_pulsar_shedding",
    }
    from pulsar_rebalance.pipeline.params import RunParams

    RunParams.from_json({k: v for k, v in dag.params.dump().items()})  # every DAG param is a known run param


def test_dag_file_does_not_import_spark_or_sqlalchemy_models_at_parse_time():
    code = (
        "import runpy, sys; runpy.run_path(sys.argv[1]);"
        "bad = [m for m in ('pyspark', 'pulsar_rebalance.store.repository', 'pulsar_rebalance.pipeline.stages') if m in sys.modules];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(ROOT / "dags" / "pulsar_rebalance.py")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_spark_jobs_are_thin_entry_points():
    for job in (ROOT / "spark_jobs").glob("*.py"):
        text = job.read_text()
        assert len(text.splitlines()) < 50, f"{job.name} grew logic; move it into pulsar_rebalance.pipeline"
        assert "def main(" in text and "spark.stop()" in text


def test_one_strategy_list_feeds_the_dag_the_run_params_the_contract_and_the_config(airflow_db):
    """The selectable shedding strategies come from core.shedders.SELECTABLE_SHEDDERS only."""
    from pulsar_rebalance.core.config import SHEDDING_STRATEGY_CLASSES, LoadBalancerConfig
    from pulsar_rebalance.core.shedders import DEFAULT_SHEDDER, SELECTABLE_SHEDDERS, SHEDDERS
    from pulsar_rebalance.pipeline.params import SHEDDERS as RUN_SHEDDERS
    from pulsar_rebalance.pipeline.params import RunParams

    param = _dag().params.get_param("shedding_strategy")
    assert list(param.schema["enum"]) == list(SELECTABLE_SHEDDERS) == list(RUN_SHEDDERS)
    assert param.value == RunParams().shedding_strategy == DEFAULT_SHEDDER == "GlobalPlanner"
    for name in SELECTABLE_SHEDDERS:
        assert name in SHEDDERS and name in SHEDDING_STRATEGY_CLASSES
        assert (
            LoadBalancerConfig.from_mapping(
                {"loadBalancerLoadSheddingStrategy": name}
            ).load_balancer_load_shedding_strategy
            == name
        )
        assert RunParams.from_json({"shedding_strategy": name}).shedding_strategy == name
