"""Plans: idempotent creation, approval decisions and their errors, immutability, the action state machine."""

from __future__ import annotations

import itertools
import threading
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from pulsar_rebalance.core.plan import Prediction, SplitAction, UnloadAction, UsageChange
from pulsar_rebalance.errors import (
    ExecutionInProgressError,
    InvalidTransitionError,
    PlanAlreadyApprovedByYouError,
    PlanAlreadyDecidedError,
    PlanAtGateError,
    PlanChangedError,
    PlanExpiredError,
    PlanStateError,
    PlanSupersededError,
    UnknownPlanError,
)
from pulsar_rebalance.store import ALLOWED_TRANSITIONS, InvalidRowError, UnknownRunError, session_scope
from pulsar_rebalance.store import repository as repo
from pulsar_rebalance.store.tables import ACTION_STATES

BUNDLE = "public/default/0x00000000_0x80000000"


def _count(engine, table: str) -> int:
    with engine.connect() as conn:
        return int(conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())


# ------------------------------------------------------------------------------------------ create


def test_create_plan_is_idempotent_per_run(world, make_plan, unload) -> None:
    first = make_plan()
    second = make_plan(actions=[unload(BUNDLE, reason="a different retry")])
    assert first == second
    assert first.startswith("p-") and len(first) == len("p-20260101-abcdef")
    with session_scope(world.engine) as s:
        plan = repo.plan_for_run(s, run_id=world.run_id)
        assert repo.plan_for_run(s, run_id="no-such-run") is None
    assert plan is not None and plan.plan_id == first
    assert [a.reason for a in plan.actions] == ["b1 overloaded"]
    assert plan.status == "pending" and plan.approval is None
    assert plan.config_hash == repo.config_hash({"loadBalancerBrokerThresholdShedderPercentage": 10})
    assert _count(world.engine, "plans") == 1 and _count(world.engine, "plan_actions") == 1


@pytest.mark.timeout(60)
def test_concurrent_creators_of_one_run_get_the_same_plan(world) -> None:
    """Two attempts of the same task racing: the unique run_id makes the second wait, then return the first."""
    barrier = threading.Barrier(2, timeout=20)
    results: list[str] = []
    errors: list[BaseException] = []

    def create() -> None:
        try:
            with session_scope(world.engine) as s:
                s.execute(text("SET LOCAL lock_timeout = '20s'"))
                barrier.wait()
                results.append(
                    repo.create_plan(
                        s,
                        run_id=world.run_id,
                        cluster_id=world.cluster_id,
                        status="empty",
                        expires_at=None,
                        dry_run=True,
                        strategies=["ThresholdShedder"],
                        config={},
                        summary={},
                        decision={},
                        actions=[],
                    )  # fmt: skip
                )
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=create) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=40)
    assert not errors, errors
    assert len(results) == 2 and results[0] == results[1]
    assert _count(world.engine, "plans") == 1


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"kind": "move"}, "actions[0].kind"),
        ({"bundle": "public/default"}, "actions[0].bundle"),
        ({"reason": " "}, "actions[0].reason"),
        ({"boundaries": [5]}, "actions[0].boundaries"),
        ({"colour": "red"}, "actions[0].colour"),
        ({"predicted": {"x": float("nan")}}, "actions[0].predicted"),
    ],
)
def test_bad_actions_name_the_field_and_write_nothing(world, unload, change: dict, field: str) -> None:
    action = {**unload(BUNDLE), **change}
    with pytest.raises(InvalidRowError) as info, session_scope(world.engine) as s:
        repo.create_plan(
            s, run_id=world.run_id, cluster_id=world.cluster_id, status="pending", expires_at=None, dry_run=False,
            strategies={}, config={}, summary={}, decision={}, actions=[action],
        )  # fmt: skip
    assert info.value.field == field
    assert _count(world.engine, "plans") == 0 and _count(world.engine, "audit_log") == 0


