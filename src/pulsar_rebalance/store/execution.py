"""Execution: plan statuses while executing, action transitions, the stop switch, dead executions.

The action state machine is the plan's (:data:`pulsar_rebalance.core.plan.ALLOWED_TRANSITIONS`,
re-exported here): :func:`transition_action` checks each move with
:func:`pulsar_rebalance.core.plan.check_transition` and persists it. An action may only move while its
plan is ``executing``; see :data:`PLAN_TRANSITIONS` for plans.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from pulsar_rebalance.core import lifecycle
from pulsar_rebalance.core.plan import ActionState, check_transition
from pulsar_rebalance.errors import ExecutionInProgressError, InvalidTransitionError, PlanStateError, UnknownPlanError
from pulsar_rebalance.store._shared import SYSTEM_ACTOR, _aware, _for_update, _json_value, _require_text
from pulsar_rebalance.store.audit import audit
from pulsar_rebalance.store.plans import _lock_plan
from pulsar_rebalance.store.tables import AuditLog, Plan, PlanAction
from pulsar_rebalance.store.views import ActionView, _action_view

logger = logging.getLogger(__name__)

PLAN_TRANSITIONS: Mapping[str, frozenset[str]] = lifecycle.EXECUTION_TRANSITIONS  # type: ignore[assignment]
"""Execution-phase plan statuses settable with :func:`set_plan_status`.

