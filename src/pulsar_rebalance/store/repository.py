"""Reads and writes of the state store: plain functions whose first parameter is a ``Session``.

**The caller owns the transaction** (``with session_scope(engine) as s: ...``): nothing here commits,
so a task's writes land together or not at all. The one deliberate exception is the expiry recorded
by :func:`decide_plan`, explained there.

Rules every function follows:

* Keyword-only arguments after the session; plain frozen dataclasses out, never ORM rows.
* Input is validated *before* the first write; a bad row raises :class:`InvalidRowError` naming the
  offending field (``rows[3].cpu_usage``), so nothing is half-written even inside a larger transaction.
* Writes are idempotent: upserts keyed by ``(run_id, ...)``, "sync" functions that diff against the
  stored state, and :func:`create_plan` keyed by ``run_id``, so an Airflow retry overwrites or
  reconciles instead of duplicating.
* Plans and actions are immutable after creation except ``plans.status`` and the action state columns
  (a database trigger enforces it too). Every decision and state transition writes an ``audit_log``
  row in the same transaction.
* Timestamps are timezone-aware ``datetime``; ``now=None`` / ``at=None`` means "now" in UTC. Passing a
  naive datetime is a ``ValueError``.

Action state machine (:data:`ALLOWED_TRANSITIONS`; anything else raises ``InvalidTransitionError``)::

    pending      ──► in_progress | skipped
    in_progress  ──► completed | failed | skipped     (skipped: reconciled as moot)
    failed       ──► in_progress                      (retry: attempts += 1)
    completed, skipped: final

An action may only move while its plan is ``executing``; see :data:`PLAN_TRANSITIONS` for plans.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
import secrets
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, fields, is_dataclass
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, Literal

from sqlalchemy import Connection, Select, delete, func, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, selectinload

from pulsar_rebalance.errors import (
    ExecutionInProgressError,
    InvalidTransitionError,
    PlanAlreadyDecidedError,
    PlanAtGateError,
    PlanChangedError,
    PlanExpiredError,
    PlanStateError,
    PlanSupersededError,
    StoreError,
    UnknownPlanError,
)
from pulsar_rebalance.store.tables import (
    ACTION_KINDS,
    PLAN_STATUSES,
    Approval,
    AuditLog,
    Broker,
    BrokerLoad,
    BundleLoad,
    BundleRange,
    BundleTimeAverage,
    Cluster,
    Ownership,
    Plan,
    PlanAction,
    Run,
    StrategyState,
)
from pulsar_rebalance.urls import redact_userinfo

logger = logging.getLogger(__name__)

MAX_BOUNDARY = 0xFFFFFFFF
"""Pulsar's ``NamespaceBundles.FULL_UPPER_BOUND``: bundle hash ranges live in [0, 2^32 - 1]."""

_RANGE_NAME = re.compile(r"0x[0-9a-f]{8}_0x[0-9a-f]{8}")
_PLAN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")

ActionState = Literal["pending", "in_progress", "completed", "failed", "skipped"]
Decision = Literal["approved", "rejected"]

ALLOWED_TRANSITIONS: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        "pending": frozenset({"in_progress", "skipped"}),
        "in_progress": frozenset({"completed", "failed", "skipped"}),
        "failed": frozenset({"in_progress"}),
        "completed": frozenset(),
        "skipped": frozenset(),
    }
)
"""Action state machine: from-state -> states it may move to (see the module docstring)."""

PLAN_TRANSITIONS: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        "approved": frozenset({"executing"}),
        "executing": frozenset({"executed", "partially_executed", "failed", "interrupted", "aborted"}),
        "interrupted": frozenset({"executing", "aborted"}),
        "partially_executed": frozenset({"executing", "aborted"}),
        "failed": frozenset({"executing", "aborted"}),
    }
)
"""Execution-phase plan statuses settable with :func:`set_plan_status`.

``pending -> approved|rejected`` happens only through :func:`decide_plan`, ``pending -> expired``
only through :func:`expire_plan` and ``pending|approved -> superseded`` only through
:func:`supersede_plans` (all three also write the approval row); ``empty``, ``rejected``,
``expired``, ``superseded``, ``aborted`` and ``executed`` are final. Only an approved plan can ever
start executing; ``interrupted`` is an execution whose process died (its lock was released by
Postgres when the connection ended): it is resumed or aborted.
"""

FINAL_PLAN_STATUSES = frozenset({"empty", "rejected", "expired", "superseded", "aborted", "executed"})
VIA = ("airflow-gate", "cli", "policy", "system")

SYSTEM_ACTOR = "system"


class InvalidRowError(StoreError, ValueError):
    """Input to a repository function is malformed; ``field`` names the offending value."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class UnknownRunError(StoreError, LookupError):
    """No ``runs`` row with that id (call :func:`start_run` first)."""


# --------------------------------------------------------------------------------------------- views


class _View:
    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict: datetimes as ISO-8601 strings, tuples as lists."""
        return _jsonable(asdict(self))  # type: ignore[call-overload, no-any-return]


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