def test_create_plan_checks_status_and_run(world, unload) -> None:
    common = dict(cluster_id=world.cluster_id, expires_at=None, dry_run=False, strategies={}, config={}, summary={},
                  decision={})  # fmt: skip
    with session_scope(world.engine) as s:
        with pytest.raises(InvalidRowError, match="at least one action"):
            repo.create_plan(s, run_id=world.run_id, status="pending", actions=[], **common)
        with pytest.raises(InvalidRowError, match="an empty plan has no actions"):
            repo.create_plan(s, run_id=world.run_id, status="empty", actions=[unload(BUNDLE)], **common)
        with pytest.raises(InvalidRowError, match="'pending' or 'empty'"):
            repo.create_plan(s, run_id=world.run_id, status="approved", actions=[unload(BUNDLE)], **common)
        with pytest.raises(UnknownRunError):
            repo.create_plan(s, run_id="never-started", status="pending", actions=[unload(BUNDLE)], **common)


def test_typed_actions_are_stored_as_their_rows_and_read_back_as_the_same_plan(world, make_plan) -> None:
    split = SplitAction(
        seq=0,
        namespace="public/default",
        bundle_range="0x00000000_0x80000000",
        source_broker="b1:8080",
        boundaries=(0x40000000,),
        split_algorithm="range_equally_divide",
        reason="hot bundle",
        predicted=Prediction(details={"children": ["0x00000000_0x40000000", "0x40000000_0x80000000"]}),
    )
    move = UnloadAction(
        seq=1,
        namespace="public/default",
        bundle_range="0x40000000_0x80000000",
        source_broker="b1:8080",
        destination_broker="b2:8080",
        reason="b1 overloaded",
        predicted=Prediction(
            bundle_load={"msgRateIn": 10.0, "topics": 2},
            source=UsageChange(broker="b1:8080", before=0.9, after=0.6),
            destination=UsageChange(broker="b2:8080", before=0.1, after=0.4),
        ),
    )
    typed_id = make_plan(actions=[split, move])
    with session_scope(world.engine) as s:
        repo.start_run(s, run_id="run-2", cluster_id=world.cluster_id)
    as_rows_id = make_plan(run_id="run-2", actions=[split.to_row(), move.to_row()])
    with session_scope(world.engine) as s:
        typed, as_rows = repo.get_plan(s, plan_id=typed_id), repo.get_plan(s, plan_id=as_rows_id)
    assert [a.planned for a in typed.actions] == [split, move] == [a.planned for a in as_rows.actions]
    assert typed.actions[1].predicted == move.predicted.to_json()
    planned = typed.to_plan(cluster="c1")
    assert planned.actions == (split, move) and planned.cluster == "c1" and planned.run_id == world.run_id
    assert (
        typed.content_hash
        == planned.content_hash()
        == repo.plan_content_hash(run_id=typed.run_id, dry_run=typed.dry_run, actions=typed.actions)
    )


@pytest.mark.parametrize(
    ("actions", "field"),
    [
        ([{"kind": "split", "bundle": BUNDLE, "source_broker": "b1:8080", "reason": "hot"}], "actions[0].boundaries"),
        (
            [
                {
                    "kind": "split",
                    "bundle": BUNDLE,
                    "source_broker": "b1:8080",
                    "reason": "hot",
                    "boundaries": [0x40000000],
                },
                {
                    "kind": "unload",
                    "bundle": BUNDLE,
                    "source_broker": "b1:8080",
                    "destination_broker": "b2:8080",
                    "reason": "also moved",
                },
            ],
            "actions[1].bundle_range",
        ),
        (
            [
                {
                    "kind": "unload",
                    "bundle": BUNDLE,
                    "source_broker": "b1:8080",
                    "destination_broker": "b1:8080",
                    "reason": "nowhere",
                }
            ],
            "actions[0].destination_broker",
        ),
        (["unload it"], "actions[0]"),
    ],
)
def test_actions_that_cannot_run_are_refused_naming_the_field_and_nothing_is_written(world, actions, field) -> None:
    with pytest.raises(InvalidRowError) as info, session_scope(world.engine) as s:
        repo.create_plan(
            s, run_id=world.run_id, cluster_id=world.cluster_id, status="pending", expires_at=None, dry_run=False,
            strategies={}, config={}, summary={}, decision={}, actions=actions,
        )  # fmt: skip
    assert info.value.field == field
    assert _count(world.engine, "plans") == 0 and _count(world.engine, "plan_actions") == 0


