"""Plans and their actions: creation (idempotent per run), content hash, supersession, reads."""

from __future__ import annotations

import hashlib
import json
import logging
import re
import secrets
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import Select, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.orm import Session, selectinload

from pulsar_rebalance.core import lifecycle
from pulsar_rebalance.core.contract.plan_json import action_from_mapping
from pulsar_rebalance.core.plan import (
    Action,
    InvalidPlanError,
    SplitAction,
    UnloadAction,
    content_hash,
)
from pulsar_rebalance.core.plan import Plan as CorePlan
from pulsar_rebalance.errors import InvalidTransitionError, StoreError, UnknownPlanError
from pulsar_rebalance.store._shared import (
    SYSTEM_ACTOR,
    InvalidRowError,
    UnknownRunError,
    _aware,
    _for_update,
    _json_value,
)
from pulsar_rebalance.store.audit import audit
from pulsar_rebalance.store.tables import PLAN_STATUSES, Approval, Cluster, Plan, PlanAction, Run
from pulsar_rebalance.store.views import ActionView, PlanView, _action_view, _plan_view

logger = logging.getLogger(__name__)

_PLAN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")

FINAL_PLAN_STATUSES = lifecycle.FINAL
"""Statuses a plan never leaves (:mod:`pulsar_rebalance.core.lifecycle`)."""


