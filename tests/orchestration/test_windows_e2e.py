"""A plan approved outside its cluster's maintenance window waits, then executes when the window opens.

Real Airflow (``dag.test``: the deferred ``wait_for_window`` runs its ``DateTimeTrigger`` in-process),
real spark-submit, real Postgres, real HTTP to the simulated Pulsar cluster. The window is set while the
plan waits at its gate, to open at a minute boundary shortly after; the plan is then approved through
Airflow's real HITL route.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500, method="thread")]


@pytest.fixture
def wired(db_url, tmp_path, monkeypatch):
    from pulsar_rebalance.simulator.generator import generate_cluster
    from pulsar_rebalance.simulator.server import SimulatedPulsar

    with SimulatedPulsar(generate_cluster(seed=42, skew=5.0), ephemeral=True) as sim:
        monkeypatch.setenv(
            "AIRFLOW_CONN_PULSAR_ADMIN_DEFAULT", json.dumps({"conn_type": "http", "host": sim.admin_url})
        )
        monkeypatch.setenv(
            "AIRFLOW_CONN_PULSAR_REBALANCE_DB", json.dumps({"conn_type": "postgres", "extra": {"url": db_url}})
        )
        monkeypatch.setenv("PULSAR_REBALANCE_DATABASE_URL", db_url)
        monkeypatch.setenv("PULSAR_REBALANCE_WORK_DIR", str(tmp_path / "work"))
        yield sim, db_url


def _one(engine, sql: str, **params):
    with engine.connect() as c:
        row = c.execute(sa.text(sql), params).first()
    return None if row is None else row._mapping


def _ti_state(run_id: str, task_id: str) -> str | None:
    """The task's state in Airflow's metadata DB (Airflow's own ORM; not the state DB)."""
    from airflow.models import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        return session.query(TaskInstance.state).filter_by(run_id=run_id, task_id=task_id).scalar()


class WindowedApprover(threading.Thread):
    """At the gate: set the cluster's window to open at the next minute boundary at least ``lead`` away,
    approve through Airflow's HITL route, and watch the plan wait (approved, window closed)."""

    def __init__(self, db_url: str, lead: dt.timedelta) -> None:
        super().__init__(daemon=True)
        self.db_url, self.lead = db_url, lead
        self.plan_id = self.opens = self.error = None
        self.waited: dict | None = None

    def run(self) -> None:
        from airflow.api_fastapi.app import create_app, get_auth_manager
        from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
        from fastapi.testclient import TestClient

        from pulsar_rebalance.cli import airflow_api as api
        from pulsar_rebalance.orchestration.windows import window_gate
        from pulsar_rebalance.store import windows as store_windows
        from pulsar_rebalance.store.engine import make_engine, session_scope

        engine = sa.create_engine(self.db_url)
        try:
            gated = "SELECT plan_id, gate, content_hash, cluster_id, run_id FROM plans WHERE status = 'pending' AND gate IS NOT NULL"
            wait_for(lambda: _one(engine, gated), 900, "the plan to reach its Airflow gate", every=0.5)
            row = _one(engine, gated)
            self.plan_id = row["plan_id"]
            start = dt.datetime.now(dt.UTC) + self.lead
            self.opens = start.replace(second=0, microsecond=0) + dt.timedelta(minutes=1)
            setting = {
                "timezone": "UTC",
                "windows": [{"cron": f"{self.opens.minute} {self.opens.hour} * * *", "duration_minutes": 15}],
            }
            with session_scope(make_engine(self.db_url)) as s:
                store_windows.set_windows(s, cluster_id=row["cluster_id"], setting=setting, by="alice")
            client = TestClient(create_app(apps="core"))
            token = get_auth_manager().generate_jwt(SimpleAuthManagerUser(username="alice", role="admin"))
            client.headers["Authorization"] = f"Bearer {token}"
            r = client.patch(
                api.hitl_path(row["gate"]),
                json={
                    "chosen_options": ["Approve"],
                    "params_input": {"comment": "ok", "plan_hash": row["content_hash"]},
                },
            )
            assert r.status_code == 200, r.text
            # the wait task defers (its row reads queued while dag.test runs the trigger in-line)
            wait_for(
                lambda: _ti_state(row["run_id"], "wait_for_window") in ("deferred", "queued"),
                120,
                "wait_for_window to defer",
                every=0.5,
            )
            self.waited = window_gate(self.db_url, row["run_id"])
            self.waited["at"] = dt.datetime.now(dt.UTC)
        except Exception as exc:  # surfaced by the test's assertions
            self.error = exc
        finally:
            engine.dispose()


def test_a_plan_approved_outside_its_window_waits_and_executes_when_it_opens(airflow_db, wired):
    from airflow.dag_processing.dagbag import DagBag

    sim, db_url = wired
    approver = WindowedApprover(db_url, lead=dt.timedelta(seconds=40))
    approver.start()
    dag = DagBag(dag_folder=str(ROOT / "dags")).get_dag("pulsar_rebalance")
    dr = dag.test(run_conf={"shedding_strategy": "ThresholdShedder", "approval_timeout_minutes": 30})
    approver.join(timeout=30)
    assert approver.error is None, approver.error
    states = {ti.task_id: ti.state for ti in dr.get_task_instances()}
    assert dr.state == "success" and states["wait_for_window"] == "success" and states["execute_unload"] == "success"

    # it waited: approved and the window closed when the wait task looked, opening at the minute set
    waited = approver.waited
    assert waited["status"] == "wait" and waited["opens_at"] == approver.opens, waited
    assert waited["at"] < approver.opens

    engine = sa.create_engine(db_url)
    try:
        plan = _one(engine, "SELECT status FROM plans WHERE plan_id = :p", p=approver.plan_id)
        assert plan["status"] == "executed"
        approved_at = _one(engine, "SELECT decided_at FROM approvals WHERE plan_id = :p", p=approver.plan_id)
        started = _one(
            engine,
            "SELECT at FROM audit_log WHERE plan_id = :p AND event = 'plan.status' AND details->>'to' = 'executing'",
            p=approver.plan_id,
        )
        # approved before the window opened; execution started only once it had
        assert approved_at["decided_at"] < approver.opens <= started["at"]
        assert started["at"] < approver.opens + dt.timedelta(minutes=15)
        completed = _one(
            engine,
            "SELECT count(*) AS n FROM plan_actions WHERE plan_id = :p AND state = 'completed'",
            p=approver.plan_id,
        )
        assert completed["n"] > 0
    finally:
        engine.dispose()