@dataclass(frozen=True)
class ApprovalView(_View):
    plan_id: str
    decision: str
    decided_by: str
    decided_at: datetime
    comment: str | None
    plan_hash: str | None = None
    via: str | None = None


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


# ------------------------------------------------------------------------------------ clusters, runs


def get_or_create_cluster(s: Session, *, name: str, admin_url: str) -> int:
    """The id of cluster ``name``, creating it if needed (a changed ``admin_url`` is updated)."""
    _require_text("name", name)
    _require_text("admin_url", admin_url)
    admin_url = redact_userinfo(admin_url)  # credentials never stored (the client strips them anyway)
    stmt = pg_insert(Cluster).values(name=name, admin_url=admin_url)
    stmt = stmt.on_conflict_do_update(index_elements=[Cluster.name], set_={"admin_url": stmt.excluded.admin_url})
    return int(s.execute(stmt.returning(Cluster.id)).scalar_one())


def start_run(
    s: Session, *, run_id: str, cluster_id: int, params: Mapping[str, Any] | None = None, work_dir: str | None = None
) -> RunView:
    """Record that run ``run_id`` started (idempotent: a retry marks it running again).

    On a retry, ``params`` and ``work_dir`` are replaced, ``finished_at`` cleared, ``started_at`` and
    ``stage`` kept.

    Raises:
        InvalidRowError: the run id already belongs to another cluster, or params are not JSON.
    """
    _require_text("run_id", run_id)
    params_json = _json_value("params", dict(params or {}))
    stmt = pg_insert(Run).values(
        run_id=run_id, cluster_id=cluster_id, params=params_json, work_dir=work_dir, status="running"
    )
    stmt = stmt.on_conflict_do_update(
        index_elements=[Run.run_id],
        set_={
            "status": "running",
            "finished_at": None,
            "params": stmt.excluded.params,
            "work_dir": stmt.excluded.work_dir,
        },
        where=Run.cluster_id == stmt.excluded.cluster_id,
    )
    row = s.execute(stmt.returning(Run), execution_options={"populate_existing": True}).scalar_one_or_none()
    if row is None:
        other = s.execute(select(Run.cluster_id).where(Run.run_id == run_id)).scalar_one()
        raise InvalidRowError("run_id", f"run {run_id!r} already exists for cluster id {other}, not {cluster_id}")
    return _run_view(row)


def set_run_stage(s: Session, *, run_id: str, stage: str) -> None:
    """Record the pipeline stage a run has reached (e.g. ``collect_load``)."""
    _require_text("stage", stage)
    if s.execute(update(Run).where(Run.run_id == run_id).values(stage=stage).returning(Run.run_id)).first() is None:
        raise UnknownRunError(f"unknown run {run_id!r}; call start_run first")


def finish_run(s: Session, *, run_id: str, status: Literal["succeeded", "failed", "nothing_to_do"]) -> None:
    """Mark a run finished with ``status`` and stamp ``finished_at``."""
    if status not in ("succeeded", "failed", "nothing_to_do"):
        raise InvalidRowError("status", f"must be succeeded, failed or nothing_to_do, got {status!r}")
    stmt = update(Run).where(Run.run_id == run_id).values(status=status, finished_at=func.now())
    if s.execute(stmt.returning(Run.run_id)).first() is None:
        raise UnknownRunError(f"unknown run {run_id!r}; call start_run first")


def get_run(s: Session, *, run_id: str) -> RunView:
    row = s.get(Run, run_id)
    if row is None:
        raise UnknownRunError(f"unknown run {run_id!r}")
    return _run_view(row)


# ------------------------------------------------------------------------------------- load samples


def upsert_brokers(s: Session, *, cluster_id: int, run_id: str, brokers: Mapping[str, str]) -> None:
    """Record the brokers seen by ``run_id``: ``{broker_id: web_service_url}``.

    New brokers get ``first_seen_run_id = run_id``; known ones get their URL and ``last_seen_run_id``
    refreshed.
    """
    values = []
    for broker_id, url in brokers.items():
        _require_text(f"brokers[{broker_id!r}]", broker_id)
        _require_text(f"brokers[{broker_id!r}]", url)
        values.append(
            {
                "cluster_id": cluster_id,
                "broker_id": broker_id,
                "web_service_url": url,
                "first_seen_run_id": run_id,
                "last_seen_run_id": run_id,
            }
        )
    if not values:
        return
    stmt = pg_insert(Broker).values(values)
    stmt = stmt.on_conflict_do_update(
        index_elements=[Broker.cluster_id, Broker.broker_id],
        set_={"web_service_url": stmt.excluded.web_service_url, "last_seen_run_id": stmt.excluded.last_seen_run_id},
    )
    s.execute(stmt)


_BROKER_LOAD_FLOATS = (
    "cpu_usage",
    "memory_usage",
    "direct_memory_usage",
    "bandwidth_in_usage",
    "bandwidth_out_usage",
    "msg_rate_in",
    "msg_rate_out",
    "msg_throughput_in",
    "msg_throughput_out",
    "max_usage",
    "weighted_max_usage",
    "usage_ema",
)
_BROKER_LOAD_INTS = ("num_bundles", "num_topics")