def create_plan(
    s: Session,
    *,
    plan_id: str | None = None,
    run_id: str,
    cluster_id: int,
    status: Literal["pending", "empty"],
    expires_at: datetime | None,
    dry_run: bool,
    strategies: Mapping[str, Any] | Sequence[str],
    config: Mapping[str, Any],
    summary: Any,
    decision: Any,
    actions: Sequence[Action | Mapping[str, Any]],
    required_approvals: int = 1,
    supersede: bool = True,
) -> str:
    """Store a plan and its actions; return its id. Idempotent per ``run_id``.

    If ``run_id`` already has a plan, its id is returned and nothing is written, whatever the
    arguments: a retried planning task never creates a second plan for the same run.

    Args:
        plan_id: None generates ``p-<yyyymmdd>-<6 hex>``.
        status: ``pending`` (needs approval; at least one action) or ``empty`` (nothing to do; no actions).
        expires_at: end of the approval window; None = never expires.
        strategies: the strategy names used (e.g. ``{"shedder": "ThresholdShedder", ...}``).
        config: the Pulsar-keyed configuration; ``config_hash`` is its SHA-256 over canonical JSON.
        summary: counts, predicted before/after per broker, max usage before/after (a JSON object).
        decision: the raw output of the decision core (JSON).
        actions: the plan's :class:`~pulsar_rebalance.core.plan.SplitAction` /
            :class:`~pulsar_rebalance.core.plan.UnloadAction`, or their row form as dicts
            (:func:`~pulsar_rebalance.core.contract.plan_json.action_from_mapping`: ``kind``, ``namespace`` +
            ``bundle_range`` or ``bundle``, ``source_broker``, ``reason``; unload:
            ``destination_broker``; split: ``boundaries`` and ``split_algorithm``; optional
            ``predicted`` and ``seq``, which defaults to the list index).
        required_approvals: how many different people must approve it (1-5; frozen with the plan).
        supersede: the new plan supersedes the cluster's pending plans (default); False leaves them
            alone (a scheduled run's plan while an operator's plan awaits a decision).

    The actions and the summary are checked as one :class:`~pulsar_rebalance.core.plan.Plan` (seqs
    unique, no bundle split or unloaded twice, ...), whose content hash is stored with the plan.

    Raises:
        InvalidRowError: a malformed argument or action (the field is named, e.g. ``actions[2].boundaries[0]``).
        UnknownRunError: ``run_id`` was never started.
    """
    existing = s.execute(select(Plan.plan_id).where(Plan.run_id == run_id)).scalar_one_or_none()
    if existing is not None:
        logger.info("[%s] run %s already has plan %s; returning it", cluster_id, run_id, existing)
        return existing

    if status not in ("pending", "empty"):
        raise InvalidRowError("status", f"a new plan is 'pending' or 'empty', got {status!r}")
    action_values = [_validate_action(i, a) for i, a in enumerate(actions)]
    if status == "pending" and not action_values:
        raise InvalidRowError("actions", "a pending plan needs at least one action (use status='empty')")
    if status == "empty" and action_values:
        raise InvalidRowError("actions", f"an empty plan has no actions, got {len(action_values)}")
    seqs = [a.seq for a in action_values]
    if len(set(seqs)) != len(seqs):
        raise InvalidRowError("actions", f"duplicate seq values {sorted(seqs)}")
    if plan_id is not None and not _PLAN_ID.fullmatch(plan_id):
        raise InvalidRowError("plan_id", f"{plan_id!r} must be 1-64 letters, digits, '.', '_' or '-'")
    if not isinstance(dry_run, bool):
        raise InvalidRowError("dry_run", f"must be a bool, got {type(dry_run).__name__}")
    if not isinstance(strategies, (Mapping, list, tuple)):
        raise InvalidRowError("strategies", "must be a mapping or a list of strategy names")
    if not isinstance(config, Mapping):
        raise InvalidRowError("config", f"must be a mapping, got {type(config).__name__}")
    if (
        isinstance(required_approvals, bool)
        or not isinstance(required_approvals, int)
        or not 1 <= required_approvals <= 5
    ):
        raise InvalidRowError("required_approvals", f"must be an integer from 1 to 5, got {required_approvals!r}")
    plan_values = {
        "run_id": run_id,
        "cluster_id": cluster_id,
        "status": status,
        "expires_at": _aware("expires_at", expires_at) if expires_at is not None else None,
        "dry_run": dry_run,
        "strategies": _json_value("strategies", strategies if isinstance(strategies, Mapping) else list(strategies)),
        "config": _json_value("config", dict(config)),
        "config_hash": config_hash(config),
        "summary": _json_value("summary", summary),
        "decision": _json_value("decision", decision),
        "required_approvals": required_approvals,
    }
    run_cluster = s.execute(select(Run.cluster_id).where(Run.run_id == run_id)).scalar_one_or_none()
    if run_cluster is None:
        raise UnknownRunError(f"unknown run {run_id!r}; call start_run before create_plan")
    if run_cluster != cluster_id:
        raise InvalidRowError("cluster_id", f"run {run_id!r} belongs to cluster id {run_cluster}, not {cluster_id}")
    cluster = s.execute(select(Cluster.name).where(Cluster.id == cluster_id)).scalar_one()
    try:
        planned = CorePlan(
            cluster=cluster,
            run_id=run_id,
            dry_run=dry_run,
            summary=summary,
            actions=tuple(sorted(action_values, key=lambda a: a.seq)),
        )
    except InvalidPlanError as exc:
        raise InvalidRowError(exc.field, f"{exc.problem} (got {exc.value!r})") from exc
    plan_values["content_hash"] = planned.content_hash()

    for _attempt in range(5):
        candidate = plan_id if plan_id is not None else new_plan_id()
        stmt = pg_insert(Plan).values(plan_id=candidate, **plan_values).on_conflict_do_nothing()
        inserted = s.execute(stmt.returning(Plan.plan_id)).scalar_one_or_none()
        if inserted is not None:
            break
        concurrent = s.execute(select(Plan.plan_id).where(Plan.run_id == run_id)).scalar_one_or_none()
        if concurrent is not None:  # another attempt of the same task won the race
            return concurrent
        if plan_id is not None:
            raise InvalidRowError("plan_id", f"{plan_id!r} is already used by another run")
    else:  # pragma: no cover - five random 24-bit collisions in a row
        raise StoreError("could not generate a unique plan id in 5 attempts")

    if planned.actions:
        s.execute(pg_insert(PlanAction).values([{"plan_id": inserted, **a.to_row()} for a in planned.actions]))
    audit(
        s,
        event="plan.created",
        actor=SYSTEM_ACTOR,
        run_id=run_id,
        plan_id=inserted,
        details={"status": status, "actions": len(action_values), "dry_run": dry_run},
    )
    logger.info("[%s] created plan %s with %d actions (run %s)", cluster_id, inserted, len(action_values), run_id)
    if supersede:
        supersede_plans(
            s,
            cluster_id=cluster_id,
            by_plan_id=inserted,
            statuses=("pending",),
            reason=f"a newer snapshot produced plan {inserted}",
        )
    return inserted


