"""The DAG parses, wires the seven tasks in order, and keeps parse time free of heavy imports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _dag():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags"))
    assert bag.import_errors == {}
    return bag.get_dag("pulsar_rebalance")


def test_dag_wires_the_seven_tasks_in_order(airflow_db):
    dag = _dag()
    order = [
        "collect_load",
        "compute_usage",
        "detect_overload",
        "plan_split",
        "await_approval",
        "wait_for_window",
        "execute_unload",
    ]
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

    assert type(dag.get_task("wait_for_window")).__name__ == "MaintenanceWindowSensor"
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


def test_plan_split_is_told_the_run_type_and_reads_it(airflow_db):
    """A scheduled run must not supersede a plan that awaits a decision: plan_split gets the run's type."""
    import jinja2
    from airflow.sdk.api.datamodels._generated import DagRunType

    from pulsar_rebalance.pipeline import jobs
    from pulsar_rebalance.pipeline.stages import is_scheduled

    args = _dag().get_task("plan_split").application_args
    assert args == ["--run-id", "{{ run_id }}", "--run-type", "{{ dag_run.run_type }}"]
    for run_type, scheduled in ((DagRunType.SCHEDULED, True), (DagRunType.MANUAL, False)):
        rendered = [jinja2.Template(a).render(run_id="r", dag_run={"run_type": run_type}) for a in args]
        parsed = jobs.parse_args("", [*rendered, "--work-dir", "/w"], extra=[("--run-type", str, None)])
        assert is_scheduled(parsed.run_id, parsed.run_type) is scheduled, rendered