def record_broker_load(s: Session, *, run_id: str, rows: Sequence[Mapping[str, Any]]) -> None:
    """Upsert one ``broker_load`` row per broker for ``run_id`` (a retried task overwrites its rows).

    Each row: ``broker_id`` and ``raw_report`` (the ``LocalBrokerData`` JSON as received) are required;
    optional: ``*_usage`` (percent), ``msg_rate_*`` (msg/s), ``msg_throughput_*`` (bytes/s),
    ``num_bundles``, ``num_topics``, ``max_usage``/``weighted_max_usage``/``usage_ema`` (fractions).
    Absent optional keys are stored as NULL (also on overwrite); unknown keys are an error.
    """
    values = _validate_rows(
        "rows",
        rows,
        required={"broker_id": str, "raw_report": dict},
        floats=_BROKER_LOAD_FLOATS,
        ints=_BROKER_LOAD_INTS,
        key="broker_id",
    )
    _upsert_run_rows(s, BrokerLoad, run_id, values, ("broker_id",))


_BUNDLE_LOAD_FLOATS = ("msg_rate_in", "msg_rate_out", "msg_throughput_in", "msg_throughput_out")
_BUNDLE_LOAD_INTS = ("topics", "producers", "consumers")


def record_bundle_load(s: Session, *, run_id: str, rows: Sequence[Mapping[str, Any]]) -> None:
    """Upsert one ``bundle_load`` row per bundle for ``run_id``.

    Each row: ``bundle`` (full name) and ``broker_id`` required; ``namespace``/``bundle_range`` are
    derived from the name (and checked if given); optional rates (msg/s), throughputs (bytes/s),
    ``topics``/``producers``/``consumers`` counts and ``short_term``/``long_term``
    (``TimeAverageMessageData`` JSON).
    """
    values = _validate_rows(
        "rows",
        rows,
        required={"bundle": str, "broker_id": str},
        floats=_BUNDLE_LOAD_FLOATS,
        ints=_BUNDLE_LOAD_INTS,
        optional={"namespace": str, "bundle_range": str, "short_term": dict, "long_term": dict},
        key="bundle",
    )
    for i, row in enumerate(values):
        namespace, bundle_range = split_bundle_name(row["bundle"], field=f"rows[{i}].bundle")
        for column, derived in (("namespace", namespace), ("bundle_range", bundle_range)):
            if row[column] is not None and row[column] != derived:
                raise InvalidRowError(f"rows[{i}].{column}", f"{row[column]!r} does not match bundle {row['bundle']!r}")
            row[column] = derived
    _upsert_run_rows(s, BundleLoad, run_id, values, ("bundle",))


def latest_broker_ema(s: Session, *, cluster_id: int, exclude_run_id: str | None = None) -> dict[str, float]:
    """Each broker's most recent non-NULL ``usage_ema`` (by run start time) in the cluster.

    Pass the current run as ``exclude_run_id`` when computing this run's EMA: otherwise a retried task
    would read the value its first attempt already wrote and apply the history twice.
    """
    # DISTINCT ON as SQL text: SQLAlchemy 2.1 deprecates .distinct(col) and 2.0 lacks distinct_on()
    sql = text(
        """
        SELECT DISTINCT ON (bl.broker_id) bl.broker_id, bl.usage_ema
        FROM broker_load bl JOIN runs r ON r.run_id = bl.run_id
        WHERE r.cluster_id = :cluster_id AND bl.usage_ema IS NOT NULL
          AND (CAST(:exclude AS text) IS NULL OR r.run_id <> :exclude)
        ORDER BY bl.broker_id, r.started_at DESC, r.run_id DESC
        """
    )
    params = {"cluster_id": cluster_id, "exclude": exclude_run_id}
    return {broker: float(ema) for broker, ema in s.execute(sql, params)}


def load_bundle_time_averages(s: Session, *, cluster_id: int) -> dict[str, dict[str, Any]]:
    """``{bundle: BundleData JSON}`` carried across runs (the leader's in-memory map in Pulsar)."""
    stmt = select(BundleTimeAverage.bundle, BundleTimeAverage.bundle_data).where(
        BundleTimeAverage.cluster_id == cluster_id
    )
    return {bundle: data for bundle, data in s.execute(stmt)}


def save_bundle_time_averages(
    s: Session, *, cluster_id: int, run_id: str, data: Mapping[str, Mapping[str, Any]], replace: bool = False
) -> None:
    """Upsert ``{bundle: BundleData JSON}``; with ``replace=True`` also delete bundles absent from ``data``
    (e.g. the parents of split bundles)."""
    values = []
    for bundle, bundle_data in data.items():
        split_bundle_name(bundle, field=f"data[{bundle!r}]")
        if not isinstance(bundle_data, Mapping):
            raise InvalidRowError(f"data[{bundle!r}]", f"must be a JSON object, got {type(bundle_data).__name__}")
        values.append(
            {
                "cluster_id": cluster_id,
                "bundle": bundle,
                "bundle_data": _json_value(f"data[{bundle!r}]", dict(bundle_data)),
                "updated_run_id": run_id,
            }
        )
    if replace:
        s.execute(
            delete(BundleTimeAverage).where(
                BundleTimeAverage.cluster_id == cluster_id, BundleTimeAverage.bundle.not_in(list(data))
            )
        )
    if values:
        stmt = pg_insert(BundleTimeAverage.__table__)
        stmt = stmt.on_conflict_do_update(
            index_elements=[BundleTimeAverage.cluster_id, BundleTimeAverage.bundle],
            set_={
                "bundle_data": stmt.excluded.bundle_data,
                "updated_run_id": stmt.excluded.updated_run_id,
                "updated_at": func.now(),
            },
        )
        _insert_many(s, stmt, values)


