"""The approval gate's decisions against a real Postgres: opening the gate, the auto-approval policy,
the guard's checks before Airflow accepts an answer, and recording the answer (no DAG run needed;
the whole gate in a DAG run is in test_dag_e2e.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from pulsar_rebalance.store import repository as repo
from pulsar_rebalance.store.engine import make_engine, session_scope

pytestmark = pytest.mark.timeout(120)
GATE = {"dag_id": "pulsar_rebalance", "run_id": "run-a", "task_id": "await_approval", "map_index": -1}


@pytest.fixture
def gate_db(db_url, monkeypatch):
    monkeypatch.setenv(
        "AIRFLOW_CONN_PULSAR_REBALANCE_DB", json.dumps({"conn_type": "postgres", "extra": {"url": db_url}})
    )
    with session_scope(make_engine(db_url)) as s:
        cid = repo.get_or_create_cluster(s, name="c1", admin_url="http://pulsar:8080")
    return db_url, cid


UNLOAD = {
    "kind": "unload",
    "bundle": "public/default/0x00000000_0x40000000",
    "source_broker": "b1:8080",
    "destination_broker": "b2:8080",
    "reason": "b1 overloaded",
}
SPLIT = {
    "kind": "split",
    "bundle": "public/default/0x40000000_0x80000000",
    "source_broker": "b1:8080",
    "boundaries": [0x60000000],
    "reason": "hot bundle",
    "seq": 1,
}


def _plan(db_url, cid, run_id, *, expires_in: float, actions=(UNLOAD,), required_approvals: int = 1) -> str:
    with session_scope(make_engine(db_url)) as s:
        repo.start_run(s, run_id=run_id, cluster_id=cid, params={}, work_dir="/tmp/w")
        return repo.create_plan(
            s,
            run_id=run_id,
            cluster_id=cid,
            status="pending" if actions else "empty",
            expires_at=datetime.now(UTC) + timedelta(seconds=expires_in),
            dry_run=False,
            strategies={},
            config={},
            summary={},
            decision={},
            actions=list(actions),
            required_approvals=required_approvals,
        )


def test_opening_the_gate_marks_the_plan_and_the_body_shows_it(gate_db):
    from pulsar_rebalance.orchestration.approval import gate_body, open_gate_for_run

    db_url, cid = gate_db
    plan_id = _plan(db_url, cid, "run-a", expires_in=600, actions=(UNLOAD, SPLIT))
    state, plan = open_gate_for_run(db_url, "run-a", GATE)
    assert state["status"] == "pending" and plan.gate == GATE
    body = gate_body(plan, cluster="c1")
    assert f"**Plan `{plan_id}`** for cluster **c1**: 1 unload(s), 1 split(s)" in body
    assert "b1:8080 → b2:8080" in body and "0x60000000" in body and "b1 overloaded" in body
    assert f"/pulsar-rebalance/plans/{plan_id}" in body and plan.content_hash[:12] in body


def test_auto_approval_policy_approves_only_small_unload_only_plans(gate_db):
    from pulsar_rebalance.orchestration.approval import open_gate_for_run

    db_url, cid = gate_db
    _plan(db_url, cid, "run-a", expires_in=600)
    state, plan = open_gate_for_run(db_url, "run-a", GATE, auto_approve_max_unloads=1)
    assert (state["status"], state["decided_by"], state["via"]) == ("approved", "policy:auto-approve", "policy")
    assert "1 unload(s) <= 1, no split" in plan.approval.comment and plan.gate is None
    _plan(db_url, cid, "run-b", expires_in=600, actions=(UNLOAD, SPLIT))  # a split is never auto-approved
    state, plan = open_gate_for_run(db_url, "run-b", dict(GATE, run_id="run-b"), auto_approve_max_unloads=5)
    assert state["status"] == "pending" and plan.gate["run_id"] == "run-b"


def test_an_expired_plan_is_expired_when_the_gate_opens_not_gated(gate_db):
    from pulsar_rebalance.orchestration.approval import open_gate_for_run

    db_url, cid = gate_db
    _plan(db_url, cid, "run-a", expires_in=-1)
    state, plan = open_gate_for_run(db_url, "run-a", GATE)
    assert state["status"] == "expired" and plan.gate is None


@pytest.mark.parametrize("case", ["expired", "superseded", "decided", "changed", "ok"])
def test_guard_refuses_answers_to_a_plan_that_cannot_be_decided_saying_which(gate_db, case):
    from pulsar_rebalance.orchestration.approval import open_gate_for_run
    from pulsar_rebalance.orchestration.gate_guard import precheck, record

    db_url, cid = gate_db
    plan_id = _plan(db_url, cid, "run-a", expires_in=600)
    state, plan = open_gate_for_run(db_url, "run-a", GATE)
    digest = plan.content_hash
    with session_scope(make_engine(db_url)) as s:
        if case == "expired":
            repo.expire_plan(s, plan_id=plan_id, now=datetime.now(UTC) + timedelta(hours=1))
        elif case == "decided":
            repo.decide_plan(s, plan_id=plan_id, decision="rejected", decided_by="bob", via="airflow-gate")
    if case == "superseded":
        newer = _plan(db_url, cid, "run-b", expires_in=600)
    if case == "changed":
        digest = "f" * 64
    found, refusal = precheck(db_url, "pulsar_rebalance", "run-a", "await_approval", digest)
    assert found == plan_id
    expected = {
        "expired": "expired at",
        "superseded": "superseded by plan",
        "decided": "already rejected (rejected by bob",
        "changed": "reload the plan and decide again",
        "ok": None,
    }[case]
    if expected is None:
        assert refusal is None
        assert record(db_url, plan_id, decision="approved", decided_by="alice", comment="go", plan_hash=digest) is None
        with session_scope(make_engine(db_url)) as s:
            a = repo.get_plan(s, plan_id=plan_id).approval
        assert (a.decision, a.decided_by, a.via, a.plan_hash, a.comment) == (
            "approved",
            "alice",
            "airflow-gate",
            digest,
            "go",
        )
    else:
        assert expected in refusal
        if case == "superseded":
            assert newer in refusal
    assert precheck(db_url, "other_dag", "run-a", "await_approval", None) == (None, None)  # not one of our gates


def test_gate_decision_recorded_when_the_task_resumes_if_no_guard_did(gate_db):
    from pulsar_rebalance.orchestration.approval import open_gate_for_run, record_gate_decision

    db_url, cid = gate_db
    _plan(db_url, cid, "run-a", expires_in=600)
    _, plan = open_gate_for_run(db_url, "run-a", GATE)
    state = record_gate_decision(
        db_url, "run-a", decision="approved", decided_by="carol", comment=None, plan_hash=plan.content_hash
    )
    assert (state["status"], state["decided_by"], state["message"]) == ("approved", "carol", None)
    again = record_gate_decision(
        db_url, "run-a", decision="approved", decided_by="carol", comment=None, plan_hash=plan.content_hash
    )  # idempotent (a retried resume)
    assert again["status"] == "approved" and again["message"] is None


def test_an_answer_after_the_plan_expired_is_not_applied_and_says_so(gate_db):
    from pulsar_rebalance.orchestration.approval import open_gate_for_run, record_gate_decision

    db_url, cid = gate_db
    plan_id = _plan(db_url, cid, "run-a", expires_in=600)
    open_gate_for_run(db_url, "run-a", GATE)
    late = datetime.now(UTC) + timedelta(hours=2)
    state = record_gate_decision(
        db_url, "run-a", decision="approved", decided_by="dave", comment=None, plan_hash=None, responded_at=late
    )
    assert state["status"] == "expired"
    assert f"the answer of dave at the gate was not applied: plan {plan_id} expired" in state["message"]


def test_a_second_approver_at_the_gate_must_be_another_person(gate_db):
    """Four eyes at the gate: the first approval is a vote (the gate opens again), the same person is
    refused before Airflow stores anything, another person's approval decides; no auto-approval."""
    from pulsar_rebalance.orchestration.approval import gate_body, open_gate_for_run, record_gate_decision
    from pulsar_rebalance.orchestration.gate_guard import precheck, record, waiting_for_next_approver

    db_url, cid = gate_db
    plan_id = _plan(db_url, cid, "run-a", expires_in=600, required_approvals=2)
    state, plan = open_gate_for_run(db_url, "run-a", GATE, auto_approve_max_unloads=5)
    assert state["status"] == "pending" and plan.gate  # one small unload, but a machine is not a second person
    assert "Needs 2 approvals from different people" in gate_body(plan)
    assert waiting_for_next_approver(db_url, plan_id) is None

    assert precheck(
        db_url, "pulsar_rebalance", "run-a", "await_approval", plan.content_hash, voter="alice", decision="approved"
    ) == (plan_id, None)
    assert (
        record(db_url, plan_id, decision="approved", decided_by="alice", comment="ok", plan_hash=plan.content_hash)
        is None
    )
    resumed = record_gate_decision(
        db_url, "run-a", decision="approved", decided_by="alice", comment="ok", plan_hash=plan.content_hash
    )  # the task resumes: a vote, not a decision
    assert (resumed["status"], resumed["approvals"], resumed["required_approvals"]) == ("pending", ["alice"], 2)
    assert "1 of 2 approvals (alice)" in waiting_for_next_approver(db_url, plan_id)

    _, refusal = precheck(
        db_url, "pulsar_rebalance", "run-a", "await_approval", plan.content_hash, voter="alice", decision="approved"
    )
    assert "already has your approval (alice)" in refusal and "another approver must decide" in refusal
    assert precheck(
        db_url, "pulsar_rebalance", "run-a", "await_approval", plan.content_hash, voter="alice", decision="rejected"
    ) == (plan_id, None)  # anyone may still stop it

    assert (
        record(db_url, plan_id, decision="approved", decided_by="bob", comment="agreed", plan_hash=plan.content_hash)
        is None
    )
    final = record_gate_decision(
        db_url, "run-a", decision="approved", decided_by="bob", comment="agreed", plan_hash=plan.content_hash
    )
    assert (final["status"], final["decided_by"], final["message"]) == ("approved", "alice + bob", None)
    with session_scope(make_engine(db_url)) as s:
        done = repo.get_plan(s, plan_id=plan_id)
    assert [(v.voter, v.via) for v in done.votes] == [("alice", "airflow-gate"), ("bob", "airflow-gate")]