``pending -> approved|rejected`` happens only through :func:`decide_plan`, ``pending -> expired``
only through :func:`expire_plan` and ``pending|approved -> superseded`` only through
:func:`supersede_plans` (all three also write the approval row); ``approved -> expired`` only through
:func:`pulsar_rebalance.store.windows.expire_waiting_plan` (the maintenance window did not open before
the plan's expiry; the approval row stays, an audit row says why); ``empty``, ``rejected``,
``expired``, ``superseded``, ``aborted`` and ``executed`` are final. Only an approved plan can ever
start executing; ``interrupted`` is an execution whose process died (its lock was released by
Postgres when the connection ended): it is resumed or aborted.
"""


def stop_request(s: Session, *, plan_id: str) -> dict[str, Any] | None:
    """The plan's stop switch (``{"by", "at"}``) or None: what the executor checks before each action."""
    return s.execute(select(Plan.stop_requested).where(Plan.plan_id == plan_id)).scalar_one_or_none()


def request_stop(s: Session, *, plan_id: str, requested_by: str, now: datetime | None = None) -> bool:
    """The stop switch: the executor runs no further action of ``plan_id`` (in-flight ones finish).

    True if the request was recorded now; False if it was already requested. A plan that is not
    approved/executing/interrupted has nothing to stop (``PlanStateError``).
    """
    _require_text("requested_by", requested_by)
    when = _aware("now", now)
    plan = _lock_plan(s, plan_id)
    if plan is None:
        raise UnknownPlanError(f"no plan with id {plan_id!r}", plan_id=plan_id)
    if plan.status not in lifecycle.STOPPABLE:
        raise PlanStateError(f"plan {plan_id} is {plan.status}: there is nothing to stop", plan_id=plan_id)
    if plan.stop_requested:
        return False
    plan.stop_requested = {"by": requested_by, "at": when.isoformat()}
    s.flush()
    audit(s, event="plan.stop_requested", actor=requested_by, run_id=plan.run_id, plan_id=plan_id)
    return True


def set_plan_status(
    s: Session,
    *,
    plan_id: str,
    status: str,
    actor: str = "executor",
    details: Mapping[str, Any] | None = None,
    result: Mapping[str, Any] | None = None,
) -> bool:
    """Move a plan through its execution statuses (:data:`PLAN_TRANSITIONS`); True if it changed.

    Setting the status it already has is a no-op (an Airflow retry re-entering ``executing``).
    ``executing`` is also the database guard against concurrent executions: at most one plan per
    cluster can be ``executing`` (a partial unique index).

    Raises:
        UnknownPlanError: no such plan.
        InvalidTransitionError: not allowed from the current status (e.g. executing an unapproved plan).
        ExecutionInProgressError: another plan of the cluster is executing.
    """
    plan = _lock_plan(s, plan_id)
    if plan is None:
        raise UnknownPlanError(f"no plan with id {plan_id!r}", plan_id=plan_id)
    if result is not None:  # the measured outcome of an execution (mutable, unlike the plan itself)
        plan.result = _json_value("result", dict(result))
    if plan.status == status:
        s.flush()
        return False
    allowed = PLAN_TRANSITIONS.get(plan.status, frozenset())
    if status not in allowed:
        hint = " (only an approved plan can execute)" if status == "executing" else ""
        raise InvalidTransitionError(
            f"plan {plan_id} cannot go from {plan.status} to {status}{hint}; "
            f"allowed from {plan.status}: {', '.join(sorted(allowed)) or 'nothing (final)'}"
        )
    previous = plan.status
    try:
        with s.begin_nested():
            plan.status = status
            plan.updated_at = datetime.now(UTC)
            s.flush()
    except IntegrityError as exc:
        if "uq_plans_one_executing" not in str(exc.orig):
            raise
        other = s.execute(
            select(Plan.plan_id).where(Plan.cluster_id == plan.cluster_id, Plan.status == "executing")
        ).scalar_one_or_none()
        raise ExecutionInProgressError(
            f"cannot execute plan {plan_id}: plan {other} is already executing on this cluster"
        ) from exc
    audit(
        s,
        event="plan.status",
        actor=actor,
        run_id=plan.run_id,
        plan_id=plan_id,
        details={"from": previous, "to": status, **(dict(details) if details else {})},
    )
    return True


def transition_action(
    s: Session,
    *,
    action_id: int,
    to: ActionState,
    error: str | None = None,
    result: Mapping[str, Any] | None = None,
    actor: str = "executor",
    now: datetime | None = None,
) -> ActionView:
    """Move an action along the plan's state machine, persisting it (with an audit row) at once.

    The move is checked by :func:`pulsar_rebalance.core.plan.check_transition`.

    Call it *before* the side effect (``in_progress`` records the intent) and after (the outcome), so an
    Airflow retry finds ``in_progress`` and reconciles with Pulsar instead of repeating blindly.

    ``-> in_progress`` increments ``attempts``, stamps ``started_at`` and clears ``finished_at``,
    ``error`` and ``result``; ``-> completed|failed|skipped`` stamps ``finished_at``. ``failed`` and
    ``skipped`` need ``error`` (the failure, or why it was moot); ``completed`` must not have one.

    Raises:
        InvalidTransitionError: unknown action, a transition not in the table, a missing/extra
            ``error``, or the plan is not ``executing``.
    """
    when = _aware("now", now)
    action = s.execute(_for_update(select(PlanAction).where(PlanAction.id == action_id))).scalar_one_or_none()
    if action is None:
        raise InvalidTransitionError(f"no plan action with id {action_id}")
    label = f"action {action_id} ({action.kind} {action.bundle}, plan {action.plan_id})"
    check_transition(action.state, to, error=error, label=label)
    plan_status = s.execute(select(Plan.status).where(Plan.plan_id == action.plan_id)).scalar_one()
    if plan_status != "executing":
        raise InvalidTransitionError(
            f"{label}: its plan is {plan_status}; actions move only while the plan is executing "
            "(set_plan_status(..., status='executing') first)"
        )
    result_json = _json_value("result", dict(result)) if result is not None else None

    previous = action.state
    action.state = to
    if to == "in_progress":
        action.attempts += 1
        action.started_at = when
        action.finished_at = None
        action.error = None
        action.result = result_json
    else:
        action.finished_at = when
        action.error = error
        if result_json is not None:
            action.result = result_json
    s.flush()
    audit(
        s,
        event=f"action.{to}",
        actor=actor,
        plan_id=action.plan_id,
        action_id=action_id,
        details={
            "kind": action.kind,
            "bundle": action.bundle,
            "from": previous,
            "to": to,
            "attempts": action.attempts,
            **({"error": error} if error else {}),
        },
    )
    return _action_view(action)


def record_resend(s: Session, *, action_id: int, reason: str, actor: str = "executor") -> ActionView:
    """An ``in_progress`` action is sent again (a crash left its outcome unknown and Pulsar shows no
    effect): count the attempt and record why, without leaving ``in_progress``."""
    action = s.execute(_for_update(select(PlanAction).where(PlanAction.id == action_id))).scalar_one_or_none()
    if action is None or action.state != "in_progress":
        raise InvalidTransitionError(f"action {action_id} is not in_progress: nothing to re-send")
    action.attempts += 1
    action.started_at = datetime.now(UTC)
    s.flush()
    audit(
        s,
        event="action.resent",
        actor=actor,
        plan_id=action.plan_id,
        action_id=action_id,
        details={"kind": action.kind, "bundle": action.bundle, "attempts": action.attempts, "reason": reason},
    )
    return _action_view(action)


def interrupt_dead_executions(s: Session, *, cluster_id: int, except_plan_id: str | None = None) -> list[str]:
    """Mark ``interrupted`` every plan of the cluster still ``executing`` other than ``except_plan_id``.

    Call it only while holding the cluster's execution lock: the lock is a Postgres session lock, so a
    plan that says ``executing`` while nobody else holds it belongs to a process that died.
    """
    stmt = select(Plan.plan_id).where(Plan.cluster_id == cluster_id, Plan.status == "executing")
    if except_plan_id is not None:
        stmt = stmt.where(Plan.plan_id != except_plan_id)
    dead = list(s.execute(stmt).scalars())
    for plan_id in dead:
        set_plan_status(
            s,
            plan_id=plan_id,
            status="interrupted",
            actor=SYSTEM_ACTOR,
            details={"reason": "its execution process died (the cluster's execution lock was free)"},
        )
        logger.warning("[%s] execution interrupted: its process died; resume or abort it", plan_id)
    return dead


def last_execution_activity(s: Session, *, cluster_id: int, exclude_plan_id: str) -> tuple[datetime, str] | None:
    """``(when, plan_id)`` of the newest start or end of a real (not dry-run) execution on the cluster."""
    row = s.execute(
        select(AuditLog.at, Plan.plan_id)
        .join(Plan, Plan.plan_id == AuditLog.plan_id)
        .where(
            Plan.cluster_id == cluster_id,
            Plan.plan_id != exclude_plan_id,
            Plan.dry_run.is_(False),
            AuditLog.event.in_(("execution_started", "execution_finished")),
        )
        .order_by(AuditLog.at.desc())
        .limit(1)
    ).first()
    return (row[0], row[1]) if row else None
