"""The append-only ``audit_log``: every decision and transition writes a row in the caller's transaction."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.orm import Session

from pulsar_rebalance.store._shared import _json_value, _require_text
from pulsar_rebalance.store.tables import AuditLog


def audit(
    s: Session,
    *,
    event: str,
    actor: str,
    run_id: str | None = None,
    plan_id: str | None = None,
    action_id: int | None = None,
    details: Mapping[str, Any] | None = None,
) -> int:
    """Append an ``audit_log`` row in the caller's transaction; returns its id."""
    _require_text("event", event)
    _require_text("actor", actor)
    stmt = pg_insert(AuditLog).values(
        event=event,
        actor=actor,
        run_id=run_id,
        plan_id=plan_id,
        action_id=action_id,
        details=_json_value("details", dict(details or {})),
    )
    return int(s.execute(stmt.returning(AuditLog.id)).scalar_one())


SNAPSHOT_CHECK_EVENT = "snapshot_check"


def record_snapshot_check(s: Session, *, run_id: str, check: Mapping[str, Any]) -> None:
    """Keep collect's verdict on its snapshot (``{"warnings": [...], "excludedBundles": [...]}``) for
    planning, as an audit row of the run (a retried collect appends; the newest wins)."""
    audit(s, event=SNAPSHOT_CHECK_EVENT, actor="collect_load", run_id=run_id, details=dict(check))


def snapshot_check(s: Session, *, run_id: str) -> dict[str, Any]:
    """The newest :func:`record_snapshot_check` of ``run_id`` (empty lists if there is none)."""
    row = s.execute(
        select(AuditLog.details)
        .where(AuditLog.run_id == run_id, AuditLog.event == SNAPSHOT_CHECK_EVENT)
        .order_by(AuditLog.id.desc())
        .limit(1)
    ).scalar_one_or_none()
    return dict(row) if row else {"warnings": [], "excludedBundles": []}


def audit_events(s: Session, *, plan_id: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
    """Audit rows (oldest first), optionally only those of one plan."""
    stmt = select(AuditLog).order_by(AuditLog.id)
    if plan_id is not None:
        stmt = stmt.where(AuditLog.plan_id == plan_id)
    return [
        {
            "id": r.id,
            "at": r.at,
            "actor": r.actor,
            "event": r.event,
            "run_id": r.run_id,
            "plan_id": r.plan_id,
            "action_id": r.action_id,
            "details": r.details,
        }
        for r in s.execute(stmt.limit(limit)).scalars()
    ]
