"""Ownership history: who owned which bundle when, and why (``ownership``, ``bundle_ownership_history``)."""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from datetime import datetime

from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from pulsar_rebalance.store._shared import InvalidRowError, _aware, _for_update, _require_text
from pulsar_rebalance.store.ranges import split_bundle_name
from pulsar_rebalance.store.tables import Approval, BundleRange, Ownership, Plan, PlanAction
from pulsar_rebalance.store.views import OwnershipChange, OwnershipDiff, OwnershipRecord

logger = logging.getLogger(__name__)


def sync_ownership(
    s: Session,
    *,
    cluster_id: int,
    run_id: str,
    ownership: Mapping[str, str],
    cause: str,
    cause_action_ids: Mapping[str, int] | None = None,
    namespaces: Collection[str] | None = None,
    at: datetime | None = None,
) -> OwnershipDiff:
    """Make the open ownership rows equal to ``ownership`` (``{bundle full name: broker_id}``).

    Rows whose broker changed are closed at ``at`` (``ended_run_id = run_id``) and a new row is opened;
    rows of bundles absent from ``ownership`` are closed; unchanged bundles are left alone, so calling it
    twice with the same map changes nothing.

    Args:
        ownership: the complete current map for the cluster, or for ``namespaces`` when given (only
            bundles in those namespaces are then considered for closing).
        cause: why the new rows exist, e.g. ``"observed at collect"``.
        cause_action_ids: ``{bundle: plan action id}`` for bundles our approved action moved or created.
            Their new rows get ``cause_action_id`` and a cause derived from the action, e.g.
            ``"unload approved in plan p-20260101-abc123 by alice: <reason>"`` (instead of ``cause``).
            Record ownership right after the action completes: a bundle whose owner already matches
            is "unchanged" and keeps its existing cause.

    Raises:
        InvalidRowError: malformed names, a bundle without a live ``bundle_ranges`` row (sync the
            ranges first), an unknown or unapproved action, or ``at`` earlier than a row being closed.
    """
    _require_text("cause", cause)
    when = _aware("at", at)
    action_ids = dict(cause_action_ids or {})
    scope = set(namespaces) if namespaces is not None else None
    parsed: dict[str, tuple[str, str]] = {}
    for bundle, broker in ownership.items():
        parsed[bundle] = split_bundle_name(bundle, field=f"ownership[{bundle!r}]")
        _require_text(f"ownership[{bundle!r}]", broker)
        if scope is not None and parsed[bundle][0] not in scope:
            raise InvalidRowError(f"ownership[{bundle!r}]", f"namespace is outside namespaces={sorted(scope)}")
    for bundle in action_ids:
        if bundle not in ownership:
            raise InvalidRowError(f"cause_action_ids[{bundle!r}]", "bundle is not in ownership")
    action_causes = _action_causes(s, cluster_id=cluster_id, action_ids=action_ids)

    s.execute(text("SELECT pg_advisory_xact_lock(hashtext(:key))"), {"key": f"pulsar_rebalance.ownership:{cluster_id}"})
    open_stmt = select(Ownership).where(Ownership.cluster_id == cluster_id, Ownership.valid_to.is_(None))
    if scope is not None:
        open_stmt = open_stmt.join(BundleRange, BundleRange.id == Ownership.bundle_range_id).where(
            BundleRange.namespace.in_(scope)
        )
    open_rows = {row.bundle: row for row in s.execute(_for_update(open_stmt, of=Ownership)).scalars()}

    to_open = {b: broker for b, broker in ownership.items() if b not in open_rows or open_rows[b].broker_id != broker}
    to_close = [row for b, row in open_rows.items() if b not in ownership or b in to_open]
    ranges = _live_range_ids(s, cluster_id=cluster_id, bundles={b: parsed[b] for b in to_open})
    for row in to_close:
        if when < row.valid_from:
            began = row.valid_from.isoformat()
            raise InvalidRowError("at", f"{when.isoformat()} is before {row.bundle}'s ownership began ({began})")

    changes = []
    for row in to_close:
        row.valid_to = when
        row.ended_run_id = run_id
        if row.bundle not in to_open:
            changes.append(OwnershipChange(row.bundle, row.broker_id, None, None, None))
    s.flush()  # close before opening: the partial unique index allows one open row per bundle
    for bundle, broker in sorted(to_open.items()):
        action_id = action_ids.get(bundle)
        row_cause = action_causes[action_id] if action_id is not None else cause
        s.add(
            Ownership(
                cluster_id=cluster_id,
                bundle=bundle,
                bundle_range_id=ranges[bundle],
                broker_id=broker,
                valid_from=when,
                observed_run_id=run_id,
                cause_action_id=action_id,
                cause=row_cause,
            )
        )
        previous = open_rows.get(bundle)
        changes.append(OwnershipChange(bundle, previous.broker_id if previous else None, broker, row_cause, action_id))
    s.flush()
    changes.sort(key=lambda c: c.bundle)
    if changes:
        logger.info("ownership: %d changes recorded (run %s)", len(changes), run_id)
    return OwnershipDiff(changes=tuple(changes), unchanged=len(ownership) - len(to_open))


OWNERSHIP_AT_SQL = """
SELECT cluster, bundle, broker_id, valid_from, valid_to, cause, observed_run_id, ended_run_id,
       action_id, action_kind, action_reason, plan_id, approved_by, decided_at, approval_comment
FROM bundle_ownership_history
WHERE {cluster_column} = :cluster AND bundle = :bundle
  AND valid_from <= :at AND (valid_to IS NULL OR valid_to > :at)
"""
"""The one query behind "where was bundle X at time T, and why": intervals are half-open [from, to)."""