def test_explicit_plan_id_collision_is_an_error(world, make_plan) -> None:
    with session_scope(world.engine) as s:
        repo.start_run(s, run_id="run-2", cluster_id=world.cluster_id)
        repo.create_plan(s, plan_id="p-fixed", run_id=world.run_id, cluster_id=world.cluster_id, status="empty",
                         expires_at=None, dry_run=False, strategies={}, config={}, summary={}, decision={}, actions=[])  # fmt: skip
    with pytest.raises(InvalidRowError, match="already used by another run"), session_scope(world.engine) as s:
        repo.create_plan(s, plan_id="p-fixed", run_id="run-2", cluster_id=world.cluster_id, status="empty",
                         expires_at=None, dry_run=False, strategies={}, config={}, summary={}, decision={}, actions=[])  # fmt: skip


# ------------------------------------------------------------------------------------------ decide


def test_approve_records_approval_status_and_audit(world, make_plan) -> None:
    plan_id = make_plan()
    with session_scope(world.engine) as s:
        approval = repo.decide_plan(s, plan_id=plan_id, decision="approved", decided_by="alice", comment="ok")
    with session_scope(world.engine) as s:
        plan = repo.get_plan(s, plan_id=plan_id)
        events = repo.audit_events(s, plan_id=plan_id)
    assert plan.status == "approved"
    assert plan.approval == approval and approval.decided_by == "alice" and approval.comment == "ok"
    assert [(e["event"], e["actor"]) for e in events] == [("plan.created", "system"), ("plan.approved", "alice")]
    assert plan.as_dict()["approval"]["decided_at"] == approval.decided_at.isoformat()


def test_a_plan_needing_two_approvers_waits_for_a_second_different_person(world, make_plan) -> None:
    plan_id = make_plan(required_approvals=2)
    with session_scope(world.engine) as s:
        first = repo.decide_plan(s, plan_id=plan_id, decision="approved", decided_by="alice", comment="looks right")
    assert not first.final and first.votes == ("alice",) and first.required_approvals == 2
    with session_scope(world.engine) as s:
        plan = repo.get_plan(s, plan_id=plan_id)
    assert plan.status == "pending" and plan.approval is None
    assert [(v.voter, v.comment, v.via) for v in plan.votes] == [("alice", "looks right", "cli")]

    with pytest.raises(PlanAlreadyApprovedByYouError) as info, session_scope(world.engine) as s:
        repo.decide_plan(s, plan_id=plan_id, decision="approved", decided_by="alice")
    assert "already has the approval of alice" in str(info.value) and "2 approvals from different people" in str(
        info.value
    )
    assert _count(world.engine, "approval_votes") == 1  # the refused repeat wrote nothing

    with session_scope(world.engine) as s:
        second = repo.decide_plan(s, plan_id=plan_id, decision="approved", decided_by="bob", comment="agreed")
    assert second.final and second.decided_by == "alice + bob"
    with session_scope(world.engine) as s:
        plan = repo.get_plan(s, plan_id=plan_id)
        events = repo.audit_events(s, plan_id=plan_id)
    assert plan.status == "approved" and plan.approval == second
    assert [v.voter for v in plan.votes] == ["alice", "bob"]
    assert [(e["event"], e["actor"]) for e in events] == [
        ("plan.created", "system"),
        ("plan.approval_vote", "alice"),
        ("plan.approved", "alice + bob"),
    ]
    with pytest.raises(PlanAlreadyDecidedError, match="approved by alice \\+ bob"), session_scope(world.engine) as s:
        repo.decide_plan(s, plan_id=plan_id, decision="approved", decided_by="carol")