def load_strategy_state(s: Session, *, cluster_id: int, name: str) -> dict[str, Any] | None:
    """The saved state of strategy ``name`` (e.g. ``ThresholdShedder``), or None if never saved."""
    stmt = select(StrategyState.state).where(StrategyState.cluster_id == cluster_id, StrategyState.name == name)
    return s.execute(stmt).scalar_one_or_none()


def save_strategy_state(s: Session, *, cluster_id: int, name: str, run_id: str, state: Mapping[str, Any]) -> None:
    """Replace the saved state of strategy ``name``."""
    _require_text("name", name)
    stmt = pg_insert(StrategyState).values(
        cluster_id=cluster_id, name=name, state=_json_value("state", dict(state)), updated_run_id=run_id
    )
    stmt = stmt.on_conflict_do_update(
        index_elements=[StrategyState.cluster_id, StrategyState.name],
        set_={"state": stmt.excluded.state, "updated_run_id": stmt.excluded.updated_run_id, "updated_at": func.now()},
    )
    s.execute(stmt)


# ------------------------------------------------------------------------------------- bundle ranges


def range_name(lower: int, upper: int) -> str:
    """Pulsar's bundle range string: ``String.format("0x%08x_0x%08x", lower, upper)``."""
    return f"0x{lower:08x}_0x{upper:08x}"


def split_bundle_name(bundle: str, *, field: str = "bundle") -> tuple[str, str]:
    """``tenant/ns/0x.._0x..`` -> (``tenant/ns``, ``0x.._0x..``), Pulsar's split at the last ``/``."""
    if not isinstance(bundle, str):
        raise InvalidRowError(field, f"must be a bundle name string, got {type(bundle).__name__}")
    namespace, sep, bundle_range = bundle.rpartition("/")
    if not sep or not namespace or not _RANGE_NAME.fullmatch(bundle_range):
        raise InvalidRowError(field, f"{bundle!r} is not a bundle name like tenant/namespace/0x00000000_0xffffffff")
    return namespace, bundle_range


def sync_bundle_ranges(
    s: Session,
    *,
    cluster_id: int,
    run_id: str,
    namespace: str,
    boundaries: Sequence[int],
    action_id: int | None = None,
    at: datetime | None = None,
) -> RangeDiff:
    """Make the live ranges of ``namespace`` equal to the ones ``boundaries`` define.

    ``boundaries`` is Pulsar's ``BundlesData.boundaries`` as integers (``p0 < p1 < ... < pn``; bundle i
    is ``[p_i, p_i+1)``, the last one closed). Live ranges not in it are retired (``retired_run_id``,
    ``retired_at``); new ones are created with ``parent_id`` = the range retired here that contains
    them (a split) and ``created_by_action_id = action_id`` (the split action that caused it, if any).
    Nothing is written when nothing changed. Concurrent syncs of one namespace serialise on an
    advisory lock.
    """
    _require_text("namespace", namespace)
    bounds = _validate_boundaries(boundaries)
    when = _aware("at", at)
    s.execute(
        text("SELECT pg_advisory_xact_lock(hashtext(:key))"),
        {"key": f"pulsar_rebalance.bundle_ranges:{cluster_id}:{namespace}"},
    )
    live_stmt = select(BundleRange).where(
        BundleRange.cluster_id == cluster_id, BundleRange.namespace == namespace, BundleRange.retired_at.is_(None)
    )
    live = {row.range_name: row for row in s.execute(_for_update(live_stmt)).scalars()}
    wanted = {range_name(lo, hi): (lo, hi) for lo, hi in zip(bounds, bounds[1:], strict=False)}
    retired = [row for name, row in live.items() if name not in wanted]
    for row in retired:
        row.retired_run_id = run_id
        row.retired_at = when
    created = []
    for name, (lo, hi) in wanted.items():
        if name in live:
            continue
        parent = next((p for p in retired if p.lower <= lo and hi <= p.upper), None)
        row = BundleRange(
            cluster_id=cluster_id,
            namespace=namespace,
            range_name=name,
            lower=lo,
            upper=hi,
            created_run_id=run_id,
            created_at=when,
            parent_id=parent.id if parent is not None else None,
            created_by_action_id=action_id,
        )
        s.add(row)
        created.append(row)
    s.flush()
    if retired or created:
        logger.info(
            "[%s] bundle ranges: %d retired, %d created (run %s)", namespace, len(retired), len(created), run_id
        )
    return RangeDiff(
        namespace=namespace,
        created=tuple(_range_view(r) for r in sorted(created, key=lambda r: r.lower)),
        retired=tuple(_range_view(r) for r in sorted(retired, key=lambda r: r.lower)),
        unchanged=tuple(sorted(name for name in live if name in wanted)),
    )


