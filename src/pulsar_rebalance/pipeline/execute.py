"""execute_unload: apply exactly the approved actions, intent first, reconciled on retry.

Before anything runs (under the cluster's execution lock):

    * content   the stored actions must hash to the plan's content hash and to the hash the approver
                saw; anything else is refused (nothing runs);
    * liveness  a plan of this cluster still ``executing`` while the lock was free belongs to a dead
                process: it becomes ``interrupted`` (``plans resume`` / ``plans abort``);
    * staleness a plan made from a snapshot older than the cluster's last real execution is refused
                and superseded (re-plan); executing a plan supersedes every older pending/approved
                plan of the cluster;
    * Pulsar    if Pulsar's own ``loadBalancerSheddingEnabled`` is on, the two balancers would fight:
                refused unless the run allows it (``allow_pulsar_shedding``).

For every action (splits first, sequentially; then unloads with bounded parallelism, at most
``max_unloads_per_broker`` at a time from or to one broker, ``max_unloads_per_run`` in all,
``unload_pacing_seconds`` apart; the stop switch ``plans stop`` skips whatever has not started;
an attempt whose outcome is unknown — it timed out, or its process died mid-call — is re-checked
against Pulsar until ``settle_seconds`` after it was sent, so a late-landing request is reconciled,
never sent twice):

    1. reconcile  if a previous attempt got as far as IN_PROGRESS/FAILED, ask Pulsar whether the
                  effect is already there (destination owns the bundle / the split boundaries exist)
                  and, if so, mark it COMPLETED without calling Pulsar again;
    2. drift      if the source no longer owns the bundle, the range no longer exists, or the bundle's
                  message rate moved more than ``drift_tolerance`` from what was planned, the plan no
                  longer describes the cluster: SKIPPED with the reason (never "fixed up");
    3. intent     PENDING -> IN_PROGRESS is committed BEFORE the admin call;
    4. effect     the admin call (split with the planned boundaries / unload with destinationBroker);
    5. outcome    COMPLETED or FAILED (with the error) is committed; the task log prints one progress
                  line (the action, its duration = the row's finished_at - started_at, traffic moved so
                  far, ETA: :mod:`pulsar_rebalance.core.progress`).

Only one execution per cluster at a time (a Postgres advisory lock). Afterwards the live bundle
ranges and ownership are re-read from Pulsar and recorded, with the action that caused each change.
If any action failed the task fails after recording everything, so an Airflow retry picks up the
remaining work and reconciles the rest.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

import sqlalchemy as sa

from pulsar_rebalance.core.plan import FINAL_ACTION_STATES, Action, InvalidPlanError, Plan, SplitAction, UnloadAction
from pulsar_rebalance.core.progress import Pacing, action_line, cap_reached
from pulsar_rebalance.errors import (
    AdminTimeoutError,
    ExecutionError,
    ExecutionInProgressError,
    PlanStateError,
    PulsarAdminError,
    ScenarioError,
    StalePlanError,
)
from pulsar_rebalance.store import repository as repo
from pulsar_rebalance.store.engine import session_scope

log = logging.getLogger(__name__)
ACTOR = "execute_unload"


@dataclass(frozen=True)
class ExecutionPolicy:
    """How carefully approved actions are applied (DAG params of the same names)."""

    max_parallel: int = 4
    max_unloads_per_broker: int = 2
    max_unloads_per_run: int | None = None
    pacing_seconds: float = 0.0
    drift_tolerance: float | None = 0.5  # None: no load check
    allow_pulsar_shedding: bool = False
    settle_seconds: float = 30.0  # how long an unknown-outcome attempt may still land before a re-send

    @property
    def pacing(self) -> Pacing:
        """What the progress ETA needs of this policy."""
        return Pacing(
            max_parallel_unloads=max(1, self.max_parallel),
            max_unloads_per_broker=max(1, self.max_unloads_per_broker),
            max_unloads_per_run=self.max_unloads_per_run,
            unload_pacing_seconds=self.pacing_seconds,
        )

    @classmethod
    def from_params(cls, params) -> ExecutionPolicy:
        return cls(
            max_parallel=params.max_parallel_unloads,
            max_unloads_per_broker=params.max_unloads_per_broker,
            max_unloads_per_run=params.max_unloads_per_run,
            pacing_seconds=params.unload_pacing_seconds,
            drift_tolerance=params.drift_tolerance,
            allow_pulsar_shedding=params.allow_pulsar_shedding,
        )


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
    not_measured: str | None = None  # why max_usage_after / broker_usage_after are empty, when they are
    errors: list[str] = field(default_factory=list)
    dry_run: bool = False  # nothing was sent to Pulsar: every action is skipped with what it would have done

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _log_progress(engine, plan_id: str, seq: int, pacing: Pacing) -> None:
    """One operator-friendly line per finished action: which, how long, traffic moved so far, ETA
    (:func:`pulsar_rebalance.core.progress.action_line`; durations are the rows' started_at/finished_at)."""
    from pulsar_rebalance.store import queries

    try:
        with session_scope(engine) as s:
            inputs = queries.progress_inputs(s, plan_id=plan_id)
        action = next(a for a in inputs.actions if a.seq == seq)
        log.info("%s", action_line(inputs.progress(pacing=pacing), action))
    except Exception as exc:  # progress is for people: never let it fail an execution
        log.warning("plan %s: progress not available after action %d (%s)", plan_id, seq, exc)


class _ClusterLock:
    """Session-level Postgres advisory lock: one execution per cluster, across processes."""

    def __init__(self, engine, cluster: str) -> None:
        self.engine, self.cluster = engine, cluster
        self.conn: sa.Connection | None = None

    def __enter__(self):
        self.conn = conn = self.engine.connect()
        got = conn.execute(
            sa.text("SELECT pg_try_advisory_lock(hashtext(:k))"), {"k": f"pulsar_rebalance.execute:{self.cluster}"}
        ).scalar()
        conn.commit()
        if not got:
            conn.close()
            raise ExecutionInProgressError(f"another execution is running for cluster {self.cluster!r}")
        return self

    def __exit__(self, *exc):
        conn = self.conn
        assert conn is not None  # entered
        try:
            conn.execute(
                sa.text("SELECT pg_advisory_unlock(hashtext(:k))"), {"k": f"pulsar_rebalance.execute:{self.cluster}"}
            )
            conn.commit()
        except sa.exc.DBAPIError as err:  # e.g. Postgres restarted: a session lock ends with its connection
            log.warning(
                "execution lock of cluster %r released with its connection (unlock failed: %s)",
                self.cluster,
                type(err.orig).__name__,
            )
            conn.invalidate()  # close it for good, so the lock cannot outlive this execution
        finally:
            conn.close()


def execute_plan(
    engine,
    client,
    *,
    plan_id: str,
    max_parallel: int | None = None,
    after_snapshot=None,
    policy: ExecutionPolicy | None = None,
    actor: str = ACTOR,
) -> ExecutionReport:
    """Execute the approved plan ``plan_id``. ``after_snapshot(client, namespaces)`` re-reads the cluster."""
    policy = policy or ExecutionPolicy()
    if max_parallel is not None:
        policy = ExecutionPolicy(**{**asdict(policy), "max_parallel": max_parallel})
    with session_scope(engine) as s:
        plan = repo.get_plan(s, plan_id=plan_id)
        cluster = repo.cluster_name(s, cluster_id=plan.cluster_id)
    approval = plan.approval
    if approval is None or approval.decision != "approved":
        raise ExecutionError(f"plan {plan_id} is {plan.status!r}, not approved: nothing is executed")
    if plan.status == "executed" and plan.result:  # a retry after a finished execution: nothing left to do
        log.info("plan %s was already executed; returning the recorded outcome", plan_id)
        return ExecutionReport(**plan.result)
    if plan.status in repo.FINAL_PLAN_STATUSES:
        raise ExecutionError(
            f"plan {plan_id} is {plan.status}: nothing is executed"
            + (f" (superseded by {plan.superseded_by})" if plan.superseded_by else "")
        )
    planned = _verify_content(plan, cluster)
    report = ExecutionReport(
        plan_id=plan_id,
        status=plan.status,
        dry_run=plan.dry_run,
        max_usage_before=plan.summary.get("maxUsageBefore"),
        max_usage_after_predicted=plan.summary.get("maxUsageAfterPredicted"),
    )
    if plan.dry_run:
        log.info(
            "DRY RUN of plan %s: %d action(s) are recorded as skipped with what they would do; "
            "no admin call is made to Pulsar",
            plan_id,
            len(plan.actions),
        )
    with _ClusterLock(engine, cluster):
        with session_scope(engine) as s:
            repo.interrupt_dead_executions(s, cluster_id=plan.cluster_id, except_plan_id=plan_id)
            if plan.status == "approved" and not plan.dry_run:
                _refuse_if_stale(s, plan)
        if plan.status == "approved" and not plan.dry_run:
            _check_pulsar_shedding(client, plan_id, policy)
        with session_scope(engine) as s:
            repo.supersede_plans(
                s,
                cluster_id=plan.cluster_id,
                by_plan_id=plan_id,
                statuses=("pending", "approved"),
                older_than=plan.created_at,
                reason=f"plan {plan_id}, made from a newer snapshot, is executing",
            )
            repo.set_plan_status(s, plan_id=plan_id, status="executing", actor=actor)
            repo.audit(
                s,
                event="execution_started",
                actor=actor,
                plan_id=plan_id,
                run_id=plan.run_id,
                details={"dryRun": plan.dry_run, "actions": len(plan.actions), "policy": asdict(policy)},
            )
        gate = _Gate(engine, plan_id, policy)
        ids = {a.seq: a.id for a in plan.actions}  # the stored row of each planned action

        def run(action: Action) -> str:
            outcome = _run_action(engine, client, plan, cluster, ids[action.seq], action, gate)
            _log_progress(engine, plan_id, action.seq, policy.pacing)
            return outcome

        outcomes: list[tuple[Action, str]] = [(split, run(split)) for split in planned.splits]
        with ThreadPoolExecutor(max_workers=max(1, policy.max_parallel), thread_name_prefix="unload") as pool:
            outcomes.extend(zip(planned.unloads, pool.map(run, planned.unloads)))
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
        record_after_state(engine, client, plan, after_snapshot, report, after=f"executing plan {plan_id}")
        if plan.dry_run:
            status = "executed"
        elif report.failed:
            status = "failed" if not (report.unloads_executed or report.splits_executed) else "partially_executed"
        elif report.skipped:
            status = "partially_executed"
        else:
            status = "executed"
        report.status = status
        if plan.dry_run:
            log.info(
                "DRY RUN of plan %s finished: %s (dry run); %d action(s) skipped, no admin call made",
                plan_id,
                status,
                report.skipped,
            )
        with session_scope(engine) as s:
            repo.set_plan_status(s, plan_id=plan_id, status=status, result=report.to_json())
            repo.audit(
                s,
                event="execution_finished",
                actor=ACTOR,
                plan_id=plan_id,
                run_id=plan.run_id,
                details=report.to_json(),
            )
    if report.failed:
        raise ExecutionError(
            f"plan {plan_id}: {report.failed} action(s) failed ({'; '.join(report.errors)}); "
            "completed actions are recorded and a retry reconciles before acting again"
        )
    return report


def measure_after(params):
    """The re-read of the cluster after an execution: ``after(client, namespaces)`` returns a snapshot (bundle
    ranges, ownership, load reports; no topic stats) with ``broker_usage`` (each broker's weighted max
    resource usage, weighted as the run's load-manager config says) and ``max_usage`` set."""
    from pulsar_rebalance.errors import SnapshotError
    from pulsar_rebalance.pipeline.collect import collect_snapshot
    from pulsar_rebalance.pipeline.params import resource_weights

    weights = resource_weights(params.lb_config())

    def after(client, namespaces):
        # Right after unloads, brokers' answers may show a bundle mid-transfer (e.g. in two load
        # reports, read one after the other): the snapshot validation rejects that, so read again.
        for attempt in range(3):
            try:
                snap = collect_snapshot(
                    client, namespaces=namespaces, cluster=params.cluster, topic_stats=False, placement_policies=False
                )
                break
            except SnapshotError as exc:
                if attempt == 2:
                    raise
                log.warning("the cluster is mid-transition after execution (%s); reading it again", exc)
                time.sleep(1.0 + attempt)
        snap.broker_usage = snap.weighted_usage(weights)
        snap.max_usage = max(snap.broker_usage.values(), default=0.0)
        return snap

    return after


def measure_after_run(engine, run_id: str):
    """:func:`measure_after` with the parameters of run ``run_id`` (the plan's own run, for resume/abort)."""
    from pulsar_rebalance.pipeline.params import RunParams

    with session_scope(engine) as s:
        params = RunParams.from_json(repo.get_run(s, run_id=run_id).params)
    return measure_after(params)


def record_after_state(engine, client, plan, after_snapshot, report: ExecutionReport, *, after: str) -> None:
    """Re-read the cluster after acting on it (``after_snapshot(client, namespaces)``, see :func:`measure_after`)
    and record it: live bundle ranges and ownership (each change our completed actions made credited to that
    action, :func:`_caused_by`; any other change recorded as observed ``after`` this, credited to no action)
    and, in ``report``, the measured usage (``max_usage_after``, ``broker_usage_after``). Without a re-read
    (a dry run, no reader) ``report.not_measured`` says why."""
    if plan.dry_run:
        report.not_measured = "dry run: nothing was applied, the cluster was not re-read"
        return
    if after_snapshot is None:
        report.not_measured = "the cluster was not re-read (no reader given)"
        return
    snap = after_snapshot(client, sorted({a.namespace for a in plan.actions}))
    with session_scope(engine) as s:
        done = [a for a in plan.actions if repo.get_action(s, action_id=a.id).state == "completed"]
        cause_ids = _caused_by(done, snap.ownership)
        for ns, bounds in sorted(snap.namespaces.items()):
            repo.sync_bundle_ranges(s, cluster_id=plan.cluster_id, run_id=plan.run_id, namespace=ns, boundaries=bounds)
        repo.sync_ownership(
            s,
            cluster_id=plan.cluster_id,
            run_id=plan.run_id,
            ownership=snap.ownership,
            # what no completed action of this plan did (the cluster's own moves, a broker that left or came
            # back): observed now, credited to no action of the plan
            cause=f"observed after {after}; none of its actions made this change",
            cause_action_ids=cause_ids,
        )
    report.max_usage_after = snap.max_usage
    report.broker_usage_after = dict(snap.broker_usage)
    report.not_measured = None


def _caused_by(done: list, ownership: Mapping[str, str]) -> dict[str, int]:
    """``{bundle: action id}`` of the ownership our completed actions made: an unload's bundle now on its
    destination, and the children of a split (the bundles of its namespace inside its range)."""

    def bounds(bundle_range: str) -> tuple[int, int]:
        lo, _, hi = bundle_range.partition("_")
        return int(lo, 16), int(hi, 16)

    caused: dict[str, int] = {}
    for a in done:
        if a.kind == "split":
            lower, upper = bounds(a.bundle_range)
            for bundle in ownership:
                ns, _, rng = bundle.rpartition("/")
                if ns == a.namespace and bundle != a.bundle:
                    lo, hi = bounds(rng)
                    if lower <= lo and hi <= upper:
                        caused[bundle] = a.id
    for a in done:  # after the splits: an unload of a split's child moved it last
        if a.kind == "unload" and ownership.get(a.bundle) == a.destination_broker:
            caused[a.bundle] = a.id
    return caused


RESUMABLE = ("interrupted", "executing", "partially_executed", "failed")


def resume_plan(
    engine, client, *, plan_id: str, by: str, policy: ExecutionPolicy | None = None, after_snapshot=None
) -> ExecutionReport:
    """``plans resume``: finish an interrupted (or partly failed) execution, reconciling with Pulsar first.

    Afterwards the cluster is re-read and recorded as after an execution; ``after_snapshot`` defaults to
    the re-read ``execute_unload`` does, with the plan's run's parameters (:func:`measure_after_run`).
    """
    with session_scope(engine) as s:
        plan = repo.get_plan(s, plan_id=plan_id)
        if plan.status not in RESUMABLE:
            raise PlanStateError(
                f"plan {plan_id} is {plan.status}: only {', '.join(RESUMABLE)} plans can be resumed", plan_id=plan_id
            )
        repo.audit(s, event="plan.resumed", actor=by, plan_id=plan_id, run_id=plan.run_id)
    if after_snapshot is None:
        after_snapshot = measure_after_run(engine, plan.run_id)
    return execute_plan(
        engine, client, plan_id=plan_id, policy=policy, after_snapshot=after_snapshot, actor=f"resume by {by}"
    )


def abort_plan(
    engine,
    client=None,
    *,
    plan_id: str,
    by: str,
    after_snapshot=None,
    no_client_reason: str = "no Pulsar admin client was given",
):
    """``plans abort``: end an interrupted or partly failed execution: what has not run is skipped.

    An action left ``in_progress`` by a dead process is marked failed with "outcome unknown" (the next
    collect records where its bundle really is). Refused while an execution runs in a live process on
    the cluster (use ``plans stop`` for that).

    Then, as after an execution, the cluster is re-read through ``client`` and recorded
    (:func:`record_after_state`; ``after_snapshot`` defaults to the plan's run's :func:`measure_after_run`),
    whether or not any action had been done: ``plans.result`` holds the counts of what was done and the
    measured usage, or in ``not_measured`` why the cluster was not read (no client: ``no_client_reason``;
    Pulsar did not answer). The abort stands either way. Returns the plan as stored.
    """
    with session_scope(engine) as s:
        plan = repo.get_plan(s, plan_id=plan_id)
        cluster = repo.cluster_name(s, cluster_id=plan.cluster_id)
    if plan.status not in RESUMABLE:
        raise PlanStateError(
            f"plan {plan_id} is {plan.status}: only {', '.join(RESUMABLE)} plans can be aborted", plan_id=plan_id
        )
    lock = _ClusterLock(engine, cluster)
    try:
        lock.__enter__()
    except ExecutionInProgressError as exc:
        raise ExecutionError(
            f"an execution on cluster {cluster!r} is running in a live process: "
            f"use `pulsar-rebalance plans stop {plan_id}` to halt it"
        ) from exc
    try:
        with session_scope(engine) as s:
            # another plan still 'executing' without a live holder would block ours (one executing per cluster)
            repo.interrupt_dead_executions(s, cluster_id=plan.cluster_id, except_plan_id=plan_id)
            repo.set_plan_status(s, plan_id=plan_id, status="executing", actor=f"abort by {by}")
            for a in repo.get_plan(s, plan_id=plan_id).actions:
                if a.state == "pending":
                    repo.transition_action(s, action_id=a.id, to="skipped", error=f"aborted by {by}", actor=by)
                elif a.state == "in_progress":
                    repo.transition_action(
                        s,
                        action_id=a.id,
                        to="failed",
                        actor=by,
                        error=(
                            f"aborted by {by} while in progress: outcome unknown (the next collect records where "
                            "the bundle is)"
                        ),
                    )
            repo.set_plan_status(s, plan_id=plan_id, status="aborted", actor=by)
            repo.audit(s, event="plan.aborted", actor=by, plan_id=plan_id, run_id=plan.run_id)
            aborted = repo.get_plan(s, plan_id=plan_id)
        report = _report_of(aborted)
        if client is None:
            report.not_measured = f"the cluster was not re-read after the abort: {no_client_reason}"
        else:
            try:
                record_after_state(
                    engine,
                    client,
                    aborted,
                    after_snapshot or measure_after_run(engine, plan.run_id),
                    report,
                    after=f"aborting plan {plan_id}",
                )
            except (PulsarAdminError, ScenarioError) as exc:  # the abort stands; say why nothing was measured
                log.warning("plan %s aborted, but the cluster could not be re-read: %s", plan_id, exc)
                report.not_measured = f"the cluster could not be re-read after the abort: {exc}"
        with session_scope(engine) as s:
            repo.set_plan_status(s, plan_id=plan_id, status="aborted", actor=by, result=report.to_json())
            repo.audit(
                s, event="abort_finished", actor=by, plan_id=plan_id, run_id=plan.run_id, details=report.to_json()
            )
            return repo.get_plan(s, plan_id=plan_id)
    finally:
        lock.__exit__(None, None, None)


def _report_of(plan) -> ExecutionReport:
    """What the plan's actions say was done (all attempts), as an execution would report it."""
    report = ExecutionReport(
        plan_id=plan.plan_id,
        status=plan.status,
        max_usage_before=(plan.summary or {}).get("maxUsageBefore"),
        max_usage_after_predicted=(plan.summary or {}).get("maxUsageAfterPredicted"),
    )
    for a in plan.actions:
        if a.state == "completed":
            if a.kind == "unload":
                report.unloads_executed += 1
            else:
                report.splits_executed += 1
            report.reconciled += bool((a.result or {}).get("reconciled"))
        elif a.state == "skipped":
            report.skipped += 1
        elif a.state == "failed":
            report.failed += 1
            report.errors.append(f"{a.kind} {a.bundle}: {a.error}")
    return report


def _run_action(engine, client, plan, cluster: str, action_id: int, action: Action, gate: _Gate) -> str:
    """Drive one action (stored as row ``action_id``) through its state machine.
    Returns completed|reconciled|skipped:<why>|<error>."""
    full = action.bundle
    with session_scope(engine) as s:
        cur = repo.get_action(s, action_id=action_id)
    if cur.state in FINAL_ACTION_STATES:
        return "completed" if cur.state == "completed" else "skipped:already"
    if plan.dry_run:  # no admin call, not even a read: the action records what it would have done
        why = dry_run_reason(action)
        with session_scope(engine) as s:
            repo.transition_action(
                s, action_id=action_id, to="skipped", error=why, result={"dryRun": True, "wouldDo": _describe(action)}
            )
        log.info("[%s] %s", full, why)
        return f"skipped:{why}"
    try:
        if cur.state in ("in_progress", "failed") and _settled(
            client, cluster, action, cur, gate.policy.settle_seconds
        ):
            with session_scope(engine) as s:
                if cur.state == "failed":
                    repo.transition_action(s, action_id=action_id, to="in_progress")
                repo.transition_action(s, action_id=action_id, to="completed", result={"reconciled": True})
            log.info("[%s] %s already applied by an earlier attempt: reconciled", full, action.kind)
            return "reconciled"
        why_not = gate.refusal(action) or _drift(client, cluster, action, gate.policy.drift_tolerance)
    except PulsarAdminError as exc:
        return _fail(engine, action_id, action, cur.state, f"pre-check failed: {exc}")
    if why_not:
        with session_scope(engine) as s:
            if cur.state == "failed":
                repo.transition_action(s, action_id=action_id, to="in_progress")
            repo.transition_action(s, action_id=action_id, to="skipped", error=why_not, result={"skipped": why_not})
        log.warning("[%s] %s skipped: %s", full, action.kind, why_not)
        return f"skipped:{why_not}"
    with gate.slot(action):
        with session_scope(engine) as s:  # intent, committed before the side effect
            if cur.state == "in_progress":  # a crash left the outcome unknown and Pulsar shows no effect
                repo.record_resend(s, action_id=action_id, reason="earlier attempt's outcome unknown; not applied")
            else:
                repo.transition_action(s, action_id=action_id, to="in_progress")
        try:
            if isinstance(action, SplitAction):
                client.split_bundle(
                    action.namespace, action.bundle_range, unload=False, boundaries=list(action.boundaries)
                )
            else:
                client.unload_bundle(
                    action.namespace, action.bundle_range, destination_broker=action.destination_broker
                )
        except AdminTimeoutError as exc:  # the request may still land: the retry waits for it first
            return _fail(engine, action_id, action, "in_progress", f"{OUTCOME_UNKNOWN}: {exc}")
        except PulsarAdminError as exc:
            return _fail(engine, action_id, action, "in_progress", str(exc))
    with session_scope(engine) as s:
        # its duration is finished_at - started_at of the row (core.progress): stored once, by the transitions
        repo.transition_action(s, action_id=action_id, to="completed")
        if action.kind == "split":
            repo.sync_bundle_ranges(
                s,
                cluster_id=plan.cluster_id,
                run_id=plan.run_id,
                namespace=action.namespace,
                boundaries=_boundaries(client, action.namespace),
                action_id=action_id,
            )
    log.info("[%s] %s done: %s", full, action.kind, _describe(action))
    gate.pace()
    return "completed"


OUTCOME_UNKNOWN = "outcome unknown (timed out)"


def _settled(client, cluster: str, action: Action, cur, settle_seconds: float) -> bool:
    """Has an earlier attempt taken effect? For an attempt whose outcome is unknown (it timed out, or
    its process died mid-call) the request may still be in flight inside Pulsar: keep asking until
    ``settle_seconds`` after it was sent before concluding it did not, so it is never sent twice."""
    if _already_applied(client, cluster, action):
        return True
    unknown = cur.state == "in_progress" or (cur.error or "").startswith(OUTCOME_UNKNOWN)
    if not unknown or cur.started_at is None:
        return False
    deadline = cur.started_at.timestamp() + settle_seconds
    while time.time() < deadline:
        time.sleep(min(0.5, max(0.0, deadline - time.time())))  # polling Pulsar for the effect, bounded
        if _already_applied(client, cluster, action):
            return True
    return False


class _Gate:
    """The execution policy between actions: stop switch, per-run cap, per-broker slots, pacing."""

    def __init__(self, engine, plan_id: str, policy: ExecutionPolicy) -> None:
        self.engine, self.plan_id, self.policy = engine, plan_id, policy
        self._lock = threading.Lock()
        self._started_unloads = 0
        self._per_broker: dict[str, threading.Semaphore] = {}
        self._stopped = threading.Event()

    def refusal(self, action: Action) -> str | None:
        """Why ``action`` must not start now (stop switch, per-run cap), or None."""
        with session_scope(self.engine) as s:  # one column per action, not the whole plan
            stop = repo.stop_request(s, plan_id=self.plan_id)
        if stop:
            self._stopped.set()
            return f"stopped by {stop.get('by')} at {stop.get('at')} (stop switch)"
        if action.kind == "unload" and self.policy.max_unloads_per_run is not None:
            with self._lock:
                if self._started_unloads >= self.policy.max_unloads_per_run:
                    return cap_reached(self.policy.max_unloads_per_run)
                self._started_unloads += 1
        return None

    def slot(self, action: Action):
        """Hold a slot on the source and destination brokers for the admin call (sorted: no deadlock)."""
        brokers = (
            sorted({b for b in (action.source_broker, action.destination_broker) if b})
            if action.kind == "unload"
            else []
        )
        with self._lock:
            sems = [
                self._per_broker.setdefault(b, threading.Semaphore(self.policy.max_unloads_per_broker)) for b in brokers
            ]
        return _Slots(sems)

    def pace(self) -> None:
        if self.policy.pacing_seconds > 0:
            self._stopped.wait(self.policy.pacing_seconds)  # a stop request cuts the pause short


class _Slots:
    def __init__(self, sems) -> None:
        self.sems = sems

    def __enter__(self):
        for sem in self.sems:
            sem.acquire()
        return self

    def __exit__(self, *exc):
        for sem in reversed(self.sems):
            sem.release()


def _verify_content(plan, cluster: str) -> Plan:
    """Only the approved content runs: the stored actions form a valid plan, whose content hash is the
    plan's and the one the approver saw. Returns the plan to execute, typed."""
    try:
        planned = plan.to_plan(cluster=cluster)
    except InvalidPlanError as exc:
        raise ExecutionError(f"plan {plan.plan_id}: the stored plan is not valid ({exc}): nothing is executed") from exc
    if plan.content_hash is None:  # a plan stored before content hashes existed
        return planned
    actual = planned.content_hash()
    approved = plan.approval.plan_hash if plan.approval else None
    if actual != plan.content_hash or (approved is not None and approved != plan.content_hash):
        raise ExecutionError(
            f"plan {plan.plan_id}: the stored actions (content {actual[:12]}) are not what was approved "
            f"(plan {plan.content_hash[:12]}, approval {(approved or '-')[:12]}): nothing is executed"
        )
    return planned


def _refuse_if_stale(s, plan) -> None:
    """A plan from a snapshot older than the cluster's last execution describes a cluster that is gone."""
    snapshot_at = repo.get_run(s, run_id=plan.run_id).started_at
    last = repo.last_execution_activity(s, cluster_id=plan.cluster_id, exclude_plan_id=plan.plan_id)
    if last is None or last[0] <= snapshot_at:
        return
    reason = (
        f"made from a snapshot taken at {snapshot_at:%Y-%m-%d %H:%M:%S} UTC, before plan {last[1]} executed "
        f"at {last[0]:%Y-%m-%d %H:%M:%S} UTC: the cluster has changed since; re-plan"
    )
    repo.supersede_plans(
        s,
        cluster_id=plan.cluster_id,
        by_plan_id=last[1],
        statuses=("approved",),
        reason=f"stale: {reason}",
        only=(plan.plan_id,),
    )
    s.commit()
    raise StalePlanError(f"plan {plan.plan_id} is stale and was not executed: {reason}", plan_id=plan.plan_id)


def _check_pulsar_shedding(client, plan_id: str, policy: ExecutionPolicy) -> None:
    """Refuse to run beside Pulsar's own shedder unless the operator allowed it."""
    from pulsar_rebalance.pipeline.collect import shedding_enabled

    value = client.dynamic_config().get("loadBalancerSheddingEnabled")
    if not shedding_enabled(value):
        return
    where = (
        "its dynamic configuration says true" if value is not None else "it is not overridden (Pulsar's default: true)"
    )
    if policy.allow_pulsar_shedding:
        log.warning("Pulsar's own load shedding is on (%s); executing anyway (allow_pulsar_shedding)", where)
        return
    raise ExecutionError(
        f"plan {plan_id} not executed: Pulsar's own loadBalancerSheddingEnabled is on ({where}), so Pulsar's leader "
        "would keep moving bundles too and the two balancers would fight. Turn it off with "
        "`pulsar-admin brokers update-dynamic-config --config loadBalancerSheddingEnabled --value false`, or run "
        "with allow_pulsar_shedding=true"
    )


def _fail(engine, action_id: int, action: Action, state: str, error: str) -> str:
    with session_scope(engine) as s:
        if state == "pending":
            repo.transition_action(s, action_id=action_id, to="in_progress")
        if state != "failed":
            repo.transition_action(s, action_id=action_id, to="failed", error=error)
    log.error("[%s] %s failed: %s", action.bundle, action.kind, error)
    return error


def dry_run_reason(action: Action) -> str:
    """Why a dry run's action is skipped: what it would have done."""
    if action.kind == "split":
        return f"dry run: would split {action.bundle} ({action.split_algorithm or 'planned boundaries'})"
    return f"dry run: would unload {action.bundle} from {action.source_broker} to {action.destination_broker}"


def _describe(action: Action) -> str:
    if isinstance(action, SplitAction):
        return f"split {action.bundle} at {[f'0x{b:08x}' for b in action.boundaries]}"
    return f"unload {action.bundle} {action.source_broker} -> {action.destination_broker}"


def _boundaries(client, namespace: str) -> list[int]:
    return [int(b, 16) if isinstance(b, str) else int(b) for b in client.bundles(namespace)["boundaries"]]


def _owner(client, cluster: str, broker: str, full: str) -> bool:
    return full in client.owned_namespaces(cluster, broker)


def _already_applied(client, cluster: str, action: Action) -> bool:
    full = action.bundle
    if isinstance(action, UnloadAction):  # a destination that left the cluster owns nothing (and 404s)
        dest = action.destination_broker
        return dest is not None and dest in client.brokers(cluster) and _owner(client, cluster, dest, full)
    bounds = set(_boundaries(client, action.namespace))
    wanted = {action.lower, action.upper, *action.boundaries}
    return wanted <= bounds


def _drift(client, cluster: str, action: Action, tolerance: float | None = None) -> str | None:
    """Why the approved action no longer applies, or None if the cluster still matches the plan."""
    lo, hi = action.lower, action.upper
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
    if action.kind == "unload" and tolerance is not None:
        return _load_drift(client, action, tolerance)
    return None


def _load_drift(client, action: Action, tolerance: float) -> str | None:
    """The bundle's message rate now vs at planning time (the source broker's load report)."""
    planned = (action.predicted.bundle_load if action.predicted else None) or {}
    if "msgRateIn" not in planned:
        return None  # a child of a split in this plan, or a plan from before load was recorded
    was = planned.get("msgRateIn", 0.0) + planned.get("msgRateOut", 0.0)
    stats = (client.load_report(action.source_broker).get("lastStats") or {}).get(action.bundle)
    if stats is None:
        return None  # not reported yet (a fresh child): ownership was already checked
    now = float(stats.get("msgRateIn", 0.0)) + float(stats.get("msgRateOut", 0.0))
    change = abs(now - was) / max(was, 1.0)
    if change > tolerance:
        return (
            f"load drift: {action.bundle} carries {now:.1f} msg/s now vs {was:.1f} msg/s when planned "
            f"({change:.0%} > drift_tolerance {tolerance:.0%})"
        )
    return None
