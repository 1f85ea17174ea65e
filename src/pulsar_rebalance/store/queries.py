"""Read-only queries behind the plan pages of the Airflow plugin (``orchestration/ui``).

Plain functions whose first parameter is a ``Session`` (the caller owns it, as in
:mod:`pulsar_rebalance.store.repository`); they return frozen dataclasses, never ORM rows, and
never write.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from pulsar_rebalance.core.progress import ActionProgress, Pacing, Progress
from pulsar_rebalance.core.progress import plan_progress as _compute_progress
from pulsar_rebalance.errors import UnknownPlanError
from pulsar_rebalance.store import repository as repo
from pulsar_rebalance.store.tables import AuditLog, Cluster, Plan, PlanAction, Run


@dataclass(frozen=True)
class PlanRow:
    """One line of the plans list."""

    plan_id: str
    run_id: str
    cluster: str
    status: str
    created_at: datetime
    expires_at: datetime | None
    dry_run: bool
    splits: int
    unloads: int
    max_usage_before: float | None
    max_usage_after_predicted: float | None
    max_usage_after_measured: float | None
    decided_by: str | None
    decision: str | None
    required_approvals: int = 1
    voters: tuple[str, ...] = ()  # approvals so far of a plan that needs several


@dataclass(frozen=True)
class PlanDetail:
    """Everything the plan page shows about one plan."""

    plan: repo.PlanView
    cluster: str
    run_params: dict[str, Any]
    run_status: str | None
    events: tuple[dict[str, Any], ...]

    def action_dicts(self) -> list[dict[str, Any]]:
        """The actions as plain mappings (what :func:`core.plan_summary.summarize_plan` takes)."""
        return [asdict(a) for a in self.plan.actions]

    def progress(self, now: datetime | None = None) -> Progress:
        """The execution's progress and ETA (:mod:`pulsar_rebalance.core.progress`), paced by the run's params."""
        return ProgressInputs(
            actions=tuple(ActionProgress.of(a) for a in self.action_dicts()),
            params=self.run_params,
            status=self.plan.status,
            stop_requested=bool(self.plan.stop_requested),
        ).progress(now)


def list_plan_rows(
    s: Session, *, limit: int = 50, status: str | None = None, cluster: str | None = None
) -> list[PlanRow]:
    """The newest plans first, with their cluster's name and headline numbers (only cluster ``cluster``'s
    if given: none for a cluster never recorded)."""
    cluster_id = None
    if cluster is not None:
        cluster_id = s.execute(select(Cluster.id).where(Cluster.name == cluster)).scalar_one_or_none()
        if cluster_id is None:
            return []
    plans = repo.list_plans(s, status=status, limit=limit, cluster_id=cluster_id)
    names = _cluster_names(s, {p.cluster_id for p in plans})
    rows = []
    for p in plans:
        summary = p.summary or {}
        result = p.result or {}
        rows.append(
            PlanRow(
                plan_id=p.plan_id,
                run_id=p.run_id,
                cluster=names.get(p.cluster_id, str(p.cluster_id)),
                status=p.status,
                created_at=p.created_at,
                expires_at=p.expires_at,
                dry_run=p.dry_run,
                splits=sum(a.kind == "split" for a in p.actions),
                unloads=sum(a.kind == "unload" for a in p.actions),
                max_usage_before=summary.get("maxUsageBefore"),
                max_usage_after_predicted=summary.get("maxUsageAfterPredicted"),
                max_usage_after_measured=result.get("max_usage_after") if isinstance(result, dict) else None,
                decided_by=p.approval.decided_by if p.approval else None,
                decision=p.approval.decision if p.approval else None,
                required_approvals=p.required_approvals,
                voters=tuple(v.voter for v in p.votes),
            )
        )
    return rows


def plan_detail(s: Session, *, plan_id: str, events: int = 50) -> PlanDetail:
    """One plan with its cluster, its run's params and status, and its newest audit events.

    Raises:
        UnknownPlanError: no such plan.
    """
    plan = repo.get_plan(s, plan_id=plan_id)
    run = s.execute(select(Run.params, Run.status).where(Run.run_id == plan.run_id)).first()
    audit = s.execute(
        select(AuditLog.at, AuditLog.actor, AuditLog.event, AuditLog.details)
        .where(AuditLog.plan_id == plan_id)
        .order_by(AuditLog.id.desc())
        .limit(events)
    ).all()
    return PlanDetail(
        plan=plan,
        cluster=_cluster_names(s, {plan.cluster_id}).get(plan.cluster_id, str(plan.cluster_id)),
        run_params=dict(run.params or {}) if run else {},
        run_status=run.status if run else None,
        events=tuple({"at": a.at, "actor": a.actor, "event": a.event, "details": a.details} for a in audit),
    )


_PROGRESS_COLUMNS = (
    PlanAction.seq,
    PlanAction.kind,
    PlanAction.state,
    PlanAction.bundle,
    PlanAction.source_broker,
    PlanAction.destination_broker,
    PlanAction.started_at,
    PlanAction.finished_at,
    PlanAction.predicted,
    PlanAction.result,
    PlanAction.error,
)


@dataclass(frozen=True)
class ProgressInputs:
    """What a plan's progress is computed from: its actions, its run's params, its status and stop switch."""

    actions: tuple[ActionProgress, ...]
    params: Mapping[str, Any]
    status: str
    stop_requested: bool

    def progress(self, now: datetime | None = None, pacing: Pacing | None = None) -> Progress:
        """Progress and ETA (:func:`pulsar_rebalance.core.progress.plan_progress`); ``pacing``: the
        executor's own (default: the run's params). A stop request counts while the plan is executing."""
        return _compute_progress(
            self.actions,
            pacing or Pacing.of(self.params),
            now or datetime.now(UTC),
            status=self.status,
            stopping=self.stop_requested and self.status == "executing",
        )


def progress_inputs(s: Session, *, plan_id: str) -> ProgressInputs:
    """:class:`ProgressInputs` of plan ``plan_id`` from only the columns progress needs (cheap enough for
    the executor to read after every action).

    Raises:
        UnknownPlanError: no such plan.
    """
    head = s.execute(
        select(Plan.status, Plan.stop_requested, Run.params)
        .join(Run, Run.run_id == Plan.run_id, isouter=True)
        .where(Plan.plan_id == plan_id)
    ).first()
    if head is None:
        raise UnknownPlanError(f"no plan with id {plan_id!r}", plan_id=plan_id)
    rows = s.execute(select(*_PROGRESS_COLUMNS).where(PlanAction.plan_id == plan_id).order_by(PlanAction.seq)).all()
    return ProgressInputs(
        actions=tuple(ActionProgress.of(r._asdict()) for r in rows),
        params=dict(head.params or {}),
        status=head.status,
        stop_requested=bool(head.stop_requested),
    )


@dataclass(frozen=True)
class BrokerRow:
    """One line of the Brokers page: a broker as the latest collection saw it, and its cordon."""

    cluster: str
    broker: str
    bundles: int  # bundles it owns (the open ownership rows: as of the latest collection or executed unload)
    usage: float | None  # its weighted max usage in the latest load report we stored
    msg_rate: float | None  # msg/s in + out, same report
    reported_at: datetime | None  # when that report was collected (its run's start)
    in_latest: bool  # listed by the cluster's latest collection (False: gone, or cordoned before ever seen)
    cordon: repo.Cordon | None


_LATEST_LOAD = text(
    """
    SELECT DISTINCT ON (bl.broker_id) bl.broker_id, bl.weighted_max_usage, bl.msg_rate_in, bl.msg_rate_out,
           r.started_at
    FROM broker_load bl JOIN runs r ON r.run_id = bl.run_id
    WHERE r.cluster_id = :cluster_id
    ORDER BY bl.broker_id, r.started_at DESC, r.run_id DESC
    """
)


def broker_rows(s: Session) -> list[BrokerRow]:
    """Every broker of every cluster: those the latest collection listed, those seen before and those
    cordoned, with the bundles each owns, its latest stored usage and its cordon (who, when, why)."""
    from pulsar_rebalance.store.tables import Broker, Ownership

    rows: list[BrokerRow] = []
    cordons = {(c.cluster, c.broker): c for c in repo.cordoned(s)}
    for cid, name in s.execute(select(Cluster.id, Cluster.name).order_by(Cluster.name)).all():
        seen = dict(s.execute(select(Broker.broker_id, Broker.last_seen_run_id).where(Broker.cluster_id == cid)).all())
        latest = max(
            (r for r in s.execute(select(Run.run_id, Run.started_at).where(Run.run_id.in_(set(seen.values()))))),
            key=lambda r: (r.started_at, r.run_id),
            default=None,
        )
        owned: dict[str, int] = {}
        for (broker,) in s.execute(
            select(Ownership.broker_id).where(Ownership.cluster_id == cid, Ownership.valid_to.is_(None))
        ):
            owned[broker] = owned.get(broker, 0) + 1
        load = {r.broker_id: r for r in s.execute(_LATEST_LOAD, {"cluster_id": cid})}
        names = set(seen) | set(owned) | {b for c, b in cordons if c == name}
        for broker in sorted(names):
            report = load.get(broker)
            rates = [report.msg_rate_in, report.msg_rate_out] if report else []
            rows.append(
                BrokerRow(
                    cluster=name,
                    broker=broker,
                    bundles=owned.get(broker, 0),
                    usage=report.weighted_max_usage if report else None,
                    msg_rate=sum(r for r in rates if r is not None) if rates else None,
                    reported_at=report.started_at if report else None,
                    in_latest=latest is not None and seen.get(broker) == latest.run_id,
                    cordon=cordons.get((name, broker)),
                )
            )
    return rows


def _cluster_names(s: Session, ids: set[int]) -> dict[int, str]:
    if not ids:
        return {}
    return dict(s.execute(select(Cluster.id, Cluster.name).where(Cluster.id.in_(ids))).all())
