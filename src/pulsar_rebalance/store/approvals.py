"""The approval gate: deciding, expiring and gating a pending plan (``approvals`` rows).

``pending -> approved|rejected`` happens only through :func:`decide_plan`, ``pending -> expired`` only
through :func:`expire_plan`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Literal

from sqlalchemy import Connection, select, text
from sqlalchemy.orm import Session

from pulsar_rebalance.errors import (
    PlanAlreadyApprovedByYouError,
    PlanAlreadyDecidedError,
    PlanAtGateError,
    PlanChangedError,
    PlanExpiredError,
    PlanSupersededError,
    StoreError,
    UnknownPlanError,
)
from pulsar_rebalance.store._shared import SYSTEM_ACTOR, InvalidRowError, _aware, _json_value, _require_text
from pulsar_rebalance.store.audit import audit
from pulsar_rebalance.store.plans import _lock_plan, _move_plan, _plan_query, get_plan
from pulsar_rebalance.store.tables import Approval, ApprovalVote, Plan
from pulsar_rebalance.store.views import ApprovalView, PlanView, _plan_view

logger = logging.getLogger(__name__)

Decision = Literal["approved", "rejected"]

VIA = ("airflow-gate", "cli", "policy", "system")


def open_gate(s: Session, *, plan_id: str, gate: Mapping[str, Any], now: datetime | None = None) -> PlanView:
    """Record that ``plan_id`` now waits at an Airflow approval gate (if it is still pending).

    From then on a decision must go through that gate (``decide_plan(via="airflow-gate")``), so the
    CLI, the UI and the REST API all answer the same request and exactly one of them wins. Expires the
    plan first if its window has passed. Returns the plan as it is now (any status).
    """
    when = _aware("now", now)
    plan = _lock_plan(s, plan_id)
    if plan is None:
        raise UnknownPlanError(f"no plan with id {plan_id!r}", plan_id=plan_id)
    if plan.status == "pending" and _is_due(plan.expires_at, when):
        expire_plan(s, plan_id=plan_id, now=when)
    elif plan.status == "pending" and plan.gate != dict(gate):
        plan.gate = _json_value("gate", dict(gate))
        s.flush()
        audit(s, event="plan.gate_opened", actor=SYSTEM_ACTOR, run_id=plan.run_id, plan_id=plan_id, details=dict(gate))
    s.expire_all()
    return get_plan(s, plan_id=plan_id)


def plan_at_gate(s: Session, *, dag_id: str, run_id: str, task_id: str) -> PlanView | None:
    """The plan waiting (or having waited) at the Airflow gate ``dag_id/run_id/task_id``, if any."""
    plan = s.execute(
        _plan_query().where(
            Plan.gate["dag_id"].astext == dag_id,
            Plan.gate["run_id"].astext == run_id,
            Plan.gate["task_id"].astext == task_id,
        )
    ).scalar_one_or_none()
    return _plan_view(plan) if plan is not None else None


def gates_to_close(s: Session) -> list[PlanView]:
    """Plans that can no longer be decided (not pending) whose Airflow gate is not yet known to be closed.

    A superseded or expired plan's Required Action must leave Airflow's list; a plan decided at its
    gate only needs marking. The caller closes each gate in Airflow and calls :func:`mark_gate_closed`.
    """
    rows = s.execute(
        _plan_query()
        .where(Plan.gate.is_not(None), Plan.status != "pending", Plan.gate["closed_at"].astext.is_(None))
        .order_by(Plan.created_at)
    ).scalars()
    return [_plan_view(p) for p in rows]


def mark_gate_closed(s: Session, *, plan_id: str, reason: str | None, now: datetime | None = None) -> None:
    """Record that ``plan_id``'s Airflow gate is closed (``reason``: what the system answered, None if a
    person had answered it); an audit row when the system closed it."""
    when = _aware("now", now)
    plan = _lock_plan(s, plan_id)
    if plan is None:
        raise UnknownPlanError(f"no plan with id {plan_id!r}", plan_id=plan_id)
    if not plan.gate or plan.gate.get("closed_at"):
        return
    plan.gate = _json_value("gate", {**plan.gate, "closed_at": when.isoformat(), "closed_because": reason})
    s.flush()
    if reason:
        audit(
            s,
            event="plan.gate_closed",
            actor=SYSTEM_ACTOR,
            run_id=plan.run_id,
            plan_id=plan_id,
            details={"reason": reason},
        )


def closed_gate_reason(plan: PlanView) -> str:
    """What the system answers at the gate of a plan that can no longer be decided."""
    if plan.status == "superseded":
        by = f" by plan {plan.superseded_by}" if plan.superseded_by else ""
        return f"plan {plan.plan_id} was superseded{by}: review and decide the newer plan instead"
    if plan.status == "expired":
        return f"plan {plan.plan_id} expired: nothing will run"
    return f"plan {plan.plan_id} is already {plan.status}: nothing to decide"


def decide_plan(
    s: Session,
    *,
    plan_id: str,
    decision: Decision,
    decided_by: str,
    comment: str | None = None,
    now: datetime | None = None,
    plan_hash: str | None = None,
    via: str = "cli",
) -> ApprovalView:
    """Approve or reject a pending plan, race-safely (``SELECT ... FOR UPDATE`` on the plan row).

    ``plan_hash`` is the content hash the decider saw (refused if the plan's differs); ``via`` is the
    path deciding. A plan waiting at an Airflow gate (:func:`open_gate`) is decided only through it
    (``via="airflow-gate"``): other paths get ``PlanAtGateError`` naming the gate.

    Writes the approval row, the plan status and an audit row in the caller's transaction.

    A plan that needs several approvers (``required_approvals`` > 1): each approval is a vote
    (``approval_votes``, one per person; the same person again gets ``PlanAlreadyApprovedByYouError``)
    and the plan stays ``pending`` until the last required vote, which writes the approval row naming
    every approver (``"alice + bob"``). The returned view's ``final`` is False for a vote that leaves
    the plan pending. A rejection by anyone, at any point, is final.

    Expiry (a deliberate exception to "the caller owns the transaction"): if ``now`` is past the
    plan's ``expires_at``, the expiry (status ``expired``, an approval row with decision ``expired``
    by ``system``, an audit row) is written and **committed in a separate short transaction** on the
    same engine, and then ``PlanExpiredError`` is raised. The caller's rollback on that exception
    therefore cannot undo the expiry. (Only if the plan is not yet visible to other transactions, i.e.
    created uncommitted in this same transaction, is the expiry written in the caller's transaction.)

    Raises:
        UnknownPlanError: no such plan.
        PlanExpiredError: the approval window has passed (now, or earlier).
        PlanAlreadyDecidedError: the plan is not pending; the message says its status and who
            decided when.
        PlanSupersededError: a newer plan replaced it.
        PlanAtGateError: it waits at an Airflow gate and ``via`` is not ``airflow-gate``.
        PlanChangedError: ``plan_hash`` is not the plan's content hash.
        PlanAlreadyApprovedByYouError: ``decided_by`` already approved this plan, which needs more approvers.
        InvalidRowError: ``decision`` is not approved/rejected or ``decided_by`` is empty.
    """
    if via not in VIA:
        raise InvalidRowError("via", f"must be one of {VIA}, got {via!r}")
    if decision not in ("approved", "rejected"):
        raise InvalidRowError("decision", f"must be 'approved' or 'rejected', got {decision!r}")
    _require_text("decided_by", decided_by)
    when = _aware("now", now)

    peek = s.execute(select(Plan.status, Plan.expires_at).where(Plan.plan_id == plan_id)).first()
    if peek is None:
        raise UnknownPlanError(f"no plan with id {plan_id!r}", plan_id=plan_id)
    if peek.status == "pending" and _is_due(peek.expires_at, when):
        _expire_in_own_transaction(s, plan_id=plan_id, now=when)

    plan = _lock_plan(s, plan_id)
    if plan is None:  # deleted since the peek above
        raise UnknownPlanError(f"no plan with id {plan_id!r}", plan_id=plan_id)
    if plan.status == "pending" and _is_due(plan.expires_at, when):
        expire_plan(s, plan_id=plan_id, now=when)  # not visible to other transactions yet: see docstring
    if plan.status == "expired":
        raise PlanExpiredError(
            f"plan {plan_id} expired at {_fmt(plan.expires_at)} and can no longer be {decision} "
            f"(decision attempted at {_fmt(when)})",
            plan_id=plan_id,
        )
    if plan.status == "superseded":
        raise PlanSupersededError(
            f"plan {plan_id} was superseded"
            + (f" by plan {plan.superseded_by}" if plan.superseded_by else "")
            + f" at {_fmt(plan.updated_at)} and can no longer be {decision}: decide the newer plan instead",
            plan_id=plan_id,
        )
    if plan.status != "pending":
        raise PlanAlreadyDecidedError(_already_decided_message(s, plan), plan_id=plan_id)
    if plan.gate and via != "airflow-gate":
        g = plan.gate
        raise PlanAtGateError(
            f"plan {plan_id} waits at the Airflow approval gate (DAG {g.get('dag_id')}, run {g.get('run_id')}, "
            f"task {g.get('task_id')}): decide it there, in the Airflow UI (Browse -> Required Actions) or "
            "through Airflow's REST API",
            plan_id=plan_id,
            gate=dict(g),
        )
    if plan_hash is not None and plan.content_hash is not None and plan_hash != plan.content_hash:
        raise PlanChangedError(
            f"plan {plan_id} has content {plan.content_hash[:12]}, but the decision was made on "
            f"{plan_hash[:12]}: review the plan as it is now and decide again",
            plan_id=plan_id,
        )

    voters: list[str] = []
    if decision == "approved":
        voters = list(
            s.execute(
                select(ApprovalVote.voter).where(ApprovalVote.plan_id == plan_id).order_by(ApprovalVote.id)
            ).scalars()
        )
        if decided_by in voters:
            raise PlanAlreadyApprovedByYouError(
                f"plan {plan_id} already has the approval of {decided_by}; it needs {plan.required_approvals} "
                f"approvals from different people ({len(voters)} so far): another approver must decide",
                plan_id=plan_id,
            )
        s.add(
            ApprovalVote(
                plan_id=plan_id, voter=decided_by, voted_at=when, comment=comment, plan_hash=plan.content_hash, via=via
            )
        )
        voters.append(decided_by)
        if len(voters) < plan.required_approvals:  # a vote: the plan waits for the next approver
            s.flush()
            audit(
                s,
                event="plan.approval_vote",
                actor=decided_by,
                run_id=plan.run_id,
                plan_id=plan_id,
                details={
                    "comment": comment,
                    "via": via,
                    "plan_hash": plan.content_hash,
                    "votes": len(voters),
                    "required": plan.required_approvals,
                },
            )
            logger.info(
                "[%s] approval %d of %d by %s (via %s)", plan_id, len(voters), plan.required_approvals, decided_by, via
            )
            return ApprovalView(
                plan_id=plan_id,
                decision=decision,
                decided_by=decided_by,
                decided_at=when,
                comment=comment,
                plan_hash=plan.content_hash,
                via=via,
                votes=tuple(voters),
                required_approvals=plan.required_approvals,
            )
        decided_by = " + ".join(voters)  # four eyes: the decision is everyone's who approved
    s.add(
        Approval(
            plan_id=plan_id,
            decision=decision,
            decided_by=decided_by,
            decided_at=when,
            comment=comment,
            plan_hash=plan.content_hash,
            via=via,
        )
    )
    _move_plan(plan, decision, when)
    s.flush()
    audit(
        s,
        event=f"plan.{decision}",
        actor=decided_by,
        run_id=plan.run_id,
        plan_id=plan_id,
        details={"comment": comment, "via": via, "plan_hash": plan.content_hash},
    )
    logger.info("[%s] plan %s by %s (via %s)", plan_id, decision, decided_by, via)
    return ApprovalView(
        plan_id=plan_id,
        decision=decision,
        decided_by=decided_by,
        decided_at=when,
        comment=comment,
        plan_hash=plan.content_hash,
        via=via,
        votes=tuple(voters),
        required_approvals=plan.required_approvals,
    )


def expire_plan(s: Session, *, plan_id: str, now: datetime | None = None) -> bool:
    """Mark a pending plan ``expired`` if ``now`` is at/after its ``expires_at``; True if it did.

    Records an approval row (decision ``expired``, by ``system``) and an audit row.

    Raises:
        UnknownPlanError: no such plan.
    """
    when = _aware("now", now)
    plan = _lock_plan(s, plan_id)
    if plan is None:
        raise UnknownPlanError(f"no plan with id {plan_id!r}", plan_id=plan_id)
    if plan.status != "pending" or not _is_due(plan.expires_at, when):
        return False
    s.add(
        Approval(
            plan_id=plan_id,
            decision="expired",
            decided_by=SYSTEM_ACTOR,
            decided_at=when,
            comment=f"approval window ended at {_fmt(plan.expires_at)}",
            plan_hash=plan.content_hash,
            via="system",
        )
    )
    _move_plan(plan, "expired", when)
    s.flush()
    audit(
        s,
        event="plan.expired",
        actor=SYSTEM_ACTOR,
        run_id=plan.run_id,
        plan_id=plan_id,
        details={"expires_at": _fmt(plan.expires_at)},
    )
    logger.info("[%s] plan expired (window ended %s)", plan_id, _fmt(plan.expires_at))
    return True


def expire_due_plans(s: Session, *, now: datetime | None = None, cluster_id: int | None = None) -> list[str]:
    """Expire every pending plan whose window has passed; returns their ids (rows locked by others
    are skipped and left for the next sweep)."""
    when = _aware("now", now)
    stmt = select(Plan.plan_id).where(Plan.status == "pending", Plan.expires_at <= when)
    if cluster_id is not None:
        stmt = stmt.where(Plan.cluster_id == cluster_id)
    due = list(s.execute(stmt.with_for_update(skip_locked=True)).scalars())
    return [plan_id for plan_id in due if expire_plan(s, plan_id=plan_id, now=when)]


def _expire_in_own_transaction(s: Session, *, plan_id: str, now: datetime) -> None:
    """Commit a due expiry on a separate connection so that the caller's rollback cannot undo it."""
    bind = s.get_bind()
    engine = bind.engine if isinstance(bind, Connection) else bind
    try:
        with Session(engine) as side, side.begin():
            side.execute(text("SET LOCAL lock_timeout = '10s'"))
            expire_plan(side, plan_id=plan_id, now=now)
    except UnknownPlanError:
        pass  # created in the caller's uncommitted transaction: decide_plan records the expiry there
    except Exception as exc:
        raise StoreError(
            f"could not record the expiry of plan {plan_id} in its own transaction (is the plan row "
            f"locked by this or another session?): {exc}"
        ) from exc


def _already_decided_message(s: Session, plan: Plan) -> str:
    if plan.status == "empty":
        return f"plan {plan.plan_id} is empty (it has no actions), so there is nothing to decide"
    approval = s.execute(select(Approval).where(Approval.plan_id == plan.plan_id)).scalar_one_or_none()
    message = f"plan {plan.plan_id} is already {plan.status}"
    if approval is not None:
        message += f" ({approval.decision} by {approval.decided_by} at {_fmt(approval.decided_at)})"
    return message


def _is_due(expires_at: datetime | None, now: datetime) -> bool:
    return expires_at is not None and now >= expires_at


def _fmt(value: datetime | None) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if value is not None else "never"