def plans_awaiting_decision(
    s: Session, *, cluster_id: int, now: datetime | None = None
) -> list[tuple[str, datetime | None]]:
    """``(plan_id, expires_at)`` of the cluster's pending plans still within their approval window
    (``expires_at`` later than ``now``, or none), newest first."""
    when = _aware("now", now)
    stmt = (
        select(Plan.plan_id, Plan.expires_at)
        .where(
            Plan.cluster_id == cluster_id,
            Plan.status == "pending",
            (Plan.expires_at.is_(None)) | (Plan.expires_at > when),
        )
        .order_by(Plan.created_at.desc(), Plan.plan_id.desc())
    )
    return [(plan_id, expires) for plan_id, expires in s.execute(stmt)]


def plan_content_hash(*, run_id: str, dry_run: bool, actions: Sequence[Mapping[str, Any] | Any]) -> str:
    """SHA-256 (hex) of what a plan will do: its run, dry-run flag and every action's move
    (:func:`pulsar_rebalance.core.plan.content_hash`; ``actions`` may be views, rows or typed actions).

    Reasons and predictions are not part of it (they explain a move, they do not change it). An
    approval records the hash its approver saw and the executor recomputes it from the stored actions.
    """
    return content_hash(run_id=run_id, dry_run=dry_run, actions=actions)


def supersede_plans(
    s: Session,
    *,
    cluster_id: int,
    by_plan_id: str | None,
    reason: str,
    statuses: Collection[str] = ("pending",),
    older_than: datetime | None = None,
    exclude: Collection[str] = (),
    only: Collection[str] | None = None,
    now: datetime | None = None,
) -> list[str]:
    """Mark the cluster's plans in ``statuses`` (pending and/or approved) ``superseded``; returns their ids.

    Each gets an approval row (decision ``superseded`` by ``system``, the reason as comment), its
    ``superseded_by`` and an audit row. Only plans created before ``older_than`` (default: all)
    and not in ``exclude`` (and never ``by_plan_id`` itself) are touched; ``only`` restricts to those ids.
    """
    allowed = {"pending", "approved"}
    if not set(statuses) <= allowed:
        raise InvalidRowError("statuses", f"only {sorted(allowed)} plans can be superseded, got {sorted(statuses)}")
    when = _aware("now", now)
    stmt = select(Plan).where(Plan.cluster_id == cluster_id, Plan.status.in_(list(statuses)))
    if by_plan_id is not None:
        stmt = stmt.where(Plan.plan_id != by_plan_id)
    if older_than is not None:
        stmt = stmt.where(Plan.created_at < older_than)
    if exclude:
        stmt = stmt.where(Plan.plan_id.not_in(list(exclude)))
    if only is not None:
        stmt = stmt.where(Plan.plan_id.in_(list(only)))
    done = []
    for plan in s.execute(_for_update(stmt.order_by(Plan.created_at))).scalars():
        previous = _move_plan(plan, "superseded", when)
        if previous == "pending":  # a pending plan has no approval row yet; an approved one keeps its own
            s.add(
                Approval(
                    plan_id=plan.plan_id,
                    decision="superseded",
                    decided_by=SYSTEM_ACTOR,
                    decided_at=when,
                    comment=reason,
                    plan_hash=plan.content_hash,
                    via="system",
                )
            )
        plan.superseded_by = by_plan_id
        s.flush()
        audit(
            s,
            event="plan.superseded",
            actor=SYSTEM_ACTOR,
            run_id=plan.run_id,
            plan_id=plan.plan_id,
            details={"from": previous, "by": by_plan_id, "reason": reason},
        )
        logger.info("[%s] plan superseded (%s): %s", plan.plan_id, previous, reason)
        done.append(plan.plan_id)
    return done