def test_one_rejection_ends_a_plan_that_needs_two_approvers(world, make_plan) -> None:
    plan_id = make_plan(required_approvals=2)
    with session_scope(world.engine) as s:
        repo.decide_plan(s, plan_id=plan_id, decision="approved", decided_by="alice")
    with session_scope(world.engine) as s:
        rejected = repo.decide_plan(s, plan_id=plan_id, decision="rejected", decided_by="bob", comment="not now")
    assert rejected.final and rejected.decided_by == "bob"
    with session_scope(world.engine) as s:
        assert repo.get_plan(s, plan_id=plan_id).status == "rejected"


@pytest.mark.parametrize("bad", [0, 6, "2", True, 1.5])
def test_required_approvals_is_validated_and_votes_are_immutable(world, make_plan, bad) -> None:
    with pytest.raises(InvalidRowError, match="required_approvals"):
        make_plan(required_approvals=bad)
    assert _count(world.engine, "plans") == 0
    plan_id = make_plan(required_approvals=2)
    with session_scope(world.engine) as s:
        repo.decide_plan(s, plan_id=plan_id, decision="approved", decided_by="alice")
    with pytest.raises(Exception, match="immutable"), world.engine.begin() as conn:
        conn.execute(text("UPDATE approval_votes SET voter = 'mallory'"))
    with pytest.raises(Exception, match="immutable"), world.engine.begin() as conn:
        conn.execute(text("UPDATE plans SET required_approvals = 1"))


def test_decide_unknown_plan(world) -> None:
    with pytest.raises(UnknownPlanError, match="p-nope") as info, session_scope(world.engine) as s:
        repo.decide_plan(s, plan_id="p-nope", decision="approved", decided_by="alice")
    assert info.value.plan_id == "p-nope"
    with pytest.raises(UnknownPlanError), session_scope(world.engine) as s:
        repo.get_plan(s, plan_id="p-nope")


def test_decide_twice_says_who_decided_when(world, make_plan) -> None:
    plan_id = make_plan()
    when = datetime.now(UTC)
    with session_scope(world.engine) as s:
        repo.decide_plan(s, plan_id=plan_id, decision="rejected", decided_by="bob", now=when)
    with pytest.raises(PlanAlreadyDecidedError) as info, session_scope(world.engine) as s:
        repo.decide_plan(s, plan_id=plan_id, decision="approved", decided_by="alice")
    message = str(info.value)
    assert f"plan {plan_id} is already rejected" in message
    assert "rejected by bob at" in message and when.strftime("%Y-%m-%d %H:%M:%S") in message


def test_decide_after_expiry_records_the_expiry_durably(world, make_plan) -> None:
    expires = datetime.now(UTC) + timedelta(minutes=5)
    plan_id = make_plan(expires_at=expires)
    late = expires + timedelta(seconds=1)
    with pytest.raises(PlanExpiredError, match="expired at") as info, session_scope(world.engine) as s:
        repo.decide_plan(s, plan_id=plan_id, decision="approved", decided_by="alice", now=late)
    assert info.value.plan_id == plan_id
    # the caller's transaction was rolled back, yet the expiry is recorded
    with session_scope(world.engine) as s:
        plan = repo.get_plan(s, plan_id=plan_id)
        events = [e["event"] for e in repo.audit_events(s, plan_id=plan_id)]
    assert plan.status == "expired"
    assert plan.approval is not None and (plan.approval.decision, plan.approval.decided_by) == ("expired", "system")
    assert events == ["plan.created", "plan.expired"]
    # and it stays expired: a later attempt gets PlanExpiredError again, not a second approval row
    with pytest.raises(PlanExpiredError), session_scope(world.engine) as s:
        repo.decide_plan(s, plan_id=plan_id, decision="rejected", decided_by="bob", now=late)
    assert _count(world.engine, "approvals") == 1


