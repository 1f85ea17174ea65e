"""``pulsar-rebalance plans list|show|violations|approve|reject`` and ``pulsar-rebalance db upgrade``.

The database comes from ``PULSAR_REBALANCE_DATABASE_URL`` (or ``DATABASE_URL``); it is never taken
from argv so it cannot leak into shell history or process listings.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pulsar_rebalance.core.lifecycle import PLAN_STATUSES, plan_kind

if TYPE_CHECKING:
    from pulsar_rebalance.store.approvals import Decision

MAX_LIST_LIMIT = 1_000_000
"""Largest ``plans list --limit`` (a bigger number is an input error, not a database error)."""


def bounded_int(lo: int, hi: int) -> Callable[[str], int]:
    """An argparse ``type`` accepting integers in ``[lo, hi]``; anything else is a usage error (exit 2)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"must be between {lo} and {hi}, got {text}")
        return value

    parse.__name__ = "integer"
    return parse


def register(sub: argparse._SubParsersAction) -> None:
    plans = sub.add_parser("plans", help="list, show, approve or reject rebalance plans")
    psub = plans.add_subparsers(dest="plans_command", metavar="ACTION")
    psub.required = True

    p = psub.add_parser("list", help="recent plans, newest first")
    p.add_argument("--status", help="only plans in this status: " + ", ".join(PLAN_STATUSES))
    p.add_argument("--cluster", default=None, help="only this Pulsar cluster's plans (default: every cluster)")
    p.add_argument(
        "--limit",
        type=bounded_int(1, MAX_LIST_LIMIT),
        default=20,
        help=f"at most this many plans (1 to {MAX_LIST_LIMIT}, default 20)",
    )
    p.set_defaults(func=_list)

    p = psub.add_parser("show", help="one plan with its actions, reasons and predicted effect")
    p.add_argument("plan_id")
    _cluster_option(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument(
        "--plot",
        metavar="FILE",
        help="also write a before/predicted/measured usage chart per broker "
        "(.png, .svg or .pdf; a directory: DIR/<plan id>.png)",
    )
    p.set_defaults(func=_in_cluster(_show))

    p = psub.add_parser(
        "violations",
        help="compliance: the bundles that break their namespace's placement policies in the plan's run "
        "(fix them with a run with fix_policy_violations=true)",
    )
    p.add_argument("plan_id")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    _cluster_option(p)
    p.set_defaults(func=_in_cluster(_violations))

    for verb in ("approve", "reject"):
        p = psub.add_parser(verb, help=f"{verb} a pending plan (recorded with who, when and comment)")
        p.add_argument("plan_id")
        p.add_argument("--comment", "-m", default=None)
        p.add_argument("--by", default=None, help="who decides (default: $PULSAR_REBALANCE_USER or the login name)")
        _cluster_option(p)
        p.set_defaults(func=_in_cluster(_decide), decision="approved" if verb == "approve" else "rejected")

    p = psub.add_parser("stop", help="stop switch: an executing plan runs no further action (in-flight ones finish)")
    p.add_argument("plan_id")
    p.add_argument("--by", default=None, help="who stops it (default: $PULSAR_REBALANCE_USER or the login name)")
    _cluster_option(p)
    p.set_defaults(func=_in_cluster(_stop))
    p = psub.add_parser(
        "resume",
        help="finish an interrupted execution (reconciles with Pulsar first), then measure and record the "
        "cluster like an execution; needs PULSAR_ADMIN_URL [PULSAR_ADMIN_TOKEN]",
    )
    p.add_argument("plan_id")
    p.add_argument("--by", default=None)
    _cluster_option(p)
    p.set_defaults(func=_in_cluster(_resume))
    p = psub.add_parser(
        "abort",
        help="end an interrupted execution: actions not run are skipped; then the cluster is measured and "
        "recorded like after an execution if PULSAR_ADMIN_URL is set (else the result says it was not)",
    )
    p.add_argument("plan_id")
    p.add_argument("--by", default=None)
    _cluster_option(p)
    p.set_defaults(func=_in_cluster(_abort))

    db = sub.add_parser("db", help="state database maintenance")
    dsub = db.add_subparsers(dest="db_command", metavar="ACTION")
    dsub.required = True
    p = dsub.add_parser("upgrade", help="apply Alembic migrations up to head")
    p.set_defaults(func=_db_upgrade)


def _cluster_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--cluster",
        default=None,
        help="the Pulsar cluster the plan must belong to (a safety check: refused if it is another's)",
    )


