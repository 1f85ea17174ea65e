"""Maintenance windows per cluster, the approved plan that waits for one, and the imbalance watch.

The setting is a row of ``maintenance_windows`` (no row: executions may start at any time), validated by
:func:`pulsar_rebalance.core.windows.parse_setting` before it is written. ``pulsar-rebalance windows
set|clear`` write it; every change writes an audit row (``maintenance_windows_set`` /
``maintenance_windows_cleared``) in the same transaction.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.orm import Session

from pulsar_rebalance.core import lifecycle
from pulsar_rebalance.core.windows import WindowSetting, describe, parse_setting
from pulsar_rebalance.errors import UnknownPlanError
from pulsar_rebalance.store._shared import SYSTEM_ACTOR, _aware, _require_text
from pulsar_rebalance.store.audit import audit
from pulsar_rebalance.store.plans import _lock_plan, _move_plan
from pulsar_rebalance.store.tables import Cluster, ImbalanceWatch, MaintenanceWindow, Plan, Run

logger = logging.getLogger(__name__)

WINDOW_EXPIRY_EVENT = "plan.expired"


@dataclass(frozen=True)
class ClusterWindows:
    cluster: str
    setting: WindowSetting
    updated_at: datetime
    updated_by: str


def window_setting(s: Session, *, cluster_id: int) -> WindowSetting | None:
    """The cluster's windows, or None when it has none (executions may start at any time)."""
    raw = s.execute(select(MaintenanceWindow.setting).where(MaintenanceWindow.cluster_id == cluster_id)).scalar()
    return parse_setting(raw) if raw is not None else None


def set_windows(s: Session, *, cluster_id: int, setting: Mapping[str, Any], by: str) -> WindowSetting:
    """Validate and store the cluster's windows (replacing any); audited. ``ConfigError`` for bad input."""
    _require_text("by", by)
    parsed = parse_setting(setting)
    stored = parsed.as_json()
    stmt = pg_insert(MaintenanceWindow).values(cluster_id=cluster_id, setting=stored, updated_by=by)
    s.execute(
        stmt.on_conflict_do_update(
            index_elements=[MaintenanceWindow.cluster_id],
            set_={"setting": stmt.excluded.setting, "updated_by": by, "updated_at": stmt.excluded.updated_at},
        )
    )
    audit(s, event="maintenance_windows_set", actor=by, details={"cluster_id": cluster_id, "setting": stored})
    logger.info("maintenance windows of cluster %s set by %s: %s", cluster_id, by, describe(parsed))
    return parsed


def clear_windows(s: Session, *, cluster_id: int, by: str) -> bool:
    """Remove the cluster's windows (executions may start at any time again); True if it had some."""
    _require_text("by", by)
    gone = s.execute(
        delete(MaintenanceWindow).where(MaintenanceWindow.cluster_id == cluster_id).returning(MaintenanceWindow.setting)
    ).scalar_one_or_none()
    if gone is not None:
        audit(s, event="maintenance_windows_cleared", actor=by, details={"cluster_id": cluster_id, "was": gone})
    return gone is not None


def all_windows(s: Session, *, cluster_id: int | None = None) -> list[ClusterWindows]:
    """Every cluster's windows (or one cluster's), by cluster name."""
    q = select(Cluster.name, MaintenanceWindow).join(Cluster, Cluster.id == MaintenanceWindow.cluster_id)
    if cluster_id is not None:
        q = q.where(MaintenanceWindow.cluster_id == cluster_id)
    return [
        ClusterWindows(name, parse_setting(w.setting), w.updated_at, w.updated_by)
        for name, w in s.execute(q.order_by(Cluster.name)).all()
    ]