def test_decide_just_before_expiry_succeeds(world, make_plan) -> None:
    expires = datetime.now(UTC) + timedelta(minutes=5)
    plan_id = make_plan(expires_at=expires)
    with session_scope(world.engine) as s:
        approval = repo.decide_plan(
            s, plan_id=plan_id, decision="approved", decided_by="alice", now=expires - timedelta(microseconds=1)
        )
    assert approval.decision == "approved"


def test_expire_plan_and_sweep(world, make_plan) -> None:
    now = datetime.now(UTC)
    fresh = make_plan(run_id="run-2", expires_at=now + timedelta(hours=1))
    with session_scope(world.engine) as s:
        assert repo.expire_plan(s, plan_id=fresh, now=now) is False  # not due yet
    due = make_plan(expires_at=now - timedelta(seconds=1))  # newer: supersedes `fresh`
    with session_scope(world.engine) as s:
        assert repo.expire_due_plans(s, now=now) == [due]
        assert repo.expire_due_plans(s, now=now) == []
        assert [p.plan_id for p in repo.list_plans(s, status="expired")] == [due]
        assert {p.plan_id for p in repo.list_plans(s)} == {due, fresh}
        with pytest.raises(UnknownPlanError):
            repo.expire_plan(s, plan_id="p-nope")


