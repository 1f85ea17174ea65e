"""The approval gate's trigger and sensor outcomes against a real Postgres (no DAG run needed)."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import pytest

from pulsar_rebalance.store import repository as repo
from pulsar_rebalance.store.engine import make_engine, session_scope

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def gate_db(db_url, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_PULSAR_REBALANCE_DB", json.dumps({"conn_type": "postgres", "extra": {"url": db_url}}))
    with session_scope(make_engine(db_url)) as s:
        cid = repo.get_or_create_cluster(s, name="c1", admin_url="http://pulsar:8080")
    return db_url, cid


def _plan(db_url, cid, run_id, *, expires_in: float, actions=True) -> str:
    with session_scope(make_engine(db_url)) as s:
        repo.start_run(s, run_id=run_id, cluster_id=cid, params={}, work_dir="/tmp/w")
        return repo.create_plan(
            s, run_id=run_id, cluster_id=cid, status="pending" if actions else "empty",
            expires_at=datetime.now(UTC) + timedelta(seconds=expires_in), dry_run=False, strategies={}, config={},
            summary={}, decision={},
            actions=[{"kind": "unload", "bundle": "public/default/0x00000000_0x40000000", "source_broker": "b1:8080",
                      "destination_broker": "b2:8080", "reason": "b1 overloaded"}] if actions else [],
        )


async def _first_event(trigger, timeout: float = 60):
    async def first():
        async for event in trigger.run():
            return event.payload

    return await asyncio.wait_for(first(), timeout)


def test_trigger_fires_when_the_plan_is_approved(gate_db):
    from pulsar_rebalance.cli.plans import decide
    from pulsar_rebalance.orchestration.approval import PlanApprovalTrigger

    db_url, cid = gate_db
    plan_id = _plan(db_url, cid, "run-a", expires_in=600)

    async def scenario():
        task = asyncio.create_task(_first_event(PlanApprovalTrigger("run-a", poll_interval=0.2)))
        await asyncio.sleep(0.5)
        assert not task.done()  # still waiting: nobody decided yet
        import os
        os.environ["PULSAR_REBALANCE_DATABASE_URL"] = db_url
        try:
            await asyncio.to_thread(decide, plan_id, "approved", by="dave", comment="go")
        finally:
            del os.environ["PULSAR_REBALANCE_DATABASE_URL"]
        return await task

    event = asyncio.run(scenario())
    assert event == {"status": "approved", "plan_id": plan_id, "decision": "approved", "decided_by": "dave", "comment": "go"}
    assert PlanApprovalTrigger("run-a", 0.2).serialize() == (
        "pulsar_rebalance.orchestration.approval.PlanApprovalTrigger", {"run_id": "run-a", "poll_interval": 0.2})


def test_trigger_expires_an_undecided_plan_and_records_it(gate_db):
    from pulsar_rebalance.orchestration.approval import PlanApprovalTrigger

    db_url, cid = gate_db
    plan_id = _plan(db_url, cid, "run-b", expires_in=1.0)
    event = asyncio.run(_first_event(PlanApprovalTrigger("run-b", poll_interval=0.2)))
    assert event["status"] == "expired" and event["plan_id"] == plan_id
    with session_scope(make_engine(db_url)) as s:
        plan = repo.get_plan(s, plan_id=plan_id)
    assert plan.status == "expired" and plan.approval.decision == "expired"


@pytest.mark.parametrize("state, skipped", [
    ({"status": "empty", "plan_id": "p"}, "Nothing to do"),
    ({"status": "rejected", "plan_id": "p", "decided_by": "erin"}, "was rejected by erin"),
    ({"status": "expired", "plan_id": "p"}, "was expired"),
])
def test_sensor_skips_execution_when_there_is_nothing_approved(state, skipped):
    from airflow.sdk.exceptions import AirflowSkipException

    from pulsar_rebalance.orchestration.approval import PlanApprovalSensor

    sensor = PlanApprovalSensor(task_id="await_approval")
    with pytest.raises(AirflowSkipException, match=skipped):
        sensor.execute_complete({}, state)
    approved = {"status": "approved", "plan_id": "p", "decided_by": "f"}
    assert sensor.execute_complete({}, approved) == approved