def live_bundle_ranges(s: Session, *, cluster_id: int, namespace: str | None = None) -> list[BundleRangeView]:
    """The ranges currently live (not retired), ordered by namespace then lower bound."""
    stmt = select(BundleRange).where(BundleRange.cluster_id == cluster_id, BundleRange.retired_at.is_(None))
    if namespace is not None:
        stmt = stmt.where(BundleRange.namespace == namespace)
    return [_range_view(r) for r in s.execute(stmt.order_by(BundleRange.namespace, BundleRange.lower)).scalars()]


# ----------------------------------------------------------------------------------------- ownership


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
        changes.append(
            OwnershipChange(bundle, previous.broker_id if previous else None, broker, row_cause, action_id)
        )
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
    return {bundle: _epoch_ms(finished) for bundle, finished in s.execute(stmt)}


# --------------------------------------------------------------------------------------------- plans


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
    actions: Sequence[Mapping[str, Any]],
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
        summary: counts, predicted before/after per broker, max usage before/after (JSON).
        decision: the raw output of the decision core (JSON).
        actions: dicts with ``kind`` (``split``/``unload``), ``namespace`` + ``bundle_range`` (or
            ``bundle``), ``source_broker``, ``reason``; unload: optional ``destination_broker``;
            split: optional ``boundaries`` (ints) and ``split_algorithm``; optional ``predicted``
            (JSON) and ``seq`` (defaults to the list index).

    Raises:
        InvalidRowError: a malformed argument or action (the field is named).
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
    seqs = [a["seq"] for a in action_values]
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
    plan_values = {
        "run_id": run_id,
        "cluster_id": cluster_id,
        "status": status,
        "expires_at": _aware("expires_at", expires_at) if expires_at is not None else None,
        "dry_run": dry_run,
        "strategies": _json_value("strategies", strategies if isinstance(strategies, Mapping) else list(strategies)),
        "config": _json_value("config", dict(config)),
        "config_hash": config_hash(config),
        "content_hash": plan_content_hash(run_id=run_id, dry_run=dry_run, actions=action_values),
        "summary": _json_value("summary", summary),
        "decision": _json_value("decision", decision),
    }
    run_cluster = s.execute(select(Run.cluster_id).where(Run.run_id == run_id)).scalar_one_or_none()
    if run_cluster is None:
        raise UnknownRunError(f"unknown run {run_id!r}; call start_run before create_plan")
    if run_cluster != cluster_id:
        raise InvalidRowError("cluster_id", f"run {run_id!r} belongs to cluster id {run_cluster}, not {cluster_id}")

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

    if action_values:
        s.execute(pg_insert(PlanAction).values([{"plan_id": inserted, **a} for a in action_values]))
    audit(
        s,
        event="plan.created",
        actor=SYSTEM_ACTOR,
        run_id=run_id,
        plan_id=inserted,
        details={"status": status, "actions": len(action_values), "dry_run": dry_run},
    )
    logger.info("[%s] created plan %s with %d actions (run %s)", cluster_id, inserted, len(action_values), run_id)
    supersede_plans(s, cluster_id=cluster_id, by_plan_id=inserted, statuses=("pending",),
                    reason=f"a newer snapshot produced plan {inserted}")
    return inserted


_HASHED_ACTION_FIELDS = ("seq", "kind", "namespace", "bundle_range", "source_broker", "destination_broker",
                         "boundaries")