@pytest.mark.timeout(60)
def test_concurrent_decisions_one_wins(world, make_plan) -> None:
    """Two approvers at once: FOR UPDATE serialises them; exactly one succeeds, the other is told."""
    plan_id = make_plan()
    barrier = threading.Barrier(2, timeout=20)
    outcomes: dict[str, object] = {}

    def decide(who: str, decision: str) -> None:
        try:
            with session_scope(world.engine) as s:
                s.execute(text("SET LOCAL lock_timeout = '20s'"))
                barrier.wait()
                outcomes[who] = repo.decide_plan(s, plan_id=plan_id, decision=decision, decided_by=who)  # type: ignore[arg-type]
        except BaseException as exc:
            outcomes[who] = exc

    threads = [threading.Thread(target=decide, args=a) for a in (("alice", "approved"), ("bob", "rejected"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=40)
    kinds = sorted(type(v).__name__ for v in outcomes.values())
    assert kinds == ["ApprovalView", "PlanAlreadyDecidedError"], outcomes
    assert _count(world.engine, "approvals") == 1


# --------------------------------------------------------------------------------- immutability


def test_plans_and_actions_are_immutable_in_the_database(world, make_plan) -> None:
    plan_id = make_plan()
    for statement in (
        "UPDATE plans SET config = '{}'::jsonb",
        "UPDATE plans SET expires_at = now()",
        "UPDATE plan_actions SET destination_broker = 'evil:8080'",
        "UPDATE audit_log SET actor = 'mallory'",
    ):
        with pytest.raises(IntegrityError, match="immutable"), world.engine.begin() as conn:
            conn.execute(text(statement))
    with world.engine.begin() as conn:  # the status columns may change
        conn.execute(text("UPDATE plans SET status = 'rejected' WHERE plan_id = :p"), {"p": plan_id})
        conn.execute(text("UPDATE plan_actions SET attempts = 3"))
    with session_scope(world.engine) as s:
        plan = repo.get_plan(s, plan_id=plan_id)
    assert plan.config == {"loadBalancerBrokerThresholdShedderPercentage": 10}
    assert plan.actions[0].destination_broker == "b2:8080" and plan.actions[0].attempts == 3


# ------------------------------------------------------------------------------- plan statuses


def test_only_an_approved_plan_can_execute_and_only_one_at_a_time(world, make_plan) -> None:
    first = make_plan()
    with session_scope(world.engine) as s:
        with pytest.raises(InvalidTransitionError, match="only an approved plan can execute"):
            repo.set_plan_status(s, plan_id=first, status="executing")
        repo.decide_plan(s, plan_id=first, decision="approved", decided_by="alice")
    second = make_plan(run_id="run-2")  # first is approved, not pending: it is not superseded
    with session_scope(world.engine) as s:
        repo.decide_plan(s, plan_id=second, decision="approved", decided_by="alice")
        assert repo.set_plan_status(s, plan_id=first, status="executing") is True
        assert repo.set_plan_status(s, plan_id=first, status="executing") is False  # a retry: no-op
        with pytest.raises(ExecutionInProgressError, match=f"plan {first} is already executing"):
            repo.set_plan_status(s, plan_id=second, status="executing")
        # the failed attempt left the session usable and the second plan approved
        assert repo.get_plan(s, plan_id=second).status == "approved"
        repo.set_plan_status(s, plan_id=first, status="failed")
        repo.set_plan_status(s, plan_id=second, status="executing")
        with pytest.raises(InvalidTransitionError, match="cannot go from executing to approved"):
            repo.set_plan_status(s, plan_id=second, status="approved")
        repo.set_plan_status(s, plan_id=second, status="executed")
        with pytest.raises(InvalidTransitionError, match="nothing \\(final\\)"):
            repo.set_plan_status(s, plan_id=second, status="executing")


# ------------------------------------------------------------------------- action state machine


def _drive_to(s, action_id: int, state: str) -> None:
    """Reach ``state`` from pending along legal transitions."""
    path = {
        "pending": [],
        "in_progress": ["in_progress"],
        "completed": ["in_progress", "completed"],
        "failed": ["in_progress", "failed"],
        "skipped": ["skipped"],
    }[state]
    for step in path:
        repo.transition_action(s, action_id=action_id, to=step, error="why" if step in ("failed", "skipped") else None)


def test_every_transition_pair_is_checked(world, make_plan, unload) -> None:
    """All 25 (from, to) pairs: allowed ones succeed with their side effects, the rest raise."""
    pairs = list(itertools.product(ACTION_STATES, ACTION_STATES))
    # one bundle per pair: a plan never moves the same bundle twice
    plan_id = make_plan(
        actions=[
            unload(f"public/default/0x{i:08x}_0x{i + 1:08x}", reason=f"pair {a}->{b}") for i, (a, b) in enumerate(pairs)
        ]
    )
    with session_scope(world.engine) as s:
        repo.decide_plan(s, plan_id=plan_id, decision="approved", decided_by="alice")
        repo.set_plan_status(s, plan_id=plan_id, status="executing")
        actions = repo.get_plan(s, plan_id=plan_id).actions
    assert len(actions) == 25
    checked = []
    for (frm, to), action in zip(pairs, actions, strict=True):
        with session_scope(world.engine) as s:
            _drive_to(s, action.id, frm)
            before = repo.get_action(s, action_id=action.id)
            assert before.state == frm
            error = "moot: bundle already on b2" if to in ("failed", "skipped") else None
            if to in ALLOWED_TRANSITIONS[frm]:
                result = {"pair": f"{frm}>{to}"}
                after = repo.transition_action(s, action_id=action.id, to=to, error=error, result=result)  # type: ignore[arg-type]
                assert after.state == to
                if to == "in_progress":
                    assert after.attempts == before.attempts + 1 and after.started_at is not None
                    assert after.finished_at is None and after.error is None
                else:
                    assert after.finished_at is not None and after.error == error
                checked.append((frm, to, True))
            else:
                with pytest.raises(InvalidTransitionError, match=f"cannot go from {frm} to {to}"):
                    repo.transition_action(s, action_id=action.id, to=to, error=error)  # type: ignore[arg-type]
                assert repo.get_action(s, action_id=action.id).state == frm
                checked.append((frm, to, False))
    allowed = {(f, t) for f, t, ok in checked if ok}
    assert allowed == {(f, t) for f, ts in ALLOWED_TRANSITIONS.items() for t in ts}
    assert allowed == {
        ("pending", "in_progress"), ("pending", "skipped"), ("in_progress", "completed"),
        ("in_progress", "failed"), ("in_progress", "skipped"), ("failed", "in_progress"),
    }  # fmt: skip


def test_transitions_write_audit_rows_and_count_attempts(world, make_plan) -> None:
    plan_id = make_plan()
    with session_scope(world.engine) as s:
        repo.decide_plan(s, plan_id=plan_id, decision="approved", decided_by="alice")
        repo.set_plan_status(s, plan_id=plan_id, status="executing")
        action_id = repo.get_plan(s, plan_id=plan_id).actions[0].id
        repo.transition_action(s, action_id=action_id, to="in_progress")
        repo.transition_action(s, action_id=action_id, to="failed", error="HTTP 500 from broker")
        repo.transition_action(s, action_id=action_id, to="in_progress")
        done = repo.transition_action(s, action_id=action_id, to="completed", result={"owner": "b2:8080"})
        events = [(e["event"], e["action_id"]) for e in repo.audit_events(s, plan_id=plan_id) if e["action_id"]]
    assert done.attempts == 2 and done.error is None and done.result == {"owner": "b2:8080"}
    assert events == [
        ("action.in_progress", action_id),
        ("action.failed", action_id),
        ("action.in_progress", action_id),
        ("action.completed", action_id),
    ]


def test_transition_guards(world, make_plan) -> None:
    plan_id = make_plan()
    with session_scope(world.engine) as s:
        action_id = repo.get_plan(s, plan_id=plan_id).actions[0].id
        with pytest.raises(InvalidTransitionError, match="its plan is pending"):
            repo.transition_action(s, action_id=action_id, to="in_progress")
        repo.decide_plan(s, plan_id=plan_id, decision="approved", decided_by="alice")
        repo.set_plan_status(s, plan_id=plan_id, status="executing")
        with pytest.raises(InvalidTransitionError, match="needs an error"):
            repo.transition_action(s, action_id=action_id, to="skipped")
        with pytest.raises(InvalidTransitionError, match="unknown state 'done'"):
            repo.transition_action(s, action_id=action_id, to="done")  # type: ignore[arg-type]
        with pytest.raises(InvalidTransitionError, match="no plan action with id 999999"):
            repo.transition_action(s, action_id=999999, to="in_progress")


# -------------------------------------------------------------------------------- atomicity


def test_a_failing_write_mid_transaction_leaves_nothing_behind(world) -> None:
    """Validation failure after earlier writes, and a database-level failure: both roll back everything."""
    good = {"broker_id": "b1:8080", "raw_report": {"cpu": {"usage": 50, "limit": 100}}, "cpu_usage": 50.0}
    with pytest.raises(InvalidRowError) as info, session_scope(world.engine) as s:
        repo.start_run(s, run_id="run-x", cluster_id=world.cluster_id)
        repo.upsert_brokers(s, cluster_id=world.cluster_id, run_id="run-x", brokers={"b1:8080": "http://b1:8080"})
        repo.record_broker_load(s, run_id="run-x", rows=[good])
        repo.record_bundle_load(s, run_id="run-x", rows=[{"bundle": "ns/0x00000000_0xffffffff", "broker_id": "b1:8080",
                                                         "topics": "many"}])  # fmt: skip
    assert info.value.field == "rows[0].topics"

    with pytest.raises(IntegrityError), session_scope(world.engine) as s:
        repo.start_run(s, run_id="run-y", cluster_id=world.cluster_id)
        repo.record_broker_load(s, run_id="run-y", rows=[good])
        # brokers.first_seen_run_id references runs: an unknown run fails in the database
        repo.upsert_brokers(s, cluster_id=world.cluster_id, run_id="run-nope", brokers={"b9:8080": "http://b9"})

    for table, expected in (("runs", 1), ("brokers", 0), ("broker_load", 0), ("bundle_load", 0)):
        assert _count(world.engine, table) == expected, table  # only the fixture's run-1


# ------------------------------------------------------------------ approval policy (issue 6/11)


def test_a_newer_plan_supersedes_an_older_pending_one_and_deciding_it_says_so(world, make_plan) -> None:
    old = make_plan()
    new = make_plan(run_id="run-2")
    with session_scope(world.engine) as s:
        plan = repo.get_plan(s, plan_id=old)
        assert (plan.status, plan.superseded_by) == ("superseded", new)
        assert (plan.approval.decision, plan.approval.decided_by, plan.approval.via) == (
            "superseded",
            "system",
            "system",
        )
        assert repo.get_plan(s, plan_id=new).status == "pending"
        events = [e["event"] for e in repo.audit_events(s, plan_id=old)]
    assert events == ["plan.created", "plan.superseded"]
    with pytest.raises(PlanSupersededError, match=f"superseded by plan {new}"), session_scope(world.engine) as s:
        repo.decide_plan(s, plan_id=old, decision="approved", decided_by="alice")


def test_content_hash_is_recorded_with_the_approval_and_a_changed_plan_is_refused(world, make_plan) -> None:
    plan_id = make_plan()
    with session_scope(world.engine) as s:
        plan = repo.get_plan(s, plan_id=plan_id)
        assert plan.content_hash == repo.plan_content_hash(
            run_id=plan.run_id, dry_run=plan.dry_run, actions=plan.actions
        )
        with pytest.raises(PlanChangedError, match="decision was made on 000000000000"):
            repo.decide_plan(s, plan_id=plan_id, decision="approved", decided_by="alice", plan_hash="0" * 64)
    with session_scope(world.engine) as s:
        approval = repo.decide_plan(
            s, plan_id=plan_id, decision="approved", decided_by="alice", plan_hash=plan.content_hash, via="cli"
        )
    assert (approval.plan_hash, approval.via) == (plan.content_hash, "cli")


def test_a_plan_at_an_airflow_gate_is_decided_only_through_it(world, make_plan) -> None:
    plan_id = make_plan()
    gate = {"dag_id": "pulsar_rebalance", "run_id": "manual__1", "task_id": "await_approval", "map_index": -1}
    with session_scope(world.engine) as s:
        assert repo.open_gate(s, plan_id=plan_id, gate=gate).gate == gate
    with (
        pytest.raises(PlanAtGateError, match="waits at the Airflow approval gate") as err,
        session_scope(world.engine) as s,
    ):
        repo.decide_plan(s, plan_id=plan_id, decision="approved", decided_by="alice", via="cli")
    assert err.value.gate == gate
    with session_scope(world.engine) as s:
        assert (
            repo.decide_plan(s, plan_id=plan_id, decision="approved", decided_by="alice", via="airflow-gate").via
            == "airflow-gate"
        )


def test_stop_switch_is_recorded_once_and_only_for_a_plan_that_can_run(world, make_plan) -> None:
    plan_id = make_plan()
    with session_scope(world.engine) as s:
        with pytest.raises(PlanStateError, match="nothing to stop"):
            repo.request_stop(s, plan_id=plan_id, requested_by="bob")
        repo.decide_plan(s, plan_id=plan_id, decision="approved", decided_by="alice")
        assert repo.request_stop(s, plan_id=plan_id, requested_by="bob") is True
        assert repo.request_stop(s, plan_id=plan_id, requested_by="carol") is False
        assert repo.get_plan(s, plan_id=plan_id).stop_requested["by"] == "bob"