def plans_superseded_by(s: Session, *, plan_id: str) -> list[str]:
    """Ids of the plans that ``plan_id`` superseded."""
    return list(
        s.execute(select(Plan.plan_id).where(Plan.superseded_by == plan_id).order_by(Plan.created_at)).scalars()
    )


def new_plan_id(now: datetime | None = None) -> str:
    """A short readable plan id: ``p-<yyyymmdd>-<6 hex>`` (UTC date)."""
    return f"p-{_aware('now', now):%Y%m%d}-{secrets.token_hex(3)}"


def config_hash(config: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the config as canonical JSON (sorted keys, no whitespace)."""
    canonical = json.dumps(config, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def get_plan(s: Session, *, plan_id: str) -> PlanView:
    """The plan with its actions (by ``seq``) and approval.

    Raises:
        UnknownPlanError: no such plan.
    """
    plan = s.execute(_plan_query().where(Plan.plan_id == plan_id)).scalar_one_or_none()
    if plan is None:
        raise UnknownPlanError(f"no plan with id {plan_id!r}", plan_id=plan_id)
    return _plan_view(plan)


def plan_for_run(s: Session, *, run_id: str) -> PlanView | None:
    """The plan created by run ``run_id``, if any."""
    plan = s.execute(_plan_query().where(Plan.run_id == run_id)).scalar_one_or_none()
    return _plan_view(plan) if plan is not None else None


def list_plans(
    s: Session, *, status: str | None = None, limit: int = 20, cluster_id: int | None = None
) -> list[PlanView]:
    """The newest plans first, optionally filtered by status and cluster."""
    if status is not None and status not in PLAN_STATUSES:
        raise InvalidRowError("status", f"unknown plan status {status!r}; one of {', '.join(PLAN_STATUSES)}")
    if limit < 1:
        raise InvalidRowError("limit", f"must be at least 1, got {limit}")
    stmt = _plan_query().order_by(Plan.created_at.desc(), Plan.plan_id.desc()).limit(limit)
    if status is not None:
        stmt = stmt.where(Plan.status == status)
    if cluster_id is not None:
        stmt = stmt.where(Plan.cluster_id == cluster_id)
    return [_plan_view(p) for p in s.execute(stmt).scalars()]


def get_action(s: Session, *, action_id: int) -> ActionView:
    """One plan action (``InvalidTransitionError`` if the id is unknown: callers only hold ids we issued)."""
    row = s.get(PlanAction, action_id)
    if row is None:
        raise InvalidTransitionError(f"no plan action with id {action_id}")
    return _action_view(row)


def _validate_action(i: int, action: Action | Mapping[str, Any]) -> Action:
    """A typed action (given, or read from its row form), with errors naming ``actions[i].<field>``."""
    if isinstance(action, (SplitAction, UnloadAction)):
        return action
    if not isinstance(action, Mapping):
        raise InvalidRowError(f"actions[{i}]", f"must be an action or a mapping, got {type(action).__name__}")
    try:
        return action_from_mapping(action, default_seq=i)
    except InvalidPlanError as exc:
        raise InvalidRowError(exc.within(f"actions[{i}]").field, f"{exc.problem} (got {exc.value!r})") from exc


def _move_plan(plan: Plan, status: str, when: datetime) -> str:
    """Set ``plan``'s status (and ``updated_at``) where the lifecycle allows it
    (:data:`pulsar_rebalance.core.lifecycle.TRANSITIONS`); returns the status it had."""
    if not lifecycle.can_transition(plan.status, status):
        allowed = ", ".join(sorted(lifecycle.TRANSITIONS.get(plan.status, ()))) or "nothing (final)"  # type: ignore[call-overload]
        raise InvalidTransitionError(
            f"plan {plan.plan_id} cannot go from {plan.status} to {status}; allowed from {plan.status}: {allowed}"
        )
    previous = plan.status
    plan.status = status
    plan.updated_at = when
    return previous


def _lock_plan(s: Session, plan_id: str) -> Plan | None:
    return s.execute(_for_update(select(Plan).where(Plan.plan_id == plan_id))).scalar_one_or_none()


def _plan_query() -> Select[Plan]:
    return select(Plan).options(selectinload(Plan.actions), selectinload(Plan.approval), selectinload(Plan.votes))