def ownership_at(s: Session, *, cluster: str | int, bundle: str, at: datetime) -> OwnershipRecord | None:
    """Who owned ``bundle`` at instant ``at`` and why (None if we had no record then).

    Args:
        cluster: the cluster name, or its id.
    """
    column = "cluster_id" if isinstance(cluster, int) else "cluster"
    params = {"cluster": cluster, "bundle": bundle, "at": _aware("at", at)}
    row = s.execute(text(OWNERSHIP_AT_SQL.format(cluster_column=column)), params).mappings().first()
    return OwnershipRecord(**row) if row is not None else None


def ownership_history(s: Session, *, cluster_id: int, bundle: str) -> list[OwnershipRecord]:
    """Every ownership interval of ``bundle``, oldest first."""
    sql = text(
        """
        SELECT cluster, bundle, broker_id, valid_from, valid_to, cause, observed_run_id, ended_run_id,
               action_id, action_kind, action_reason, plan_id, approved_by, decided_at, approval_comment
        FROM bundle_ownership_history
        WHERE cluster_id = :cluster_id AND bundle = :bundle
        ORDER BY valid_from, ownership_id
        """
    )
    return [OwnershipRecord(**row) for row in s.execute(sql, {"cluster_id": cluster_id, "bundle": bundle}).mappings()]


def current_ownership(s: Session, *, cluster_id: int) -> dict[str, str]:
    """``{bundle: broker_id}`` of the open ownership rows."""
    stmt = select(Ownership.bundle, Ownership.broker_id).where(
        Ownership.cluster_id == cluster_id, Ownership.valid_to.is_(None)
    )
    return {bundle: broker for bundle, broker in s.execute(stmt)}


def recently_unloaded_bundles(s: Session, *, cluster_id: int, since: datetime) -> dict[str, int]:
    """``{bundle: epoch milliseconds}`` of bundles our completed unloads moved at or after ``since``.

    This is Pulsar's ``recentlyUnloadedBundles`` (bundle -> unload time in ms) that shedders use to
    honour ``loadBalancerSheddingGracePeriodMinutes``. Dry-run plans unloaded nothing and are ignored.
    The time is the action's ``finished_at``; for several unloads of one bundle the latest wins.
    """
    stmt = (
        select(PlanAction.bundle, func.max(PlanAction.finished_at))
        .join(Plan, Plan.plan_id == PlanAction.plan_id)
        .where(
            Plan.cluster_id == cluster_id,
            Plan.dry_run.is_(False),
            PlanAction.kind == "unload",
            PlanAction.state == "completed",
            PlanAction.finished_at >= _aware("since", since),
        )
        .group_by(PlanAction.bundle)
    )
    return {bundle: _epoch_ms(finished) for bundle, finished in s.execute(stmt) if finished is not None}


def _action_causes(s: Session, *, cluster_id: int, action_ids: Mapping[str, int]) -> dict[int, str]:
    """``{action id: cause text}`` for the actions credited with ownership changes (validated)."""
    if not action_ids:
        return {}
    ids = set(action_ids.values())
    rows = {
        row.id: row
        for row in s.execute(
            select(
                PlanAction.id,
                PlanAction.kind,
                PlanAction.reason,
                Plan.plan_id,
                Plan.cluster_id,
                Approval.decision,
                Approval.decided_by,
            )
            .join(Plan, Plan.plan_id == PlanAction.plan_id)
            .outerjoin(Approval, Approval.plan_id == Plan.plan_id)
            .where(PlanAction.id.in_(ids))
        )
    }
    causes = {}
    for bundle, action_id in action_ids.items():
        field = f"cause_action_ids[{bundle!r}]"
        row = rows.get(action_id)
        if row is None:
            raise InvalidRowError(field, f"no plan action with id {action_id}")
        if row.cluster_id != cluster_id:
            raise InvalidRowError(field, f"action {action_id} belongs to cluster id {row.cluster_id}, not {cluster_id}")
        if row.decision != "approved":
            raise InvalidRowError(field, f"action {action_id} belongs to plan {row.plan_id}, which is not approved")
        causes[action_id] = f"{row.kind} approved in plan {row.plan_id} by {row.decided_by}: {row.reason}"
    return causes


def _live_range_ids(s: Session, *, cluster_id: int, bundles: Mapping[str, tuple[str, str]]) -> dict[str, int]:
    if not bundles:
        return {}
    namespaces = {ns for ns, _ in bundles.values()}
    stmt = select(BundleRange.id, BundleRange.namespace, BundleRange.range_name).where(
        BundleRange.cluster_id == cluster_id, BundleRange.retired_at.is_(None), BundleRange.namespace.in_(namespaces)
    )
    live = {(ns, rn): rid for rid, ns, rn in s.execute(stmt)}
    ids = {}
    for bundle, key in bundles.items():
        if key not in live:
            raise InvalidRowError(
                f"ownership[{bundle!r}]",
                f"no live bundle range {key[1]} in namespace {key[0]}; call sync_bundle_ranges for it first",
            )
        ids[bundle] = live[key]
    return ids


def _epoch_ms(value: datetime) -> int:
    return int(value.timestamp() * 1000)
