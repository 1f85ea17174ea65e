"""Several Pulsar clusters from one Airflow: two simulated clusters, two admin Connections, two DAGs that
plan and execute independently. Real Airflow (one DAG run in-process with dag.test, the other in an
``airflow dags test`` subprocess, as two workers would), real spark-submit, real Postgres, real HTTP.

Both runs get the same Airflow run id (``manual__<time>``, as two DAGs' scheduled runs of one hour do):
the state DB must still keep them apart (each cluster's DAG records its runs as ``<run id>@<name>``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pendulum
import pytest

from tests.orchestration.test_dag_e2e import ROOT, _ownership, _q, airflow_api
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800, method="thread")]
WEST_CLIENT_ID = "rebalancer-west"
WEST_SECRET = "w3st-S3cr3t-never-logged-5e1f"

GATED = (
    "SELECT p.plan_id, p.gate, p.content_hash, p.status, p.run_id FROM plans p JOIN clusters c ON c.id = p.cluster_id "
    "WHERE c.name = :cluster AND p.gate IS NOT NULL ORDER BY p.created_at DESC LIMIT 1"
)


@pytest.fixture
def two_clusters(db_url, tmp_path, monkeypatch):
    """Two simulated Pulsar clusters (``east``, ``west``: different brokers, loads and names) behind the
    Connections ``pulsar_admin_east`` (no auth) and ``pulsar_admin_west`` (OAuth2 client credentials, its
    simulator refusing anything else); no ``pulsar_admin_default``."""
    from pulsar_rebalance.simulator.generator import generate_cluster
    from pulsar_rebalance.simulator.server import OAuth2Issuer, SimulatedPulsar

    issuer = OAuth2Issuer(WEST_CLIENT_ID, WEST_SECRET)
    with (
        SimulatedPulsar(generate_cluster(seed=42, cluster="east"), ephemeral=True) as east,
        SimulatedPulsar(generate_cluster(seed=7, cluster="west", brokers=4), ephemeral=True, oauth2=issuer) as west,
    ):
        monkeypatch.setenv("AIRFLOW_CONN_PULSAR_ADMIN_EAST", json.dumps({"conn_type": "http", "host": east.admin_url}))
        monkeypatch.setenv(
            "AIRFLOW_CONN_PULSAR_ADMIN_WEST",
            json.dumps(
                {
                    "conn_type": "http",
                    "host": west.admin_url,
                    "login": WEST_CLIENT_ID,
                    "password": WEST_SECRET,
                    "extra": {"auth": "oauth2", "issuer_url": west.issuer_url},
                }
            ),
        )
        monkeypatch.delenv("AIRFLOW_CONN_PULSAR_ADMIN_DEFAULT", raising=False)
        monkeypatch.setenv(
            "AIRFLOW_CONN_PULSAR_REBALANCE_DB", json.dumps({"conn_type": "postgres", "extra": {"url": db_url}})
        )
        monkeypatch.setenv("PULSAR_REBALANCE_DATABASE_URL", db_url)
        monkeypatch.setenv("PULSAR_REBALANCE_WORK_DIR", str(tmp_path / "work"))
        yield {"east": east, "west": west}, db_url


def _gated(db_url: str, cluster: str) -> dict | None:
    rows = _q(db_url, GATED, cluster=cluster)
    return rows[0] if rows else None


def _answer(row: dict, verb: str = "approve") -> None:
    """Answer a plan's Airflow gate as ``alice`` the UI's way (PATCH of the gate's HITL detail)."""
    from pulsar_rebalance.cli import airflow_api as api

    r = airflow_api("alice").patch(
        api.hitl_path(row["gate"]),
        json={
            "chosen_options": ["Approve" if verb == "approve" else "Reject"],
            "params_input": {"comment": f"{verb} in test", "plan_hash": row["content_hash"]},
        },
    )
    assert r.status_code == 200, r.text


def _moved_as_planned(db_url: str, plan_id: str, before: dict, after: dict) -> None:
    """Every bundle of ``plan_id``'s unloads is on its planned destination, and no other bundle moved."""
    unloads = _q(
        db_url,
        "SELECT bundle, destination_broker, state FROM plan_actions WHERE plan_id = :p AND kind = 'unload'",
        p=plan_id,
    )
    assert unloads and all(u["state"] == "completed" for u in unloads), unloads
    splits = _q(db_url, "SELECT count(*) AS n FROM plan_actions WHERE plan_id = :p AND kind = 'split'", p=plan_id)
    moved = {u["bundle"]: u["destination_broker"] for u in unloads}
    own_before, own_after = _ownership(before), _ownership(after)
    for bundle, owner in own_after.items():
        if bundle in moved:
            assert owner == moved[bundle], bundle
        elif bundle in own_before and not splits[0]["n"]:
            assert owner == own_before[bundle], f"{bundle} moved without being in plan {plan_id}"


def test_two_clusters_get_two_dags_that_plan_and_execute_independently(airflow_db, two_clusters, tmp_path):
    from airflow.dag_processing.dagbag import DagBag

    sims, db_url = two_clusters
    bag = DagBag(dag_folder=str(ROOT / "dags"))
    assert bag.import_errors == {}
    assert {"pulsar_rebalance", "pulsar_rebalance_east", "pulsar_rebalance_west"} <= set(bag.dag_ids)
    east_dag = bag.get_dag("pulsar_rebalance_east")
    assert {t.admin_conn_id for t in east_dag.tasks if hasattr(t, "admin_conn_id")} == {"pulsar_admin_east"}

    before = {name: sim.state.snapshot() for name, sim in sims.items()}
    conf = {"shedding_strategy": "ThresholdShedder", "approval_timeout_minutes": 30}

    # west: a worker process runs its DAG; its plan reaches the gate and waits there
    log_path = tmp_path / "west-dags-test.log"
    with open(log_path, "wb") as log:
        west_run = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "airflow"),
                "dags",
                "test",
                "pulsar_rebalance_west",
                "-c",
                json.dumps(conf),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(os.environ),
            start_new_session=True,  # `airflow dags test` ignores SIGTERM: its group is SIGKILLed on failure
        )
    try:
        wait_for(
            lambda: _gated(db_url, "west") is not None or west_run.poll() is not None,
            900,
            "west's plan at its Airflow gate",
            every=0.5,
        )
        west = _gated(db_url, "west")
        assert west is not None, log_path.read_text()[-3000:]
        assert west["status"] == "pending" and west["gate"]["dag_id"] == "pulsar_rebalance_west"
        assert west["run_id"] == f"{west['gate']['run_id']}@west"

        # east: plans and executes while west's plan waits at its gate
        import threading

        answered: dict = {}

        def approve_east() -> None:
            try:
                wait_for(lambda: _gated(db_url, "east") is not None, 900, "east's plan at its gate", every=0.5)
                row = _gated(db_url, "east")
                answered["east"] = row
                _answer(row)
            except Exception as exc:  # surfaced below
                answered["error"] = exc

        approver = threading.Thread(target=approve_east, daemon=True)
        approver.start()
        # the same run id as west's: Airflow names a test run manual__<run_after>
        same_time = pendulum.parse(west["gate"]["run_id"].removeprefix("manual__"))
        dr = bag.get_dag("pulsar_rebalance_east").test(run_conf=conf, run_after=same_time, logical_date=same_time)
        approver.join(timeout=60)
        assert "error" not in answered, answered.get("error")
        assert dr.state == "success" and dr.run_id == west["gate"]["run_id"]  # the very same Airflow run id
        assert {ti.task_id: ti.state for ti in dr.get_task_instances()}["execute_unload"] == "success"
        east = answered["east"]
        assert east["run_id"] == dr.run_id + "@east" and east["gate"]["dag_id"] == "pulsar_rebalance_east"
        assert _q(db_url, "SELECT status FROM plans WHERE plan_id = :p", p=east["plan_id"])[0]["status"] == "executed"
        east_after = sims["east"].state.snapshot()
        _moved_as_planned(db_url, east["plan_id"], before["east"], east_after)
        # west still waits, untouched
        assert _q(db_url, "SELECT status FROM plans WHERE plan_id = :p", p=west["plan_id"])[0]["status"] == "pending"
        assert west_run.poll() is None
        assert _ownership(sims["west"].state.snapshot()) == _ownership(before["west"])
        assert sims["west"].executed() == []

        # now west is approved and executes; east does not move again
        _answer(west)
        west_run.wait(timeout=900)
        assert west_run.returncode == 0, log_path.read_text()[-3000:]
    finally:
        if west_run.poll() is None:
            os.killpg(west_run.pid, signal.SIGKILL)
            west_run.wait(timeout=30)
    assert _q(db_url, "SELECT status FROM plans WHERE plan_id = :p", p=west["plan_id"])[0]["status"] == "executed"
    _moved_as_planned(db_url, west["plan_id"], before["west"], sims["west"].state.snapshot())
    assert _ownership(sims["east"].state.snapshot()) == _ownership(east_after)
    assert sims["west"].tokens_issued >= 1  # west's jobs authenticated with its Connection's client credentials
    assert WEST_SECRET not in log_path.read_text()

    # the gate guard maps each state-DB run back to its own DAG's Airflow run, the run ids being the same
    from airflow.utils.session import create_session

    from pulsar_rebalance.orchestration.gate_guard import _airflow_runs

    with create_session() as session:
        runs = {
            key: (run.dag_id, run.run_id)
            for key, run in _airflow_runs(session, {east["run_id"], west["run_id"]}).items()
        }
    assert runs == {
        east["run_id"]: ("pulsar_rebalance_east", dr.run_id),
        west["run_id"]: ("pulsar_rebalance_west", dr.run_id),
    }

    # each plan is its own cluster's, with its own runs, and the lists filter by cluster
    clusters = _q(db_url, "SELECT c.name, r.run_id FROM runs r JOIN clusters c ON c.id = r.cluster_id ORDER BY c.name")
    assert clusters == [
        {"name": "east", "run_id": east["run_id"]},
        {"name": "west", "run_id": west["run_id"]},
    ]
    east_brokers = set(sims["east"].broker_ids)
    west_actions = _q(
        db_url, "SELECT source_broker, destination_broker FROM plan_actions WHERE plan_id = :p", p=west["plan_id"]
    )
    assert not {b for a in west_actions for b in a.values() if b} & east_brokers

    from pulsar_rebalance.orchestration.ui.app import airflow_run
    from pulsar_rebalance.store import queries
    from pulsar_rebalance.store import repository as repo
    from pulsar_rebalance.store.engine import make_engine, session_scope

    engine = make_engine(db_url)
    try:
        with session_scope(engine) as s:
            assert [r.plan_id for r in queries.list_plan_rows(s, cluster="west")] == [west["plan_id"]]
            assert [r.cluster for r in queries.list_plan_rows(s, cluster="east")] == ["east"]
            assert airflow_run(repo.get_plan(s, plan_id=west["plan_id"])) == ("pulsar_rebalance_west", dr.run_id)
    finally:
        engine.dispose()
