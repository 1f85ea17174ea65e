"""The frozen dataclasses repository functions return (never ORM rows), and the row -> view converters."""

from __future__ import annotations

from dataclasses import Field, asdict, dataclass, fields, is_dataclass
from datetime import datetime
from typing import Any, ClassVar

from pulsar_rebalance.core.contract.plan_json import action_from_mapping
from pulsar_rebalance.core.lifecycle import PlanKind, plan_kind
from pulsar_rebalance.core.plan import ACTION_ROW_FIELDS, Action, InvalidPlanError
from pulsar_rebalance.core.plan import Plan as CorePlan
from pulsar_rebalance.store.tables import BundleRange, PlacementPolicy, Plan, PlanAction, Run


class _View:
    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]  # every view is a dataclass

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict: datetimes as ISO-8601 strings, tuples as lists."""
        return _jsonable(asdict(self))


@dataclass(frozen=True)
class RunView(_View):
    run_id: str
    cluster_id: int
    status: str
    stage: str | None
    started_at: datetime
    finished_at: datetime | None
    params: dict[str, Any]
    work_dir: str | None


@dataclass(frozen=True)
class PlacementPoliciesView(_View):
    """A run's placement constraints (``placement_policies``)."""

    run_id: str
    cluster_id: int
    collected_at: datetime
    namespace_isolation_policies: dict[str, Any]
    failure_domains: dict[str, Any]
    anti_affinity_groups: dict[str, Any]

    def contract(self) -> dict[str, Any]:
        """The three ``decide`` contract fields (``namespaceIsolationPolicies``, ``failureDomains``,
        ``antiAffinityGroups``), as collect_load read them."""
        return {
            "namespaceIsolationPolicies": self.namespace_isolation_policies,
            "failureDomains": self.failure_domains,
            "antiAffinityGroups": self.anti_affinity_groups,
        }


@dataclass(frozen=True)
class BundleRangeView(_View):
    id: int
    cluster_id: int
    namespace: str
    range_name: str
    lower: int
    upper: int
    created_run_id: str
    created_at: datetime
    retired_run_id: str | None
    retired_at: datetime | None
    parent_id: int | None
    created_by_action_id: int | None

    @property
    def bundle(self) -> str:
        """The full bundle name, ``tenant/namespace/0x..._0x...``."""
        return f"{self.namespace}/{self.range_name}"


@dataclass(frozen=True)
class RangeDiff(_View):
    """What :func:`sync_bundle_ranges` changed in one namespace."""

    namespace: str
    created: tuple[BundleRangeView, ...]
    retired: tuple[BundleRangeView, ...]
    unchanged: tuple[str, ...]

    @property
    def changed(self) -> bool:
        return bool(self.created or self.retired)


@dataclass(frozen=True)
class OwnershipChange(_View):
    """One bundle whose owner changed: ``from_broker`` None = newly seen, ``to_broker`` None = gone."""

    bundle: str
    from_broker: str | None
    to_broker: str | None
    cause: str | None
    cause_action_id: int | None


@dataclass(frozen=True)
class OwnershipDiff(_View):
    """What :func:`sync_ownership` changed."""

    changes: tuple[OwnershipChange, ...]
    unchanged: int

    @property
    def changed(self) -> bool:
        return bool(self.changes)

    @property
    def moved(self) -> tuple[OwnershipChange, ...]:
        return tuple(c for c in self.changes if c.from_broker is not None and c.to_broker is not None)


@dataclass(frozen=True)
class OwnershipRecord(_View):
    """One row of the ``bundle_ownership_history`` view: an ownership interval and its cause."""

    cluster: str
    bundle: str
    broker_id: str
    valid_from: datetime
    valid_to: datetime | None
    cause: str
    observed_run_id: str
    ended_run_id: str | None
    action_id: int | None
    action_kind: str | None
    action_reason: str | None
    plan_id: str | None
    approved_by: str | None
    decided_at: datetime | None
    approval_comment: str | None


@dataclass(frozen=True)
class ActionView(_View):
    id: int
    plan_id: str
    seq: int
    kind: str
    namespace: str
    bundle_range: str
    bundle: str
    source_broker: str
    destination_broker: str | None
    boundaries: list[int] | None
    split_algorithm: str | None
    reason: str
    predicted: dict[str, Any] | None
    state: str
    attempts: int
    error: str | None
    started_at: datetime | None
    finished_at: datetime | None
    result: dict[str, Any] | None

    @property
    def planned(self) -> Action:
        """The action as the plan's type (what the executor applies), read from this row.

        Raises:
            InvalidPlanError: the stored row is not a valid action (naming the field).
        """
        return action_from_mapping({k: getattr(self, k) for k in ACTION_ROW_FIELDS})


@dataclass(frozen=True)
class ApprovalView(_View):
    plan_id: str
    decision: str
    decided_by: str
    decided_at: datetime
    comment: str | None
    plan_hash: str | None = None
    via: str | None = None
    votes: tuple[str, ...] = ()  # approvers so far, in order (a plan that needs several)
    required_approvals: int = 1

    @property
    def final(self) -> bool:
        """False for an approval vote that leaves the plan pending (more approvers needed)."""
        return self.decision != "approved" or len(self.votes) >= self.required_approvals