@pytest.mark.parametrize("dag_file", ["pulsar_rebalance.py", "pulsar_rebalance_imbalance_watch.py"])
def test_dag_file_does_not_import_spark_or_sqlalchemy_models_at_parse_time(dag_file):
    code = (
        "import runpy, sys; runpy.run_path(sys.argv[1]);"
        "bad = [m for m in ('pyspark', 'pulsar_rebalance.store.repository', 'pulsar_rebalance.pipeline.stages') if m in sys.modules];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(ROOT / "dags" / dag_file)],
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
    """The selectable shedding strategies come from core.pulsar.shedders.SELECTABLE_SHEDDERS only."""
    from pulsar_rebalance.core.pulsar.config import SHEDDING_STRATEGY_CLASSES, LoadBalancerConfig
    from pulsar_rebalance.core.pulsar.shedders import DEFAULT_SHEDDER, SELECTABLE_SHEDDERS, SHEDDERS
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


def _trigger_api():
    """Airflow's Core API in-process with the DAG as the dag-processor would have stored it."""
    from airflow.api_fastapi.app import create_app
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import BundleDagBag, sync_bag_to_db
    from fastapi.testclient import TestClient

    DagBundlesManager().sync_bundles_to_db()
    bag = BundleDagBag(dag_folder=str(ROOT / "dags"), bundle_path=ROOT / "dags", bundle_name="dags-folder")
    assert bag.import_errors == {}
    sync_bag_to_db(bag, "dags-folder", None)
    return TestClient(create_app(apps="core"))


def test_an_unknown_config_key_is_refused_at_trigger_time_and_no_run_is_created(airflow_db):
    """Issue 16: the trigger form (Airflow's REST API, which the UI's trigger form calls) validates
    ``config`` against the load-balancer config's keys; a typo no longer waits for collect_load."""
    import uuid

    from pulsar_rebalance.core.pulsar.config import PULSAR_KEYS

    api = _trigger_api()
    runs = "/api/v2/dags/pulsar_rebalance/dagRuns"
    bad = f"manual__bad_{uuid.uuid4().hex[:8]}"
    r = api.post(runs, json={"dag_run_id": bad, "logical_date": None, "conf": {"config": {"loadBalancerNoSuchKey": 1}}})
    assert r.status_code == 400, r.text
    detail = r.json()["detail"]
    assert "Invalid input for param config" in detail and "'loadBalancerNoSuchKey' is not one of" in detail
    assert all(key in detail for key in PULSAR_KEYS)  # the valid keys are named
    assert api.get(f"{runs}/{bad}").status_code == 404  # no run was created

    wrong = api.post(
        runs,
        json={"logical_date": None, "conf": {"config": {"loadBalancerBrokerOverloadedThresholdPercentage": 500}}},
    )
    assert wrong.status_code == 400 and "loadBalancerBrokerOverloadedThresholdPercentage" in wrong.json()["detail"]
    for conf, param in (
        ({"max_parallel_unloads": 0}, "max_parallel_unloads"),
        ({"namespaces": ["no-slash"]}, "namespaces"),
        ({"split_algorithm": "halve"}, "split_algorithm"),
        ({"rollback_plan": "../etc"}, "rollback_plan"),
    ):
        r = api.post(runs, json={"logical_date": None, "conf": conf})
        assert r.status_code == 400 and f"Invalid input for param {param}" in r.json()["detail"], (conf, r.text)

    good = f"manual__good_{uuid.uuid4().hex[:8]}"
    config = {
        "loadBalancerBrokerOverloadedThresholdPercentage": 80,
        "loadBalancerLoadSheddingStrategy": "org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder",
        "supportedNamespaceBundleSplitAlgorithms": "range_equally_divide,topic_count_equally_divide",
    }
    r = api.post(runs, json={"dag_run_id": good, "logical_date": None, "conf": {"config": config, "dry_run": True}})
    assert r.status_code == 200, r.text
    assert r.json()["conf"]["config"] == config
    assert api.delete(f"{runs}/{good}").status_code == 204  # nothing is scheduled in this test: leave no run


def test_the_trigger_form_and_run_params_agree_on_what_is_valid(airflow_db):
    """Each DAG param's JSON schema accepts what RunParams.from_json accepts and refuses what it refuses
    (probes at and beyond every limit), and the config schema is LoadBalancerConfig's."""
    from jsonschema import ValidationError, validate

    from pulsar_rebalance.core.pulsar.config import PULSAR_KEYS, LoadBalancerConfig, default_config
    from pulsar_rebalance.errors import ConfigError
    from pulsar_rebalance.pipeline.params import RunParams

    params = _dag().params
    probes = {
        "namespaces": [[], ["t/ns"], ["t/ns", "a/b"], ["t"], ["t/ns/x"], ["/ns"]],
        "split_algorithm": [None, "range_equally_divide", "halve"],
        "max_parallel_unloads": [0, 1, 64, 65],
        "max_unloads_per_broker": [0, 1, 64, 65],
        "max_unloads_per_run": [None, 0, 1, 10**6, 10**6 + 1],
        "auto_approve_max_unloads": [None, 0, 1, 10**6, 10**6 + 1],
        "required_approvals": [0, 1, 5, 6],
        "unload_pacing_seconds": [-1, 0, 600, 601],
        "drift_tolerance": [-0.1, 0, 0.5, 1e6, 1e6 + 1],
        "max_missing_brokers": [-0.1, 0, 0.5, 1],
        "approval_timeout_minutes": [0, 0.5, 60],
        "rollback_plan": [None, "p-20260101-000000", "../etc", "x" * 65],
        "fix_policy_violations": [False, True, None, 1, "true"],
        "config": [
            {},
            {"loadBalancerBrokerOverloadedThresholdPercentage": 80},
            {"loadBalancerBrokerOverloadedThresholdPercentage": 101},
            {"loadBalancerNoSuchKey": 1},
            {"loadBalancerSheddingEnabled": "false"},
            {"loadManagerClassName": "org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl"},
            {"loadBalancerSheddingExcludedNamespaces": "t/a,t/b"},
            {"loadBalancerSheddingExcludedNamespaces": ["t/a", 3]},
        ],
    }
    for key, values in probes.items():
        schema = params.get_param(key).schema
        for value in values:
            try:
                validate(value, schema)
                form_ok = True
            except ValidationError:
                form_ok = False
            try:
                RunParams.from_json({key: value})
                run_ok = True
            except ConfigError:
                run_ok = False
            assert form_ok == run_ok, (key, value, form_ok, run_ok)
    config_schema = params.get_param("config").schema
    assert set(config_schema["properties"]) == PULSAR_KEYS and config_schema["additionalProperties"] is False
    validate(default_config().to_pulsar_dict(), config_schema)  # every key with Pulsar's default
    assert LoadBalancerConfig.from_mapping(default_config().to_pulsar_dict()) == default_config()


def test_a_run_marked_failed_or_success_in_airflow_follows_in_the_state_db(airflow_db, db_url, monkeypatch):
    """An operator marks runs failed / success by hand in Airflow; the next read of Required Actions or of
    the plan pages records Airflow's final state for runs still ``running`` in the state DB (audited), and
    notes on the Airflow run of an empty plan why nothing was planned."""
    import json
    import uuid

    import sqlalchemy as sa

    from pulsar_rebalance.orchestration import gate_guard
    from pulsar_rebalance.store import repository as repo
    from pulsar_rebalance.store.engine import make_engine, session_scope

    monkeypatch.setenv(
        "AIRFLOW_CONN_PULSAR_REBALANCE_DB", json.dumps({"conn_type": "postgres", "extra": {"url": db_url}})
    )
    monkeypatch.setattr(gate_guard, "_last_sweep", [float("-inf")])  # no sweep of an earlier test holds this one back
    api = _trigger_api()
    runs = "/api/v2/dags/pulsar_rebalance/dagRuns"
    ids = {verdict: f"manual__{verdict}_{uuid.uuid4().hex[:8]}" for verdict in ("failed", "success", "queued")}
    engine = make_engine(db_url)
    with session_scope(engine) as s:
        cid = repo.get_or_create_cluster(s, name="c1", admin_url="http://pulsar:8080")
        for run_id in ids.values():
            assert api.post(runs, json={"dag_run_id": run_id, "logical_date": None, "conf": {}}).status_code == 200
            repo.start_run(s, run_id=run_id, cluster_id=cid, params={})
        why = "busiest broker 0.4100 <= trigger 0.5600 (ideal 0.4000): within the band, no move"
        summary = {"decision": {"label": "Skip", "reason": "Balanced", "detail": why}}
        repo.create_plan(
            s,
            run_id=ids["queued"],
            cluster_id=cid,
            status="empty",
            expires_at=None,
            dry_run=False,
            strategies={},
            config={},
            summary=summary,
            decision={},
            actions=[],
        )
    try:
        for verdict in ("failed", "success"):  # what Airflow's "Mark run as ..." does
            r = api.patch(f"{runs}/{ids[verdict]}", json={"state": verdict})
            assert r.status_code == 200, r.text
        assert api.get("/api/v2/dags/~/dagRuns/~/hitlDetails").status_code == 200  # the Required Actions read
        with session_scope(engine) as s:
            status = {v: repo.get_run(s, run_id=r).status for v, r in ids.items()}
        assert status == {"failed": "failed", "success": "succeeded", "queued": "running"}
        # the run whose plan is empty says why in its Airflow note (the DAG run page shows it)
        note = api.get(f"{runs}/{ids['queued']}").json()["note"]
        assert note == f"Nothing to do: Skip (Balanced): {why}", note
        with engine.connect() as c:
            followed = c.execute(
                sa.text("SELECT run_id FROM audit_log WHERE event = 'run.followed_airflow' ORDER BY run_id")
            ).scalars()
            assert sorted(followed) == sorted([ids["failed"], ids["success"]])
    finally:
        for run_id in ids.values():
            api.delete(f"{runs}/{run_id}")


def test_every_dag_param_is_a_run_param_with_its_default(airflow_db):
    """The trigger form's defaults are RunParams' (dags/ derives them), and RunParams accepts the form
    as it comes: the two cannot drift."""
    from pulsar_rebalance.pipeline.params import RunParams

    params = _dag().params
    defaults = RunParams().to_json()
    form = {key: params.get_param(key).value for key in params}
    assert set(form) == set(defaults)
    assert {k: v for k, v in form.items() if v != defaults[k]} == {}, "DAG param defaults differ from RunParams"
    assert RunParams.from_json(form) == RunParams()
