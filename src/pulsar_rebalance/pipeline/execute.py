"""execute_unload: apply exactly the approved actions, intent first, reconciled on retry.

For every action (splits first, sequentially; then unloads with bounded parallelism):

    1. reconcile  if a previous attempt got as far as IN_PROGRESS/FAILED, ask Pulsar whether the
                  effect is already there (destination owns the bundle / the split boundaries exist)
                  and, if so, mark it COMPLETED without calling Pulsar again;
    2. drift      if the source no longer owns the bundle or the range no longer exists, the plan no
                  longer describes the cluster: SKIPPED with the reason (never "fixed up");
    3. intent     PENDING -> IN_PROGRESS is committed BEFORE the admin call;
    4. effect     the admin call (split with the planned boundaries / unload with destinationBroker);
    5. outcome    COMPLETED or FAILED (with the error) is committed.

Only one execution per cluster at a time (a Postgres advisory lock). Afterwards the live bundle
ranges and ownership are re-read from Pulsar and recorded, with the action that caused each change.
If any action failed the task fails after recording everything, so an Airflow retry picks up the
remaining work and reconciles the rest.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

import sqlalchemy as sa

from pulsar_rebalance.errors import ExecutionError, ExecutionInProgressError, PulsarAdminError
from pulsar_rebalance.store import repository as repo
from pulsar_rebalance.store.engine import session_scope

log = logging.getLogger(__name__)
ACTOR = "execute_unload"
INTERRUPTED = ("interrupted: the previous attempt ended before its outcome was recorded, "
               "and Pulsar shows no effect of it; sending it again")


@dataclass
class ExecutionReport:
    plan_id: str
    status: str
    unloads_executed: int = 0
    splits_executed: int = 0
    skipped: int = 0
    failed: int = 0
    reconciled: int = 0
    max_usage_before: float | None = None
    max_usage_after: float | None = None
    max_usage_after_predicted: float | None = None
    broker_usage_after: dict[str, float] = field(default_factory=dict)  # measured, weighted max usage
    errors: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class _ClusterLock:
    """Session-level Postgres advisory lock: one execution per cluster, across processes."""

    def __init__(self, engine, cluster: str) -> None:
        self.engine, self.cluster, self.conn = engine, cluster, None

    def __enter__(self):
        self.conn = self.engine.connect()
        got = self.conn.execute(
            sa.text("SELECT pg_try_advisory_lock(hashtext(:k))"), {"k": f"pulsar_rebalance.execute:{self.cluster}"}
        ).scalar()
        self.conn.commit()
        if not got:
            self.conn.close()
            raise ExecutionInProgressError(f"another execution is running for cluster {self.cluster!r}")
        return self

    def __exit__(self, *exc):
        try:
            self.conn.execute(sa.text("SELECT pg_advisory_unlock(hashtext(:k))"), {"k": f"pulsar_rebalance.execute:{self.cluster}"})
            self.conn.commit()
        except sa.exc.DBAPIError as err:  # e.g. Postgres restarted: a session lock ends with its connection
            log.warning("execution lock of cluster %r released with its connection (unlock failed: %s)",
                        self.cluster, type(err.orig).__name__)
            self.conn.invalidate()  # close it for good, so the lock cannot outlive this execution
        finally:
            self.conn.close()


def execute_plan(engine, client, *, plan_id: str, max_parallel: int = 4, after_snapshot=None) -> ExecutionReport:
    """Execute the approved plan ``plan_id``. ``after_snapshot(client, namespaces)`` re-reads the cluster."""
    with session_scope(engine) as s:
        plan = repo.get_plan(s, plan_id=plan_id)
        cluster = repo.cluster_name(s, cluster_id=plan.cluster_id)
    approval = plan.approval
    if approval is None or approval.decision != "approved":
        raise ExecutionError(f"plan {plan_id} is {plan.status!r}, not approved: nothing is executed")
    if plan.status == "executed" and plan.result:  # a retry after a finished execution: nothing left to do
        log.info("plan %s was already executed; returning the recorded outcome", plan_id)
        return ExecutionReport(**plan.result)
    report = ExecutionReport(
        plan_id=plan_id, status=plan.status,
        max_usage_before=plan.summary.get("maxUsageBefore"),
        max_usage_after_predicted=plan.summary.get("maxUsageAfterPredicted"),
    )
    with _ClusterLock(engine, cluster):
        with session_scope(engine) as s:
            repo.set_plan_status(s, plan_id=plan_id, status="executing")
            repo.audit(s, event="execution_started", actor=ACTOR, plan_id=plan_id, run_id=plan.run_id,
                       details={"dryRun": plan.dry_run, "actions": len(plan.actions)})
        splits = [a for a in plan.actions if a.kind == "split"]
        unloads = [a for a in plan.actions if a.kind == "unload"]
        outcomes: list[tuple[Any, str]] = []
        for a in splits:
            outcomes.append((a, _run_action(engine, client, plan, cluster, a)))
        with ThreadPoolExecutor(max_workers=max(1, max_parallel), thread_name_prefix="unload") as pool:
            outcomes.extend(zip(unloads, pool.map(lambda a: _run_action(engine, client, plan, cluster, a), unloads)))
        for a, outcome in outcomes:
            if outcome == "completed":
                if a.kind == "unload":
                    report.unloads_executed += 1
                else:
                    report.splits_executed += 1
            elif outcome == "reconciled":
                report.reconciled += 1
                if a.kind == "unload":
                    report.unloads_executed += 1
                else:
                    report.splits_executed += 1
            elif outcome.startswith("skipped"):
                report.skipped += 1
            else:
                report.failed += 1
                report.errors.append(f"{a.kind} {a.bundle}: {outcome}")
        # Record what the cluster looks like now (ranges, ownership) and the measured load.
        if after_snapshot is not None and not plan.dry_run:
            snap = after_snapshot(client, sorted({a.namespace for a in plan.actions}))
            cause_ids = {}
            with session_scope(engine) as s:
                for a in plan.actions:
                    cur = repo.get_action(s, action_id=a.id)
                    if cur.state == "completed" and a.kind == "unload":
                        cause_ids[a.bundle] = a.id
                for ns, bounds in sorted(snap.namespaces.items()):
                    repo.sync_bundle_ranges(s, cluster_id=plan.cluster_id, run_id=plan.run_id, namespace=ns, boundaries=bounds)
                repo.sync_ownership(
                    s, cluster_id=plan.cluster_id, run_id=plan.run_id, ownership=snap.ownership,
                    cause=f"executed plan {plan_id}", cause_action_ids=cause_ids,
                )
            report.max_usage_after = snap.max_usage
            report.broker_usage_after = dict(snap.broker_usage)
        if plan.dry_run:
            status = "executed"
        elif report.failed:
            status = "failed" if not (report.unloads_executed or report.splits_executed) else "partially_executed"
        elif report.skipped:
            status = "partially_executed"
        else:
            status = "executed"
        report.status = status
        with session_scope(engine) as s:
            repo.set_plan_status(s, plan_id=plan_id, status=status, result=report.to_json())
            repo.audit(s, event="execution_finished", actor=ACTOR, plan_id=plan_id, run_id=plan.run_id, details=report.to_json())
    if report.failed:
        raise ExecutionError(
            f"plan {plan_id}: {report.failed} action(s) failed ({'; '.join(report.errors)}); "
            "completed actions are recorded and a retry reconciles before acting again"
        )
    return report


def _run_action(engine, client, plan, cluster: str, action) -> str:
    """Drive one action through its state machine. Returns completed|reconciled|skipped:<why>|<error>."""
    full = action.bundle
    with session_scope(engine) as s:
        cur = repo.get_action(s, action_id=action.id)
    if cur.state in ("completed", "skipped"):
        return "completed" if cur.state == "completed" else "skipped:already"
    if plan.dry_run:
        with session_scope(engine) as s:
            repo.transition_action(s, action_id=action.id, to="skipped", result={"dryRun": True, "wouldDo": _describe(action)})
        return "skipped:dry-run"
    try:
        if cur.state in ("in_progress", "failed") and _already_applied(client, cluster, action):
            with session_scope(engine) as s:
                if cur.state == "failed":
                    repo.transition_action(s, action_id=action.id, to="in_progress")
                repo.transition_action(s, action_id=action.id, to="completed", result={"reconciled": True})
            log.info("[%s] %s already applied by an earlier attempt: reconciled", full, action.kind)
            return "reconciled"
        drift = _drift(client, cluster, action)
    except PulsarAdminError as exc:
        return _fail(engine, action, cur.state, f"pre-check failed: {exc}")
    if drift:
        with session_scope(engine) as s:
            if cur.state == "failed":
                repo.transition_action(s, action_id=action.id, to="in_progress")
            repo.transition_action(s, action_id=action.id, to="skipped", error=drift, result={"drift": drift})
        log.warning("[%s] %s skipped: %s", full, action.kind, drift)
        return f"skipped:{drift}"
    with session_scope(engine) as s:  # intent, committed before the side effect
        if cur.state == "in_progress":  # an attempt died between intent and outcome, without effect: close it
            repo.transition_action(s, action_id=action.id, to="failed", error=INTERRUPTED)
        repo.transition_action(s, action_id=action.id, to="in_progress")  # attempts += 1
    started = time.monotonic()
    try:
        if action.kind == "split":
            client.split_bundle(action.namespace, action.bundle_range, unload=False, boundaries=list(action.boundaries))
        else:
            client.unload_bundle(action.namespace, action.bundle_range, destination_broker=action.destination_broker)
    except PulsarAdminError as exc:
        return _fail(engine, action, "in_progress", str(exc))
    with session_scope(engine) as s:
        repo.transition_action(s, action_id=action.id, to="completed",
                               result={"seconds": round(time.monotonic() - started, 3)})
        if action.kind == "split":
            repo.sync_bundle_ranges(s, cluster_id=plan.cluster_id, run_id=plan.run_id, namespace=action.namespace,
                                    boundaries=_boundaries(client, action.namespace), action_id=action.id)
    log.info("[%s] %s done: %s", full, action.kind, _describe(action))
    return "completed"


def _fail(engine, action, state: str, error: str) -> str:
    with session_scope(engine) as s:
        if state == "pending":
            repo.transition_action(s, action_id=action.id, to="in_progress")
        if state != "failed":
            repo.transition_action(s, action_id=action.id, to="failed", error=error)
    log.error("[%s] %s failed: %s", action.bundle, action.kind, error)
    return error


def _describe(action) -> str:
    if action.kind == "split":
        return f"split {action.bundle} at {[f'0x{b:08x}' for b in action.boundaries]}"
    return f"unload {action.bundle} {action.source_broker} -> {action.destination_broker}"


def _boundaries(client, namespace: str) -> list[int]:
    return [int(b, 16) if isinstance(b, str) else int(b) for b in client.bundles(namespace)["boundaries"]]


def _owner(client, cluster: str, broker: str, full: str) -> bool:
    return full in client.owned_namespaces(cluster, broker)


def _already_applied(client, cluster: str, action) -> bool:
    full = action.bundle
    if action.kind == "unload":  # a destination that left the cluster owns nothing (and 404s)
        return action.destination_broker in client.brokers(cluster) and _owner(
            client, cluster, action.destination_broker, full)
    bounds = set(_boundaries(client, action.namespace))
    lo, hi = (int(x, 16) for x in action.bundle_range.split("_"))
    wanted = {lo, hi, *action.boundaries}
    return wanted <= bounds


def _drift(client, cluster: str, action) -> str | None:
    """Why the approved action no longer applies, or None if the cluster still matches the plan."""
    lo, hi = (int(x, 16) for x in action.bundle_range.split("_"))
    bounds = _boundaries(client, action.namespace)
    if lo not in bounds or hi not in bounds or any(lo < b < hi for b in bounds):
        return f"bundle {action.bundle} no longer exists (split since the plan was made)"
    full = action.bundle
    active = client.brokers(cluster)
    if action.source_broker and action.source_broker not in active:  # it died: Pulsar re-assigns its bundles
        return f"source broker {action.source_broker} is not active (it left the cluster)"
    if action.source_broker and not _owner(client, cluster, action.source_broker, full):
        return f"{action.source_broker} no longer owns {full}"
    if action.kind == "unload" and action.destination_broker not in active:
        return f"destination broker {action.destination_broker} is not active"
    return None
