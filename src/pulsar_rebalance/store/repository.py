"""Reads and writes of the state store: plain functions whose first parameter is a ``Session``.

This module is the repository's one import point: it re-exports the functions, views and constants of
the modules it is split into, one per concern (the Cruise Control habit of one class per job):

=====================  ============================================================================
``store.runs``         clusters and runs
``store.snapshots``    a run's load samples and placement constraints; bundle time averages and
                       strategy state across runs
``store.ranges``       the live bundle ranges of each namespace
``store.history``      ownership intervals and their causes ("where was bundle X at time T, and why")
``store.plans``        plans and their actions: creation, content hash, supersession, reads
``store.approvals``    the approval gate: decide, expire, gate
``store.execution``    plan statuses while executing, the action state machine, the stop switch
``store.audit``        the append-only audit log
``store.views``        the frozen dataclasses all of them return
=====================  ============================================================================

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

The action state machine (:data:`ALLOWED_TRANSITIONS`) is the typed plan's
(:mod:`pulsar_rebalance.core.plan`); the execution-phase plan statuses (:data:`PLAN_TRANSITIONS`) are
described in :mod:`pulsar_rebalance.store.execution`.
"""

from __future__ import annotations

from pulsar_rebalance.core.plan import ALLOWED_TRANSITIONS, ActionState
from pulsar_rebalance.store._shared import SYSTEM_ACTOR, InvalidRowError, UnknownRunError
from pulsar_rebalance.store.approvals import (
    VIA,
    Decision,
    closed_gate_reason,
    decide_plan,
    expire_due_plans,
    expire_plan,
    gates_to_close,
    mark_gate_closed,
    open_gate,
    plan_at_gate,
)
from pulsar_rebalance.store.audit import (
    SNAPSHOT_CHECK_EVENT,
    audit,
    audit_events,
    record_snapshot_check,
    snapshot_check,
)
from pulsar_rebalance.store.cordons import Cordon, cluster_id_named, cordon, cordoned, uncordon
from pulsar_rebalance.store.execution import (
    PLAN_TRANSITIONS,
    interrupt_dead_executions,
    last_execution_activity,
    record_resend,
    request_stop,
    set_plan_status,
    stop_request,
    transition_action,
)
from pulsar_rebalance.store.history import (
    OWNERSHIP_AT_SQL,
    current_ownership,
    ownership_at,
    ownership_history,
    recently_unloaded_bundles,
    sync_ownership,
)
from pulsar_rebalance.store.plans import (
    FINAL_PLAN_STATUSES,
    config_hash,
    create_plan,
    get_action,
    get_plan,
    list_plans,
    new_plan_id,
    plan_content_hash,
    plan_for_run,
    plans_awaiting_decision,
    plans_superseded_by,
    supersede_plans,
)
from pulsar_rebalance.store.ranges import (
    MAX_BOUNDARY,
    live_boundaries,
    live_bundle_ranges,
    range_name,
    split_bundle_name,
    sync_bundle_ranges,
)
from pulsar_rebalance.store.runs import (
    cluster_name,
    cluster_names,
    finish_run,
    follow_airflow_state,
    get_or_create_cluster,
    get_run,
    latest_run,
    running_run_ids,
    set_run_stage,
    start_run,
)
from pulsar_rebalance.store.snapshots import (
    broker_reports,
    latest_broker_ema,
    load_bundle_time_averages,
    load_strategy_state,
    placement_policies,
    placement_policies_at,
    record_broker_load,
    record_bundle_load,
    record_placement_policies,
    save_bundle_time_averages,
    save_strategy_state,
    upsert_brokers,
)
from pulsar_rebalance.store.views import (
    ActionView,
    ApprovalView,
    BundleRangeView,
    OwnershipChange,
    OwnershipDiff,
    OwnershipRecord,
    PlacementPoliciesView,
    PlanView,
    RangeDiff,
    RunView,
)

__all__ = [
    "ALLOWED_TRANSITIONS",
    "ActionState",
    "ActionView",
    "ApprovalView",
    "BundleRangeView",
    "Cordon",
    "Decision",
    "FINAL_PLAN_STATUSES",
    "InvalidRowError",
    "MAX_BOUNDARY",
    "OWNERSHIP_AT_SQL",
    "OwnershipChange",
    "OwnershipDiff",
    "OwnershipRecord",
    "PLAN_TRANSITIONS",
    "PlacementPoliciesView",
    "PlanView",
    "RangeDiff",
    "RunView",
    "SNAPSHOT_CHECK_EVENT",
    "SYSTEM_ACTOR",
    "UnknownRunError",
    "VIA",
    "audit",
    "audit_events",
    "broker_reports",
    "closed_gate_reason",
    "cluster_id_named",
    "cluster_name",
    "cluster_names",
    "config_hash",
    "cordon",
    "cordoned",
    "create_plan",
    "current_ownership",
    "decide_plan",
    "expire_due_plans",
    "expire_plan",
    "finish_run",
    "follow_airflow_state",
    "gates_to_close",
    "get_action",
    "get_or_create_cluster",
    "get_plan",
    "get_run",
    "interrupt_dead_executions",
    "last_execution_activity",
    "latest_broker_ema",
    "latest_run",
    "list_plans",
    "live_boundaries",
    "live_bundle_ranges",
    "load_bundle_time_averages",
    "load_strategy_state",
    "mark_gate_closed",
    "new_plan_id",
    "open_gate",
    "ownership_at",
    "ownership_history",
    "placement_policies",
    "placement_policies_at",
    "plan_at_gate",
    "plan_content_hash",
    "plan_for_run",
    "plans_awaiting_decision",
    "plans_superseded_by",
    "range_name",
    "recently_unloaded_bundles",
    "record_broker_load",
    "record_bundle_load",
    "record_placement_policies",
    "record_resend",
    "record_snapshot_check",
    "request_stop",
    "running_run_ids",
    "save_bundle_time_averages",
    "save_strategy_state",
    "set_plan_status",
    "set_run_stage",
    "snapshot_check",
    "split_bundle_name",
    "start_run",
    "stop_request",
    "supersede_plans",
    "sync_bundle_ranges",
    "sync_ownership",
    "transition_action",
    "uncordon",
    "upsert_brokers",
]