def plan_content_hash(*, run_id: str, dry_run: bool, actions: Sequence[Mapping[str, Any] | Any]) -> str:
    """SHA-256 (hex) of what a plan will do: its run, dry-run flag and every action's move.

    Reasons and predictions are not part of it (they explain a move, they do not change it). An
    approval records the hash its approver saw and the executor recomputes it from the stored actions.
    """
    rows = []
    for a in actions:
        get = a.get if isinstance(a, Mapping) else (lambda k, _a=a: getattr(_a, k))
        rows.append({k: get(k) for k in _HASHED_ACTION_FIELDS})
    rows.sort(key=lambda r: r["seq"])
    canonical = json.dumps({"run_id": run_id, "dry_run": dry_run, "actions": rows}, sort_keys=True,
                           separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


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
        previous = plan.status
        if previous == "pending":  # a pending plan has no approval row yet; an approved one keeps its own
            s.add(Approval(plan_id=plan.plan_id, decision="superseded", decided_by=SYSTEM_ACTOR, decided_at=when,
                           comment=reason, plan_hash=plan.content_hash, via="system"))
        plan.status = "superseded"
        plan.superseded_by = by_plan_id
        plan.updated_at = when
        s.flush()
        audit(s, event="plan.superseded", actor=SYSTEM_ACTOR, run_id=plan.run_id, plan_id=plan.plan_id,
              details={"from": previous, "by": by_plan_id, "reason": reason})
        logger.info("[%s] plan superseded (%s): %s", plan.plan_id, previous, reason)
        done.append(plan.plan_id)
    return done


def plans_superseded_by(s: Session, *, plan_id: str) -> list[str]:
    """Ids of the plans that ``plan_id`` superseded."""
    return list(s.execute(select(Plan.plan_id).where(Plan.superseded_by == plan_id).order_by(Plan.created_at)).scalars())


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
        audit(s, event="plan.gate_opened", actor=SYSTEM_ACTOR, run_id=plan.run_id, plan_id=plan_id,
              details=dict(gate))
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
    if plan.status not in ("approved", "executing", "interrupted", "partially_executed", "failed"):
        raise PlanStateError(f"plan {plan_id} is {plan.status}: there is nothing to stop", plan_id=plan_id)
    if plan.stop_requested:
        return False
    plan.stop_requested = {"by": requested_by, "at": when.isoformat()}
    s.flush()
    audit(s, event="plan.stop_requested", actor=requested_by, run_id=plan.run_id, plan_id=plan_id)
    return True


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
            plan_id=plan_id, gate=dict(g),
        )
    if plan_hash is not None and plan.content_hash is not None and plan_hash != plan.content_hash:
        raise PlanChangedError(
            f"plan {plan_id} has content {plan.content_hash[:12]}, but the decision was made on "
            f"{plan_hash[:12]}: review the plan as it is now and decide again",
            plan_id=plan_id,
        )

    s.add(Approval(plan_id=plan_id, decision=decision, decided_by=decided_by, decided_at=when, comment=comment,
                   plan_hash=plan.content_hash, via=via))
    plan.status = decision
    plan.updated_at = when
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
    return ApprovalView(plan_id=plan_id, decision=decision, decided_by=decided_by, decided_at=when, comment=comment,
                        plan_hash=plan.content_hash, via=via)


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
    plan.status = "expired"
    plan.updated_at = when
    s.flush()
    audit(s, event="plan.expired", actor=SYSTEM_ACTOR, run_id=plan.run_id, plan_id=plan_id,
          details={"expires_at": _fmt(plan.expires_at)})
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
    """Move an action along :data:`ALLOWED_TRANSITIONS`, persisting it (with an audit row) at once.

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
    if to not in ALLOWED_TRANSITIONS:
        raise InvalidTransitionError(f"{label}: unknown state {to!r}")
    if to not in ALLOWED_TRANSITIONS[action.state]:
        allowed = ", ".join(sorted(ALLOWED_TRANSITIONS[action.state])) or "nothing (final)"
        raise InvalidTransitionError(f"{label}: cannot go from {action.state} to {to}; allowed: {allowed}")
    if to in ("failed", "skipped") and not (error and error.strip()):
        raise InvalidTransitionError(f"{label}: moving to {to} needs an error/reason")
    if to in ("in_progress", "completed") and error is not None:
        raise InvalidTransitionError(f"{label}: error must be None when moving to {to}")
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
        details={"from": previous, "to": to, "attempts": action.attempts, **({"error": error} if error else {})},
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
    audit(s, event="action.resent", actor=actor, plan_id=action.plan_id, action_id=action_id,
          details={"attempts": action.attempts, "reason": reason})
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
        set_plan_status(s, plan_id=plan_id, status="interrupted", actor=SYSTEM_ACTOR,
                        details={"reason": "its execution process died (the cluster's execution lock was free)"})
        logger.warning("[%s] execution interrupted: its process died; resume or abort it", plan_id)
    return dead


def last_execution_activity(s: Session, *, cluster_id: int, exclude_plan_id: str) -> tuple[datetime, str] | None:
    """``(when, plan_id)`` of the newest start or end of a real (not dry-run) execution on the cluster."""
    row = s.execute(
        select(AuditLog.at, AuditLog.plan_id)
        .join(Plan, Plan.plan_id == AuditLog.plan_id)
        .where(Plan.cluster_id == cluster_id, Plan.plan_id != exclude_plan_id, Plan.dry_run.is_(False),
               AuditLog.event.in_(("execution_started", "execution_finished")))
        .order_by(AuditLog.at.desc())
        .limit(1)
    ).first()
    return (row[0], row[1]) if row else None


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
        select(AuditLog.details).where(AuditLog.run_id == run_id, AuditLog.event == SNAPSHOT_CHECK_EVENT)
        .order_by(AuditLog.id.desc()).limit(1)
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


# ------------------------------------------------------------------------------------------- helpers


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
    except Exception as exc:  # noqa: BLE001 - name the likely cause, keep the original chained
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


def _validate_boundaries(boundaries: Sequence[int]) -> list[int]:
    bounds = list(boundaries)
    if len(bounds) < 2:
        raise InvalidRowError("boundaries", f"need at least 2 boundaries, got {len(bounds)}")
    for i, b in enumerate(bounds):
        if not isinstance(b, int) or isinstance(b, bool):
            raise InvalidRowError(f"boundaries[{i}]", f"must be an integer, got {b!r}")
        if not 0 <= b <= MAX_BOUNDARY:
            raise InvalidRowError(f"boundaries[{i}]", f"{b} is outside [0, 0xffffffff]")
        if i and b <= bounds[i - 1]:
            raise InvalidRowError(f"boundaries[{i}]", f"{b:#010x} is not greater than {bounds[i - 1]:#010x}")
    return bounds


def _validate_action(i: int, action: Mapping[str, Any]) -> dict[str, Any]:
    field = f"actions[{i}]"
    if not isinstance(action, Mapping):
        raise InvalidRowError(field, f"must be a mapping, got {type(action).__name__}")
    known = {
        "seq", "kind", "namespace", "bundle_range", "bundle", "source_broker", "destination_broker",
        "boundaries", "split_algorithm", "reason", "predicted",
    }  # fmt: skip
    unknown = sorted(set(action) - known)
    if unknown:
        raise InvalidRowError(f"{field}.{unknown[0]}", f"unknown key (known: {', '.join(sorted(known))})")
    kind = action.get("kind")
    if kind not in ACTION_KINDS:
        raise InvalidRowError(f"{field}.kind", f"must be one of {', '.join(ACTION_KINDS)}, got {kind!r}")
    namespace, bundle_range = action.get("namespace"), action.get("bundle_range")
    if action.get("bundle") is not None:
        derived = split_bundle_name(action["bundle"], field=f"{field}.bundle")
        if (namespace, bundle_range) not in ((None, None), derived):
            raise InvalidRowError(f"{field}.bundle", "does not match namespace/bundle_range")
        namespace, bundle_range = derived
    _require_text(f"{field}.namespace", namespace)
    if not isinstance(bundle_range, str) or not _RANGE_NAME.fullmatch(bundle_range):
        raise InvalidRowError(f"{field}.bundle_range", f"{bundle_range!r} is not like 0x00000000_0xffffffff")
    _require_text(f"{field}.source_broker", action.get("source_broker"))
    _require_text(f"{field}.reason", action.get("reason"))
    destination = action.get("destination_broker")
    boundaries = action.get("boundaries")
    split_algorithm = action.get("split_algorithm")
    if kind == "unload":
        if destination is not None:
            _require_text(f"{field}.destination_broker", destination)
        for key in ("boundaries", "split_algorithm"):
            if action.get(key) is not None:
                raise InvalidRowError(f"{field}.{key}", "only a split action has it")
    else:
        if destination is not None:
            raise InvalidRowError(f"{field}.destination_broker", "a split action has no destination")
        if boundaries is not None:
            if not isinstance(boundaries, (list, tuple)) or not all(
                isinstance(b, int) and not isinstance(b, bool) and 0 <= b <= MAX_BOUNDARY for b in boundaries
            ):
                raise InvalidRowError(f"{field}.boundaries", "must be a list of integers in [0, 0xffffffff]")
            boundaries = list(boundaries)
        if split_algorithm is not None:
            _require_text(f"{field}.split_algorithm", split_algorithm)
    seq = action.get("seq", i)
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
        raise InvalidRowError(f"{field}.seq", f"must be a non-negative integer, got {seq!r}")
    predicted = action.get("predicted")
    if predicted is not None and not isinstance(predicted, Mapping):
        raise InvalidRowError(f"{field}.predicted", "must be a JSON object")
    return {
        "seq": seq,
        "kind": kind,
        "namespace": namespace,
        "bundle_range": bundle_range,
        "source_broker": action["source_broker"],
        "destination_broker": destination,
        "boundaries": boundaries,
        "split_algorithm": split_algorithm,
        "reason": action["reason"],
        "predicted": _json_value(f"{field}.predicted", dict(predicted)) if predicted is not None else None,
    }


def _validate_rows(
    name: str,
    rows: Sequence[Mapping[str, Any]],
    *,
    required: Mapping[str, type],
    floats: Sequence[str],
    ints: Sequence[str],
    optional: Mapping[str, type] | None = None,
    key: str,
) -> list[dict[str, Any]]:
    optional = dict(optional or {})
    known = set(required) | set(floats) | set(ints) | set(optional)
    seen: set[Any] = set()
    out = []
    for i, row in enumerate(rows):
        field = f"{name}[{i}]"
        if not isinstance(row, Mapping):
            raise InvalidRowError(field, f"must be a mapping, got {type(row).__name__}")
        unknown = sorted(set(row) - known)
        if unknown:
            raise InvalidRowError(f"{field}.{unknown[0]}", f"unknown column (known: {', '.join(sorted(known))})")
        value: dict[str, Any] = {}
        for col, typ in required.items():
            v = row.get(col)
            if not isinstance(v, typ) or (typ is str and not v.strip()):
                raise InvalidRowError(f"{field}.{col}", f"required {typ.__name__}, got {v!r}")
            value[col] = _json_value(f"{field}.{col}", v) if typ is dict else v
        for col, typ in optional.items():
            v = row.get(col)
            if v is not None and not isinstance(v, typ):
                raise InvalidRowError(f"{field}.{col}", f"must be a {typ.__name__} or None, got {v!r}")
            value[col] = _json_value(f"{field}.{col}", v) if typ is dict and v is not None else v
        for col in floats:
            v = row.get(col)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)):
                raise InvalidRowError(f"{field}.{col}", f"must be a finite number or None, got {v!r}")
            value[col] = float(v) if v is not None else None
        for col in ints:
            v = row.get(col)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
                raise InvalidRowError(f"{field}.{col}", f"must be an integer or None, got {v!r}")
            value[col] = v
        if value[key] in seen:
            raise InvalidRowError(f"{field}.{key}", f"duplicate {key} {value[key]!r}")
        seen.add(value[key])
        out.append(value)
    return out


def _upsert_run_rows(
    s: Session, model: type[Any], run_id: str, values: list[dict[str, Any]], pk: tuple[str, ...]
) -> None:
    if not values:
        return
    if s.get(Run, run_id) is None:
        raise UnknownRunError(f"unknown run {run_id!r}; call start_run first")
    stmt = pg_insert(model.__table__)
    columns = [c for c in values[0] if c not in pk]
    stmt = stmt.on_conflict_do_update(
        index_elements=["run_id", *pk], set_={c: getattr(stmt.excluded, c) for c in columns}
    )
    _insert_many(s, stmt, [{"run_id": run_id, **v} for v in values])


def _insert_many(s: Session, stmt, rows: list[dict[str, Any]]) -> None:
    """Run an ``INSERT ... ON CONFLICT DO UPDATE`` for many rows as multi-row statements of 1,000 rows.

    One statement holding every row (100,000 bundles at scale) is slow to build and holds the whole
    SQL text in memory; a plain executemany sends one row per round trip. SQLAlchemy batches
    (``insertmanyvalues``) an ON CONFLICT insert only when it has a RETURNING clause, hence the
    (ignored) one. Rows must be unique on the conflict key (every caller validates that).
    """
    table = stmt.table
    s.execute(stmt.returning(*table.primary_key.columns), rows).close()


def _json_value(field: str, value: Any) -> Any:
    """Check ``value`` is JSON (finite numbers, string keys) before it reaches a jsonb column."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidRowError(field, f"is not JSON-serialisable: {exc}") from exc
    return value