def _in_cluster(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """``func``, after checking that plan ``args.plan_id`` is of cluster ``args.cluster`` (if given)."""

    def checked(args: argparse.Namespace) -> int:
        if args.cluster is not None:
            from pulsar_rebalance.errors import ConfigError
            from pulsar_rebalance.store import repository as repo
            from pulsar_rebalance.store.engine import session_scope

            with session_scope(_engine()) as s:
                wanted = repo.cluster_id_named(s, args.cluster)
                plan = repo.get_plan(s, plan_id=args.plan_id)
                if plan.cluster_id != wanted:
                    other = repo.cluster_name(s, cluster_id=plan.cluster_id)
                    raise ConfigError(
                        f"plan {args.plan_id} is of cluster {other!r}, not {args.cluster!r}", key="cluster"
                    )
        return func(args)

    return checked


def _engine():
    from pulsar_rebalance.store.engine import database_url, make_engine

    return make_engine(database_url())


def decide(
    plan_id: str, decision: Decision, *, by: str | None = None, comment: str | None = None, airflow_client=None
) -> dict[str, Any]:
    """Record an approval/rejection. The single code path used by the CLI, tests and the quick start.

    A plan waiting at its Airflow gate is answered through Airflow's REST API (see
    :mod:`.airflow_api`): the decision is then Airflow's user's, and the gate guard records it.
    """
    from pulsar_rebalance.errors import PlanAtGateError
    from pulsar_rebalance.store import repository as repo
    from pulsar_rebalance.store.engine import session_scope

    who = _who(by)
    try:
        with session_scope(_engine()) as s:
            approval = repo.decide_plan(
                s, plan_id=plan_id, decision=decision, decided_by=who, comment=comment, via="cli"
            )
    except PlanAtGateError as exc:
        from pulsar_rebalance.cli.airflow_api import answer_gate

        with session_scope(_engine()) as s:
            content_hash = repo.get_plan(s, plan_id=plan_id).content_hash
        answer_gate(
            exc.gate, plan_id=plan_id, decision=decision, comment=comment, plan_hash=content_hash, client=airflow_client
        )
        with session_scope(_engine()) as s:
            plan = repo.get_plan(s, plan_id=plan_id)
        gated = plan.approval
        if gated is None and plan.votes and decision == "approved":  # a vote of a plan needing several
            v = plan.votes[-1]
            return _vote_doc(
                plan_id, v.voter, v.voted_at, v.comment, v.via, [x.voter for x in plan.votes], plan.required_approvals
            )
        if gated is None:  # Airflow took it but no guard recorded it: the gate records it when it resumes
            return {
                "plan_id": plan_id,
                "decision": decision,
                "decided_by": "(Airflow user)",
                "via": "airflow-gate",
                "decided_at": None,
                "comment": comment,
                "note": "answered at the Airflow gate",
            }
        approval = gated
    if not approval.final:
        return _vote_doc(
            plan_id,
            approval.decided_by,
            approval.decided_at,
            approval.comment,
            approval.via,
            list(approval.votes),
            approval.required_approvals,
        )
    return {
        "plan_id": plan_id,
        "decision": approval.decision,
        "decided_by": approval.decided_by,
        "decided_at": approval.decided_at.isoformat(),
        "comment": approval.comment,
        "via": approval.via,
    }


def _vote_doc(plan_id: str, voter: str, at, comment, via, voters: list[str], required: int) -> dict:
    return {
        "plan_id": plan_id,
        "decision": "pending",
        "approved_by": voter,
        "decided_at": at.isoformat(),
        "comment": comment,
        "via": via,
        "approvals": voters,
        "required_approvals": required,
        "note": f"approval {len(voters)} of {required} recorded; the plan stays pending until "
        f"{required - len(voters)} more person(s) approve",
    }


def _decide(args: argparse.Namespace) -> int:
    print(json.dumps(decide(args.plan_id, args.decision, by=args.by, comment=args.comment)))
    return 0


def _who(by: str | None) -> str:
    return by or os.environ.get("PULSAR_REBALANCE_USER") or getpass.getuser()


def _stop(args: argparse.Namespace) -> int:
    from pulsar_rebalance.store import repository as repo
    from pulsar_rebalance.store.engine import session_scope

    with session_scope(_engine()) as s:
        new = repo.request_stop(s, plan_id=args.plan_id, requested_by=_who(args.by))
        plan = repo.get_plan(s, plan_id=args.plan_id)
    print(
        json.dumps(
            {
                "plan_id": args.plan_id,
                "status": plan.status,
                "stop_requested": plan.stop_requested,
                "note": "recorded" if new else "already requested",
            }
        )
    )
    return 0


def _resume(args: argparse.Namespace) -> int:
    from pulsar_rebalance.pipeline.context import admin_client_from_env
    from pulsar_rebalance.pipeline.execute import resume_plan

    with admin_client_from_env() as client:
        wrong = _other_cluster(client, args.plan_id)
        if wrong:
            from pulsar_rebalance.errors import ConfigError

            raise ConfigError(f"not resumed: {wrong}", key="PULSAR_ADMIN_URL")
        report = resume_plan(_engine(), client, plan_id=args.plan_id, by=_who(args.by))
    print(json.dumps(report.to_json(), default=str))
    return 0


def _other_cluster(client, plan_id: str) -> str | None:
    """Why ``client`` (from ``PULSAR_ADMIN_URL``) is not plan ``plan_id``'s Pulsar cluster, or None if it is:
    with several clusters, another cluster's admin URL must never get this plan's moves."""
    from pulsar_rebalance.store import repository as repo
    from pulsar_rebalance.store.engine import session_scope

    with session_scope(_engine()) as s:
        plan = repo.get_plan(s, plan_id=plan_id)
        name = repo.cluster_name(s, cluster_id=plan.cluster_id)
    served = client.clusters()
    if name in served:
        return None
    return (
        f"PULSAR_ADMIN_URL serves Pulsar cluster(s) {', '.join(served) or 'none'}, not plan {plan_id}'s cluster "
        f"{name!r}: export that cluster's admin URL (and credentials)"
    )


def _abort(args: argparse.Namespace) -> int:
    from contextlib import nullcontext

    from pulsar_rebalance.errors import ConfigError
    from pulsar_rebalance.pipeline.context import admin_client_from_env
    from pulsar_rebalance.pipeline.execute import abort_plan

    try:  # the cluster is re-read after the abort; without an admin URL the abort still runs, and says so
        client, why_not = admin_client_from_env(), None
    except ConfigError as exc:
        client, why_not = None, str(exc)
    if client is not None:
        why_not = _other_cluster(client, args.plan_id)  # another cluster's admin URL must not be measured
        if why_not:
            client.close()
            client = None
    with client if client is not None else nullcontext():
        plan = abort_plan(
            _engine(),
            client,
            plan_id=args.plan_id,
            by=_who(args.by),
            **({"no_client_reason": why_not} if why_not else {}),
        )
    print(
        json.dumps(
            {
                **(plan.result or {}),
                "plan_id": plan.plan_id,
                "status": plan.status,
                "actions": {a.state: sum(b.state == a.state for b in plan.actions) for a in plan.actions},
            },
            default=str,
        )
    )
    return 0


def _list(args: argparse.Namespace) -> int:
    from pulsar_rebalance.store import repository as repo
    from pulsar_rebalance.store.engine import session_scope

    with session_scope(_engine()) as s:
        repo.expire_due_plans(s)  # a plan whose window ended is shown (and recorded) as expired
        cluster_id = repo.cluster_id_named(s, args.cluster) if args.cluster else None
        plans = repo.list_plans(s, status=args.status, limit=args.limit, cluster_id=cluster_id)
        names = {p.cluster_id: repo.cluster_name(s, cluster_id=p.cluster_id) for p in plans}
    if not plans:
        print("no plans" + (f" of cluster {args.cluster}" if args.cluster else ""))
        return 0
    width = max(7, *(len(n) for n in names.values()))
    print(
        f"{'PLAN':<22} {'STATUS':<21} {'CREATED (UTC)':<20} {'SPLITS':>6} {'UNLOADS':>7}  {'MAX USAGE':<32} "
        f"{'CLUSTER':<{width}} RUN"
    )
    for p in plans:
        s_ = p.summary or {}
        usage = f"{_pct(s_.get('maxUsageBefore'))} -> {_pct(s_.get('maxUsageAfterPredicted'))} (predicted)"
        print(
            f"{p.plan_id:<22} {status_label(p):<21} {p.created_at:%Y-%m-%d %H:%M:%S} {s_.get('numBundleSplits', 0):>6} "
            f"{s_.get('numBundleUnloads', 0):>7}  {usage:<32} {names[p.cluster_id]:<{width}} {p.run_id}"
        )
    return 0


def status_label(plan) -> str:
    """The plan's status as shown to people: a dry run says so (``executed (dry run)``)."""
    return f"{plan.status} (dry run)" if plan.dry_run else plan.status


def _write_guard(out, guard: dict | None) -> None:
    """The plan's do-no-harm guard section (core.guard): what it kept and dropped (or, for a rollback, flagged)."""
    from pulsar_rebalance.core.plan_summary import GuardReport

    g = GuardReport.of(guard)
    if g is None:
        out.write("do-no-harm guard: not recorded (plan made before the guard existed)\n")
        return
    total = g.kept + g.dropped
    if not g.failed:
        out.write(f"do-no-harm guard: every planned action passed ({g.kept} kept, none dropped)\n")
    elif g.mode == "cut":
        out.write(f"do-no-harm guard: WARNING: {g.dropped} of {total} planned action(s) dropped, {g.kept} kept:\n")
    else:
        out.write(
            f"do-no-harm guard: WARNING: {len(g.failed)} of {total} action(s) fail it and are kept "
            "(a rollback the operator asked for is reported, not cut):\n"
        )
    for f in g.failed:
        move = f"{f.source} -> {f.destination}" if f.destination else f"on {f.source}"
        verb = "dropped" if g.mode == "cut" else "flagged"
        out.write(f"  - {verb} {f.kind} {f.bundle} {move} [{', '.join(f.rules)}]: {f.reason}\n")
    if g.replaced:
        out.write(f"do-no-harm guard: {len(g.replaced)} move(s) kept on another destination than planned:\n")
    for f in g.replaced:
        out.write(
            f"  - {f.bundle} {f.source} -> {f.destination} (planned {f.planned_destination}, refused "
            f"[{', '.join(f.rules)}]: {f.reason})\n"
        )


FIX_HINT = (
    'plan the fix (approval-gated like any plan): trigger the pulsar_rebalance DAG with {"fix_policy_violations": true}'
)


def _write_compliance(out, summary: dict) -> None:
    """The plan's compliance section (core.plan_summary.PlacementReport): the bundles that break their
    namespace's current policies in the run's ownership, with rule and why."""
    from pulsar_rebalance.core.plan_summary import PlacementReport

    p = PlacementReport.of(summary)
    if p is None:
        out.write("compliance: not recorded (the run stored no placement constraints)\n")
        return
    if p.empty:
        out.write("compliance: no placement constraint (isolation policy, anti-affinity group) is set\n")
    elif not p.violations:
        out.write("compliance: every bundle is on a broker its namespace's policies allow\n")
    else:
        n = len({v.bundle for v in p.violations})
        out.write(f"compliance: WARNING: {n} bundle(s) break their namespace's placement policies:\n")
        for v in p.violations:
            out.write(f"  - {v.bundle} on {v.broker} [{v.rule}]: {v.why}\n")
        if not p.fix:
            out.write(f"  {FIX_HINT}\n")
    for v in p.unfixable:
        out.write(f"  not moved: {v.bundle} on {v.broker} [{v.rule}]: {v.why_not_moved}\n")


def _violations(args: argparse.Namespace) -> int:
    from pulsar_rebalance.core.plan_summary import PlacementReport
    from pulsar_rebalance.store import repository as repo
    from pulsar_rebalance.store.engine import session_scope

    with session_scope(_engine()) as s:
        plan = repo.get_plan(s, plan_id=args.plan_id)
    summary = plan.summary or {}
    if args.json:
        p = PlacementReport.of(summary)
        doc = {
            "plan_id": plan.plan_id,
            "run_id": plan.run_id,
            "recorded": p is not None,
            "violations": (summary.get("placement") or {}).get("violations", []) if p is not None else None,
            "unfixable": ((summary.get("fixPolicyViolations") or {}).get("unfixable") or []),
        }
        print(json.dumps(doc, indent=2))
        return 0
    sys.stdout.write(f"Plan {plan.plan_id}  run={plan.run_id}\n")
    _write_compliance(sys.stdout, summary)
    return 0


def _pct(x: float | None) -> str:
    return "   n/a" if x is None else f"{100 * x:5.1f}%"


def _show(args: argparse.Namespace) -> int:
    from pulsar_rebalance.store import repository as repo
    from pulsar_rebalance.store.engine import session_scope

    if args.plot:
        from pulsar_rebalance.cli.plot import chart_path

        chart_path(args.plot, args.plan_id)  # refuse a bad --plot before touching the database
    from pulsar_rebalance.store import queries

    with session_scope(_engine()) as s:
        repo.expire_plan(s, plan_id=args.plan_id)  # no-op unless its window ended
        plan = repo.get_plan(s, plan_id=args.plan_id)
        cluster = repo.cluster_name(s, cluster_id=plan.cluster_id)
        progress = queries.progress_inputs(s, plan_id=args.plan_id).progress()
    if args.plot:
        from pulsar_rebalance.cli.plot import plot_plan

        print(f"chart written to {plot_plan(plan, chart_path(args.plot, plan.plan_id))}", file=sys.stderr)
    if args.json:
        print(json.dumps(plan_to_json(plan, cluster=cluster), default=str, indent=2))
        return 0
    s_ = plan.summary or {}
    out = sys.stdout
    out.write(
        f"Plan {plan.plan_id}  cluster={cluster}  kind={plan.kind}  status={status_label(plan)}  run={plan.run_id}  "
        f"dry_run={plan.dry_run}\n"
    )
    if plan.dry_run:
        out.write(
            "DRY RUN: no admin call is made to Pulsar; on execution every action is skipped with what it would do\n"
        )
    out.write(f"created {plan.created_at:%Y-%m-%d %H:%M:%S} UTC, expires {plan.expires_at:%Y-%m-%d %H:%M:%S} UTC\n")
    d = s_.get("decision", {})
    out.write(f"decision: {d.get('label')} ({d.get('reason')}); strategies: {s_.get('strategies')}\n")
    out.write(
        f"max broker usage: {_pct(s_.get('maxUsageBefore'))} -> {_pct(s_.get('maxUsageAfterPredicted'))} (predicted)\n"
    )
    result = plan.result or {}
    measured = result.get("broker_usage_after") or {}
    if result.get("max_usage_after") is not None:
        out.write(f"max broker usage measured after execution: {_pct(result['max_usage_after'])}\n")
    elif result.get("not_measured"):
        out.write(f"not measured after execution: {result['not_measured']}\n")
    if not plan.actions:
        from pulsar_rebalance.core.plan_summary import why_nothing_planned

        out.write("why nothing was planned:\n" + "".join(f"  - {line}\n" for line in why_nothing_planned(s_)))
    if plan.approval:
        ap = plan.approval
        out.write(
            f"{ap.decision} by {ap.decided_by} at {ap.decided_at:%Y-%m-%d %H:%M:%S} UTC"
            + (f": {ap.comment}" if ap.comment else "")
            + "\n"
        )
    elif plan.required_approvals > 1:
        out.write(
            f"approvals: {len(plan.votes)} of {plan.required_approvals} (different people)"
            + "".join(f"; {v.voter} at {v.voted_at:%Y-%m-%d %H:%M:%S} UTC" for v in plan.votes)
            + "\n"
        )
    from pulsar_rebalance.core.progress import PROGRESS_STATUSES, progress_lines

    if plan.actions and plan.status in PROGRESS_STATUSES:
        out.write("progress:\n" + "".join(f"  {line}\n" for line in progress_lines(progress)))
    _write_guard(out, s_.get("guard"))
    _write_compliance(out, s_)
    from pulsar_rebalance.core.plan_summary import PlacementReport

    placement = PlacementReport.of(s_)
    out.write("\nactions:\n")
    for a in plan.actions:
        what = (
            f"split  {a.bundle} at {[f'0x{b:08x}' for b in a.boundaries or []]}"
            if a.kind == "split"
            else f"unload {a.bundle}  {a.source_broker} -> {a.destination_broker}"
        )
        out.write(f"  [{a.seq}] {what}  [{a.state}]\n        why: {a.reason}\n")
        if a.kind == "unload" and placement is not None:
            out.write(f"        checked against: {placement.constraints_of(a.seq)}\n")
        if a.error:
            out.write(f"        {'skipped' if a.state == 'skipped' else 'error'}: {a.error}\n")
    out.write(f"\nbrokers (predicted weighted max usage{'; measured after' if measured else ''}):\n")
    for b, v in sorted((s_.get("brokers") or {}).items()):
        out.write(
            f"  {b:<24} {_pct(v['before']['usage'])} -> {_pct(v['after']['usage'])}   "
            f"bundles {v['before']['bundles']} -> {v['after']['bundles']}"
            + (f"   measured {_pct(measured.get(b))}" if measured else "")
            + "\n"
        )
    for n in s_.get("notes") or []:
        out.write(f"note: {n}\n")
    return 0


def plan_to_json(plan, *, cluster: str | None = None) -> dict[str, Any]:
    return {
        "plan_id": plan.plan_id,
        "kind": plan_kind(plan.summary),
        "status": plan.status,
        "run_id": plan.run_id,
        "cluster": cluster or (plan.summary or {}).get("cluster"),
        "dry_run": plan.dry_run,
        "created_at": plan.created_at,
        "expires_at": plan.expires_at,
        "summary": plan.summary,
        "result": plan.result,
        "approval": None
        if plan.approval is None
        else {
            "decision": plan.approval.decision,
            "decided_by": plan.approval.decided_by,
            "decided_at": plan.approval.decided_at,
            "comment": plan.approval.comment,
        },
        "required_approvals": plan.required_approvals,
        "votes": [{"voter": v.voter, "voted_at": v.voted_at, "comment": v.comment, "via": v.via} for v in plan.votes],
        "actions": [
            {
                "seq": a.seq,
                "kind": a.kind,
                "namespace": a.namespace,
                "bundle": a.bundle,
                "bundle_range": a.bundle_range,
                "source_broker": a.source_broker,
                "destination_broker": a.destination_broker,
                "boundaries": a.boundaries,
                "reason": a.reason,
                "predicted": a.predicted,
                "state": a.state,
                "attempts": a.attempts,
                "error": a.error,
            }
            for a in plan.actions
        ],
    }


def _db_upgrade(args: argparse.Namespace) -> int:
    from pulsar_rebalance.store.engine import database_url, migrate

    migrate(database_url())
    print("database is at the latest schema revision")
    return 0