def expire_waiting_plan(s: Session, *, plan_id: str, now: datetime, opens_at: datetime | None) -> bool:
    """An approved plan whose ``expires_at`` passed while it waited for the maintenance window: ``expired``.

    The approval stays on record (it was given); the plan's status and an audit row say why it never ran.
    True if it expired now; False if it was not approved or not due.
    """
    when = _aware("now", now)
    plan = _lock_plan(s, plan_id)
    if plan is None:
        raise UnknownPlanError(f"no plan with id {plan_id!r}", plan_id=plan_id)
    if plan.status != "approved" or plan.expires_at is None or when < plan.expires_at:
        return False
    _move_plan(plan, "expired", when)
    s.flush()
    reason = "approved, but its maintenance window did not open before it expired" + (
        f" (next opening {opens_at.isoformat()})" if opens_at else ""
    )
    audit(
        s,
        event=WINDOW_EXPIRY_EVENT,
        actor=SYSTEM_ACTOR,
        run_id=plan.run_id,
        plan_id=plan_id,
        details={
            "expires_at": plan.expires_at.isoformat(),
            "reason": reason,
            "waiting_for": "maintenance_window",
            "window_opens_at": opens_at.isoformat() if opens_at else None,
        },
    )
    logger.info("[%s] plan expired: %s", plan_id, reason)
    return True


# ------------------------------------------------------------------------------------ imbalance watch
BLOCKING_PLAN_STATUSES = tuple(sorted(lifecycle.OPEN))
"""A plan in any of these (not final: at the gate, approved, executing, or an unfinished execution
waiting for resume/abort) keeps the watch from starting another run of its cluster."""


def cluster_busy(s: Session, *, cluster_id: int) -> str | None:
    """Why a new run of the cluster must not start now (None: nothing blocks it).

    A run still planning (its ``runs`` row ``running`` without a plan yet), or a plan that awaits a decision,
    waits for its window or is executing (or died executing and awaits resume/abort).
    """
    plan = s.execute(
        select(Plan.plan_id, Plan.status, Plan.run_id)
        .where(Plan.cluster_id == cluster_id, Plan.status.in_(BLOCKING_PLAN_STATUSES))
        .order_by(Plan.created_at.desc())
        .limit(1)
    ).first()
    if plan is not None:
        return f"plan {plan.plan_id} of run {plan.run_id} is {plan.status}"
    planning = s.execute(
        select(Run.run_id)
        .where(Run.cluster_id == cluster_id, Run.status == "running", ~Run.run_id.in_(select(Plan.run_id)))
        .order_by(Run.started_at.desc())
        .limit(1)
    ).scalar_one_or_none()
    return f"run {planning} of this cluster is planning" if planning else None


@dataclass(frozen=True)
class WatchState:
    over_count: int
    armed: bool
    last_sample_at: datetime | None
    triggered_run_id: str | None


def lock_watch(s: Session, *, cluster_id: int) -> WatchState:
    """The cluster's imbalance watch, row-locked for this transaction (created armed if missing)."""
    s.execute(pg_insert(ImbalanceWatch).values(cluster_id=cluster_id).on_conflict_do_nothing())
    row = s.execute(
        select(ImbalanceWatch).where(ImbalanceWatch.cluster_id == cluster_id).with_for_update()
    ).scalar_one()
    return WatchState(row.over_count, row.armed, row.last_sample_at, row.triggered_run_id)


def save_watch(
    s: Session,
    *,
    cluster_id: int,
    over_count: int,
    armed: bool,
    sample_at: datetime,
    worst: float,
    triggered_run_id: str | None = None,
) -> None:
    """Store the watch after a sample (the caller holds :func:`lock_watch`'s lock); a trigger is audited."""
    row = s.execute(select(ImbalanceWatch).where(ImbalanceWatch.cluster_id == cluster_id)).scalar_one()
    row.over_count, row.armed, row.last_sample_at, row.last_worst = over_count, armed, sample_at, worst
    if triggered_run_id is not None:
        row.triggered_run_id, row.triggered_at = triggered_run_id, sample_at
        audit(
            s,
            event="imbalance_run_triggered",
            actor="imbalance-watch",
            run_id=None,
            details={"cluster_id": cluster_id, "dag_run_id": triggered_run_id, "worst": worst},
        )
    s.flush()


__all__ = [
    "BLOCKING_PLAN_STATUSES",
    "ClusterWindows",
    "cluster_busy",
    "WatchState",
    "all_windows",
    "clear_windows",
    "expire_waiting_plan",
    "lock_watch",
    "save_watch",
    "set_windows",
    "window_setting",
]