def _require_text(field: str, value: Any) -> None:
    if not isinstance(value, str) or not value.strip():
        raise InvalidRowError(field, f"must be a non-empty string, got {value!r}")


def _aware(field: str, value: datetime | None) -> datetime:
    if value is None:
        return datetime.now(UTC)
    if not isinstance(value, datetime):
        raise TypeError(f"{field} must be a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{field} must be timezone-aware (got naive {value.isoformat()})")
    return value


def _is_due(expires_at: datetime | None, now: datetime) -> bool:
    return expires_at is not None and now >= expires_at


def _fmt(value: datetime | None) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if value is not None else "never"


def _epoch_ms(value: datetime) -> int:
    return int(value.timestamp() * 1000)


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


def _for_update(stmt: Select[Any], *, of: Any = None) -> Select[Any]:
    """``SELECT ... FOR UPDATE`` that also refreshes rows already in the session's identity map
    (without ``populate_existing`` a previously loaded object would keep its stale attributes)."""
    return stmt.with_for_update(of=of).execution_options(populate_existing=True)


def _lock_plan(s: Session, plan_id: str) -> Plan | None:
    return s.execute(_for_update(select(Plan).where(Plan.plan_id == plan_id))).scalar_one_or_none()


def _plan_query() -> Select[tuple[Plan]]:
    return select(Plan).options(selectinload(Plan.actions), selectinload(Plan.approval))


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
            )
            if approval is not None
            else None
        ),
        content_hash=p.content_hash,
        gate=p.gate,
        superseded_by=p.superseded_by,
        stop_requested=p.stop_requested,
    )


