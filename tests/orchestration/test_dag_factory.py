"""One DAG per cluster: the DAG file builds a DAG for every ``pulsar_admin_<name>`` Connection named in the
environment, each with its own schedule, admin Connection and run key; the default keeps ``pulsar_rebalance``."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SPARK_TASKS = ("collect_load", "compute_usage", "detect_overload", "plan_split", "execute_unload")


def _bag():
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(ROOT / "dags"))


def test_each_admin_connection_gets_its_own_dag_schedule_connection_and_run_key(airflow_db, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_PULSAR_ADMIN_WEST", '{"conn_type": "http", "host": "http://west:8080"}')
    monkeypatch.setenv("PULSAR_REBALANCE_SCHEDULE_WEST", "*/30 * * * *")
    monkeypatch.setenv("PULSAR_REBALANCE_SCHEDULE", "@daily")
    bag = _bag()
    assert bag.import_errors == {}
    default, west = bag.get_dag("pulsar_rebalance"), bag.get_dag("pulsar_rebalance_west")
    assert (default.schedule, west.schedule) == ("@daily", "*/30 * * * *")
    assert west.task_ids == default.task_ids and set(west.params) == set(default.params)
    assert "cluster:west" in west.tags
    for dag, conn, key in (
        (default, "pulsar_admin_default", "{{ run_id }}"),
        (west, "pulsar_admin_west", "{{ run_id }}@west"),
    ):
        for task_id in SPARK_TASKS:
            task = dag.get_task(task_id)
            assert task.admin_conn_id == conn
            assert task.application_args[:2] == ["--run-id", key]
        assert dag.get_task("await_approval").run_key == key


def test_an_explicit_list_names_clusters_kept_in_a_secrets_backend(airflow_db, monkeypatch):
    monkeypatch.setenv("PULSAR_REBALANCE_CLUSTERS", "east,west")
    monkeypatch.setenv("PULSAR_REBALANCE_SCHEDULE_EAST", "")  # manual runs only
    bag = _bag()
    assert bag.import_errors == {}
    ours = sorted(d for d in bag.dag_ids if d.startswith("pulsar_rebalance") and "_imbalance_watch" not in d)
    assert ours == ["pulsar_rebalance_east", "pulsar_rebalance_west"]
    assert bag.get_dag("pulsar_rebalance_east").schedule is None


def test_a_bad_cluster_name_fails_the_dag_file_naming_it(airflow_db, monkeypatch):
    monkeypatch.setenv("PULSAR_REBALANCE_CLUSTERS", "east,US-West")
    errors = _bag().import_errors  # the rebalance DAGs' file and the watches' file each refuse it, naming it
    assert {Path(f).name for f in errors} == {"pulsar_rebalance.py", "pulsar_rebalance_imbalance_watch.py"}
    assert all("'US-West'" in e for e in errors.values())


def test_the_secrets_of_a_job_come_from_its_own_dags_connection(monkeypatch):
    from pulsar_rebalance.orchestration.connections import job_environment

    monkeypatch.setenv("AIRFLOW_CONN_PULSAR_ADMIN_DEFAULT", '{"conn_type": "http", "host": "http://default:1"}')
    monkeypatch.setenv(
        "AIRFLOW_CONN_PULSAR_ADMIN_WEST", '{"conn_type": "http", "host": "http://west:2", "password": "w-token"}'
    )
    assert job_environment()["PULSAR_ADMIN_URL"] == "http://default:1"
    west = job_environment("pulsar_admin_west")
    assert west["PULSAR_ADMIN_URL"] == "http://west:2" and west["PULSAR_ADMIN_TOKEN"] == "w-token"


def test_each_cluster_gets_its_own_imbalance_watch_reading_its_own_connection(airflow_db, monkeypatch):
    monkeypatch.setenv("PULSAR_REBALANCE_CLUSTERS", "default,west")
    bag = _bag()
    assert bag.import_errors == {}
    for watch, conn, target in (
        ("pulsar_rebalance_imbalance_watch", "pulsar_admin_default", "pulsar_rebalance"),
        ("pulsar_rebalance_imbalance_watch_west", "pulsar_admin_west", "pulsar_rebalance_west"),
    ):
        dag = bag.get_dag(watch)
        assert dag.get_task("sample_imbalance").op_kwargs == {"admin_conn_id": conn}
        assert dag.get_task("trigger_rebalance").trigger_dag_id == target
