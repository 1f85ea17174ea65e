"""The imbalance watch DAG on the simulated cluster: a run starts once per episode, not twice.

Real Airflow (``dag.test`` of ``pulsar_rebalance_imbalance_watch``; its ``TriggerDagRunOperator`` creates
the ``pulsar_rebalance`` run in Airflow's metadata DB), real HTTP to the simulated Pulsar cluster's load
reports, real Postgres for the watch's state.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900, method="thread")]


@pytest.fixture
def sim(db_url, monkeypatch):
    from pulsar_rebalance.simulator.generator import generate_cluster
    from pulsar_rebalance.simulator.server import SimulatedPulsar

    with SimulatedPulsar(generate_cluster(seed=42, skew=5.0), ephemeral=True) as cluster:
        monkeypatch.setenv(
            "AIRFLOW_CONN_PULSAR_ADMIN_DEFAULT", json.dumps({"conn_type": "http", "host": cluster.admin_url})
        )
        monkeypatch.setenv(
            "AIRFLOW_CONN_PULSAR_REBALANCE_DB", json.dumps({"conn_type": "postgres", "extra": {"url": db_url}})
        )
        yield cluster


def _rebalance_runs() -> list[str]:
    from airflow.models import DagRun

    return sorted(r.run_id for r in DagRun.find(dag_id="pulsar_rebalance"))


def _watch_row(db_url: str) -> dict:
    engine = sa.create_engine(db_url)
    try:
        with engine.connect() as c:
            return dict(c.execute(sa.text("SELECT * FROM imbalance_watch")).one()._mapping)
    finally:
        engine.dispose()


def test_an_imbalance_triggered_run_starts_once_not_twice(airflow_db, sim, db_url):
    from airflow.dag_processing.dagbag import DagBag

    from pulsar_rebalance.orchestration.imbalance import worst_broker
    from pulsar_rebalance.pulsar_admin import PulsarAdminClient

    client = PulsarAdminClient.from_url(sim.admin_url)
    try:
        _, _, worst = worst_broker(client, None)
    finally:
        client.close()
    over = {"threshold": round(worst - 0.05, 4), "samples": 2}
    dag = DagBag(dag_folder=str(ROOT / "dags")).get_dag("pulsar_rebalance_imbalance_watch")
    before = _rebalance_runs()

    def sample(conf):
        dr = dag.test(run_conf=conf)
        assert dr.state == "success"
        return dr, {ti.task_id: ti.state for ti in dr.get_task_instances()}

    _, states = sample(over)  # 1 of 2 samples over: nothing yet
    assert states == {"sample_imbalance": "success", "trigger_rebalance": "skipped"}
    assert _rebalance_runs() == before

    dr, states = sample(over)  # 2 of 2: one run
    assert states == {"sample_imbalance": "success", "trigger_rebalance": "success"}
    [triggered] = sorted(set(_rebalance_runs()) - set(before))
    assert triggered == f"imbalance__{dr.run_id}"
    row = _watch_row(db_url)
    assert row["triggered_run_id"] == triggered and row["armed"] is False

    for _ in range(2):  # still over the threshold: the same episode, no second run
        _, states = sample(over)
        assert states["trigger_rebalance"] == "skipped"
    assert sorted(set(_rebalance_runs()) - set(before)) == [triggered]
    assert _watch_row(db_url)["over_count"] == 4

    # back below the threshold re-arms the watch (a new episode could start a run again)
    _, states = sample({"threshold": round(worst + 0.05, 4), "samples": 2})
    assert states["trigger_rebalance"] == "skipped"
    row = _watch_row(db_url)
    assert row["armed"] is True and row["over_count"] == 0