# ------------------------------------------------------------------------------ pipeline read helpers


def broker_reports(s: Session, *, run_id: str) -> dict[str, dict[str, Any]]:
    """``{broker_id: LocalBrokerData JSON}`` exactly as collected in ``run_id``."""
    rows = s.execute(select(BrokerLoad.broker_id, BrokerLoad.raw_report).where(BrokerLoad.run_id == run_id))
    return {broker: dict(report) for broker, report in rows}


def live_boundaries(s: Session, *, cluster_id: int, namespace: str | None = None) -> dict[str, list[int]]:
    """``{namespace: sorted boundaries}`` of the live bundle ranges (what Pulsar's ``bundles`` returns)."""
    out: dict[str, set[int]] = {}
    for r in live_bundle_ranges(s, cluster_id=cluster_id, namespace=namespace):
        out.setdefault(r.namespace, set()).update((r.lower, r.upper))
    return {ns: sorted(bs) for ns, bs in sorted(out.items())}


def cluster_name(s: Session, *, cluster_id: int) -> str:
    row = s.get(Cluster, cluster_id)
    if row is None:
        raise StoreError(f"unknown cluster id {cluster_id}")
    return row.name


def latest_run(s: Session, *, since_epoch: float | None = None) -> RunView | None:
    """The most recently started run (optionally only runs started at/after ``since_epoch`` seconds)."""
    stmt = select(Run).order_by(Run.started_at.desc(), Run.run_id.desc()).limit(1)
    if since_epoch is not None:
        stmt = stmt.where(Run.started_at >= datetime.fromtimestamp(since_epoch, UTC))
    row = s.execute(stmt).scalar_one_or_none()
    return None if row is None else _run_view(row)