@dataclass(frozen=True)
class VoteView(_View):
    voter: str
    voted_at: datetime
    comment: str | None
    via: str
    plan_hash: str | None = None


@dataclass(frozen=True)
class PlanView(_View):
    plan_id: str
    run_id: str
    cluster_id: int
    status: str
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None
    dry_run: bool
    strategies: Any
    config: dict[str, Any]
    config_hash: str
    summary: Any
    decision: Any
    result: Any
    actions: tuple[ActionView, ...]
    approval: ApprovalView | None
    content_hash: str | None = None
    gate: dict[str, Any] | None = None
    superseded_by: str | None = None
    stop_requested: dict[str, Any] | None = None
    required_approvals: int = 1
    votes: tuple[VoteView, ...] = ()

    @property
    def kind(self) -> PlanKind:
        """What the plan is for (``rebalance``, ``drain``, ``fill``, ``rollback``, ``fix``): :func:`core.lifecycle.plan_kind`."""
        return plan_kind(self.summary)

    def to_plan(self, *, cluster: str) -> CorePlan:
        """The stored plan as the core's :class:`~pulsar_rebalance.core.plan.Plan` (``cluster``: its name).

        Raises:
            InvalidPlanError: a stored action or the summary is not valid (the field is named, e.g.
                ``actions[1].boundaries[0]``).
        """
        planned = []
        for i, a in enumerate(self.actions):
            try:
                planned.append(a.planned)
            except InvalidPlanError as exc:
                raise exc.within(f"actions[{i}]") from None
        return CorePlan(
            cluster=cluster, run_id=self.run_id, dry_run=self.dry_run, actions=tuple(planned), summary=self.summary
        )


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if is_dataclass(value) and not isinstance(value, type):
        return _jsonable({f.name: getattr(value, f.name) for f in fields(value)})
    return value


def _placement_policies_view(r: PlacementPolicy) -> PlacementPoliciesView:
    return PlacementPoliciesView(**{f.name: getattr(r, f.name) for f in fields(PlacementPoliciesView)})


def _run_view(r: Run) -> RunView:
    return RunView(
        run_id=r.run_id,
        cluster_id=r.cluster_id,
        status=r.status,
        stage=r.stage,
        started_at=r.started_at,
        finished_at=r.finished_at,
        params=r.params,
        work_dir=r.work_dir,
    )


def _range_view(r: BundleRange) -> BundleRangeView:
    return BundleRangeView(
        id=r.id,
        cluster_id=r.cluster_id,
        namespace=r.namespace,
        range_name=r.range_name,
        lower=r.lower,
        upper=r.upper,
        created_run_id=r.created_run_id,
        created_at=r.created_at,
        retired_run_id=r.retired_run_id,
        retired_at=r.retired_at,
        parent_id=r.parent_id,
        created_by_action_id=r.created_by_action_id,
    )


def _action_view(a: PlanAction) -> ActionView:
    return ActionView(
        id=a.id,
        plan_id=a.plan_id,
        seq=a.seq,
        kind=a.kind,
        namespace=a.namespace,
        bundle_range=a.bundle_range,
        bundle=a.bundle,
        source_broker=a.source_broker,
        destination_broker=a.destination_broker,
        boundaries=a.boundaries,
        split_algorithm=a.split_algorithm,
        reason=a.reason,
        predicted=a.predicted,
        state=a.state,
        attempts=a.attempts,
        error=a.error,
        started_at=a.started_at,
        finished_at=a.finished_at,
        result=a.result,
    )


def _plan_view(p: Plan) -> PlanView:
    approval = p.approval
    return PlanView(
        plan_id=p.plan_id,
        run_id=p.run_id,
        cluster_id=p.cluster_id,
        status=p.status,
        created_at=p.created_at,
        updated_at=p.updated_at,
        expires_at=p.expires_at,
        dry_run=p.dry_run,
        strategies=p.strategies,
        config=p.config,
        config_hash=p.config_hash,
        summary=p.summary,
        decision=p.decision,
        result=p.result,
        actions=tuple(_action_view(a) for a in p.actions),
        approval=(
            ApprovalView(
                plan_id=approval.plan_id,
                decision=approval.decision,
                decided_by=approval.decided_by,
                decided_at=approval.decided_at,
                comment=approval.comment,
                plan_hash=approval.plan_hash,
                via=approval.via,
                votes=tuple(v.voter for v in p.votes),
                required_approvals=p.required_approvals,
            )
            if approval is not None
            else None
        ),
        required_approvals=p.required_approvals,
        votes=tuple(
            VoteView(voter=v.voter, voted_at=v.voted_at, comment=v.comment, via=v.via, plan_hash=v.plan_hash)
            for v in p.votes
        ),
        content_hash=p.content_hash,
        gate=p.gate,
        superseded_by=p.superseded_by,
        stop_requested=p.stop_requested,
    )
