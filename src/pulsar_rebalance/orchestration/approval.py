"""The manual-approval gate: Airflow's human-in-the-loop request, arbitrated by our stored plan.

``await_approval`` is a :class:`HITLOperator` (Airflow 3.3: the task waits in ``awaiting_input``, no
worker slot, no triggerer). It shows up where operators already are — Browse → Required Actions, the
task's "Required Actions" tab, the REST API ``.../hitlDetails`` — with **Approve** / **Reject**, a
comment field and the plan's content hash; its Markdown body summarises the plan and links to the
plan page of our plugin (``/pulsar-rebalance/plans/<id>``).

The plan row in our Postgres stays the single source of truth:

* before the request is opened, the plan is marked as waiting at this gate (``repository.open_gate``),
  so every other path (the CLI) answers the same request through Airflow's REST API and exactly one
  decision wins (Airflow's own row lock on the request; a second answer gets 409);
* a decision is checked *before* Airflow accepts it by :mod:`.gate_guard` (expired, superseded,
  already decided or changed plans are refused with a message saying which) and recorded in our
  ``approvals`` table with the Airflow user, time, comment and content hash right after;
* when the task resumes it reads the decision back from the plan row (recording it itself if the
  guard did not run, e.g. the plugin is not installed).

    plan status                  gate outcome
    empty                        skip (nothing to approve; execute_unload skipped, run green)
    pending (small, policy on)   approved by the auto-approval policy, recorded as ``policy``
    pending                      Required Action opened; wait until answered or the plan's TTL
    pending, 1 of N approvals    the same Required Action opens again for the next (different) approver
    approved                     success, XCom = {"plan_id", "decision", "decided_by", ...}
    rejected/expired/superseded  skip execute_unload (recorded, not an error)

Why not the provider's ``ApprovalOperator`` as is: its answer is final the moment Airflow stores it,
whatever became of the plan meanwhile (expired, superseded by a newer snapshot, changed); and it
records nothing in the plan's audit trail. The subclass keeps Airflow's UI, auth and REST and adds
those checks.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from airflow.providers.standard.operators.hitl import HITLOperator
from airflow.sdk import Param
from airflow.sdk.definitions.param import ParamsDict
from airflow.sdk.exceptions import AirflowSkipException

if TYPE_CHECKING:
    from pulsar_rebalance.store.approvals import Decision

from pulsar_rebalance.orchestration.gate_guard import SYSTEM_RESPONDER

APPROVE, REJECT = "Approve", "Reject"
PLAN_PAGE = "pulsar-rebalance/plans/{plan_id}"  # relative to the Airflow UI's base URL
BODY_ACTION_ROWS = 15


def _session(url: str):
    from pulsar_rebalance.store.engine import make_engine, session_scope

    return session_scope(make_engine(url))


def _state(plan, message: str | None = None) -> dict[str, Any]:
    approval = plan.approval
    return {
        "status": plan.status,
        "plan_id": plan.plan_id,
        "content_hash": plan.content_hash,
        "decision": approval.decision if approval else None,
        "decided_by": approval.decided_by if approval else None,
        "decided_at": approval.decided_at.isoformat() if approval else None,
        "comment": approval.comment if approval else None,
        "via": approval.via if approval else None,
        "superseded_by": plan.superseded_by,
        "required_approvals": plan.required_approvals,
        "approvals": [v.voter for v in plan.votes],
        "message": message,
    }


def check_plan(url: str, run_id: str, now: dt.datetime | None = None) -> dict[str, Any]:
    """Current gate state of the run's plan; expires it (recorded) when its window has passed."""
    from pulsar_rebalance.store import repository as repo

    now = now or dt.datetime.now(dt.UTC)
    with _session(url) as s:
        plan = repo.plan_for_run(s, run_id=run_id)
        if plan is None:
            return {"status": "missing", "run_id": run_id}
        if plan.status == "pending" and repo.expire_plan(s, plan_id=plan.plan_id, now=now):
            plan = repo.get_plan(s, plan_id=plan.plan_id)
        return _state(plan)


def auto_approval_reason(plan, max_unloads: int | None) -> str | None:
    """Why the auto-approval policy approves ``plan`` (None: a human must decide).

    The policy approves only plans of unloads (no split: a split cannot be undone) with at most
    ``max_unloads`` of them; ``None`` turns the policy off.
    """
    if max_unloads is None or plan.status != "pending" or plan.required_approvals > 1:
        return None  # a plan that needs several people is never approved by a machine
    kinds = [a.kind for a in plan.actions]
    if "split" in kinds or len(kinds) > max_unloads:
        return None
    return f"auto-approval policy: {len(kinds)} unload(s) <= {max_unloads}, no split"


def open_gate_for_run(
    url: str,
    run_id: str,
    gate: dict[str, Any],
    *,
    auto_approve_max_unloads: int | None = None,
    now: dt.datetime | None = None,
) -> tuple[dict[str, Any], Any]:
    """Prepare the gate of ``run_id``: expiry, the auto-approval policy, then mark the plan as gated.

    Returns ``(state, plan view)``; state ``pending`` means a human decision is needed at the gate.
    """
    from pulsar_rebalance.store import repository as repo

    now = now or dt.datetime.now(dt.UTC)
    with _session(url) as s:
        plan = repo.plan_for_run(s, run_id=run_id)
        if plan is None:
            return {"status": "missing", "run_id": run_id}, None
        if plan.status == "pending" and not repo.expire_plan(s, plan_id=plan.plan_id, now=now):
            reason = auto_approval_reason(plan, auto_approve_max_unloads)
            if reason:
                repo.decide_plan(
                    s,
                    plan_id=plan.plan_id,
                    decision="approved",
                    decided_by="policy:auto-approve",
                    comment=reason,
                    now=now,
                    plan_hash=plan.content_hash,
                    via="policy",
                )
            else:
                repo.open_gate(s, plan_id=plan.plan_id, gate=gate, now=now)
        plan = repo.get_plan(s, plan_id=plan.plan_id)
        return _state(plan), plan


def record_gate_decision(
    url: str,
    run_id: str,
    *,
    decision: Decision,
    decided_by: str,
    comment: str | None,
    plan_hash: str | None,
    responded_at: dt.datetime | None = None,
) -> dict[str, Any]:
    """Record an answer given at the gate (idempotent: the guard may have recorded it already)."""
    from pulsar_rebalance.errors import PlanError
    from pulsar_rebalance.store import repository as repo

    with _session(url) as s:
        plan = repo.plan_for_run(s, run_id=run_id)
        if plan is None:
            return {"status": "missing", "run_id": run_id}
        approval = plan.approval
        if approval is not None and approval.via == "airflow-gate" and decided_by in approval.decided_by.split(" + "):
            return _state(plan)  # recorded by the guard when the answer was given
        if (
            approval is None
            and decision == "approved"
            and any(v.voter == decided_by and v.via == "airflow-gate" for v in plan.votes)
        ):
            return _state(plan)  # this person's vote is in (by the guard); the plan waits for the next approver
    try:
        with _session(url) as s:
            repo.decide_plan(
                s,
                plan_id=plan.plan_id,
                decision=decision,
                decided_by=decided_by,
                comment=comment,
                now=responded_at,
                plan_hash=plan_hash or None,
                via="airflow-gate",
            )
            message = None
    except PlanError as exc:  # expired/superseded/changed meanwhile: the stored plan wins
        message = f"the answer of {decided_by} at the gate was not applied: {exc}"
    with _session(url) as s:
        return _state(repo.get_plan(s, plan_id=plan.plan_id), message)


def gate_body(plan, *, cluster: str | None = None) -> str:
    """The Markdown shown with the Required Action: the plan at a glance and a link to its page."""
    summary = plan.summary or {}
    unloads = [a for a in plan.actions if a.kind == "unload"]
    splits = [a for a in plan.actions if a.kind == "split"]
    before, after = summary.get("maxUsageBefore"), summary.get("maxUsageAfterPredicted")
    lines = [
        f"**Plan `{plan.plan_id}`**"
        + (f" for cluster **{cluster}**" if cluster else "")
        + f": {len(unloads)} unload(s), {len(splits)} split(s)"
        + (" — **dry run**" if plan.dry_run else "")
        + ".",
        "",
    ]
    if before is not None and after is not None:
        lines += [f"Busiest broker's usage: **{before:.1%} → {after:.1%}** (predicted).", ""]
    for warning in summary.get("warnings") or []:
        lines.append(f"> ⚠ {warning}")
    if summary.get("warnings"):
        lines.append("")
    if plan.required_approvals > 1:
        lines += [
            f"**Needs {plan.required_approvals} approvals from different people.** After each approval "
            "this request opens again for the next approver. A single Reject ends it.",
            "",
        ]
        if plan.votes:
            voters = ", ".join(f"{v.voter} ({v.voted_at:%H:%M} UTC)" for v in plan.votes)
            missing = plan.required_approvals - len(plan.votes)
            lines += [
                f"**Approved so far: {len(plan.votes)} of {plan.required_approvals}** — {voters}. "
                f"Still needed: {missing} approval(s) from someone else; "
                f"{' and '.join(v.voter for v in plan.votes)} cannot approve again.",
                "",
            ]
    lines += ["| # | action | bundle | from → to | reason |", "|---|---|---|---|---|"]
    for a in plan.actions[:BODY_ACTION_ROWS]:
        move = (
            f"{a.source_broker} → {a.destination_broker or '(Pulsar chooses)'}"
            if a.kind == "unload"
            else f"{a.source_broker}, at {', '.join(f'0x{b:08x}' for b in (a.boundaries or []))}"
        )
        reason = a.reason.replace("|", "\\|")
        lines.append(f"| {a.seq} | {a.kind} | `{a.bundle}` | {move} | {reason} |")
    if len(plan.actions) > BODY_ACTION_ROWS:
        lines.append(f"| … | | {len(plan.actions) - BODY_ACTION_ROWS} more | | |")
    expires = f" Expires at {plan.expires_at:%Y-%m-%d %H:%M} UTC (then nothing runs)." if plan.expires_at else ""
    lines += [
        "",
        f"**[Open the plan page →](/{PLAN_PAGE.format(plan_id=plan.plan_id)})** (chart, every action's predicted"
        f" effect, data quality).{expires}",
        "",
        f"Content hash `{(plan.content_hash or '')[:12]}`: what you approve is exactly what runs; the executor "
        "verifies it.",
    ]
    return "\n".join(lines)


class PlanApprovalGate(HITLOperator):
    """Approve or reject this run's stored plan in the Airflow UI (Required Actions) or its REST API."""

    template_fields = ("run_key",)
    ui_color = "#fff3cd"

    def __init__(
        self, *, run_key: str = "{{ run_id }}", auto_approve_param: str = "auto_approve_max_unloads", **kwargs: Any
    ) -> None:
        kwargs.setdefault("subject", "Approve the rebalance plan")
        injected = kwargs.pop("params", None) or {}  # DAG-level params handed down by Airflow (source "dag")
        params = {k: injected.get_param(k) if isinstance(injected, ParamsDict) else injected[k] for k in injected}
        params.update(
            {
                "comment": Param("", type="string", title="Comment", description="recorded with your decision"),
                "plan_hash": Param(
                    "",
                    type="string",
                    title="Plan content hash",
                    description="the content you reviewed (pre-filled; leave as is)",
                ),
            }
        )
        super().__init__(options=[APPROVE, REJECT], params=params, **kwargs)
        self.run_key = run_key
        self.auto_approve_param = auto_approve_param

    # ---------------------------------------------------------------------------------- request
    def execute(self, context):
        from pulsar_rebalance.orchestration.connections import database_url

        ti = context["task_instance"]
        gate = {
            "dag_id": ti.dag_id,
            "run_id": ti.run_id,
            "task_id": ti.task_id,
            "map_index": getattr(ti, "map_index", -1) if getattr(ti, "map_index", None) is not None else -1,
        }
        max_unloads = (context.get("params") or {}).get(self.auto_approve_param)
        state, plan = open_gate_for_run(database_url(), self.run_key, gate, auto_approve_max_unloads=max_unloads)
        if state["status"] != "pending":
            return self._finish(state)
        now = dt.datetime.now(dt.UTC)
        self.subject = (
            f"Approve rebalance plan {plan.plan_id}: {sum(a.kind == 'unload' for a in plan.actions)} "
            f"unload(s), {sum(a.kind == 'split' for a in plan.actions)} split(s)"
        )
        self.body = gate_body(plan, cluster=(plan.summary or {}).get("cluster"))
        self.params["plan_hash"] = plan.content_hash or ""
        if plan.expires_at is not None:
            self.response_timeout = max(plan.expires_at - now, dt.timedelta(seconds=1))
        self.log.info(
            "Plan %s waits for approval (%d actions; expires %s).",
            plan.plan_id,
            len(plan.actions),
            plan.expires_at.isoformat() if plan.expires_at else "never",
        )
        self.log.info(
            "Decide in the Airflow UI: Browse -> Required Actions, or /dags/%s/runs/%s/tasks/%s/required_actions",
            gate["dag_id"],
            gate["run_id"],
            gate["task_id"],
        )
        self.log.info(
            "Plan page: /%s   CLI: pulsar-rebalance plans approve|reject %s -m '...'",
            PLAN_PAGE.format(plan_id=plan.plan_id),
            plan.plan_id,
        )
        return super().execute(context)

    # ----------------------------------------------------------------------------------- answer
    def process_trigger_event_error(self, event: dict[str, Any]) -> None:
        if event.get("error_type") == "timeout":  # the plan's window ended with no answer: expiry, not failure
            from pulsar_rebalance.orchestration.connections import database_url

            self._finish(check_plan(database_url(), self.run_key))
        super().process_trigger_event_error(event)

    def execute_complete(self, context, event: dict[str, Any]):
        from pulsar_rebalance.orchestration.connections import database_url

        answer = super().execute_complete(context, event)
        chosen = list(answer["chosen_options"])
        params = dict(answer.get("params_input") or {})
        user = answer.get("responded_by_user") or {}
        url = database_url()
        if not user:  # a timeout default, not a person
            return self._finish(check_plan(url, self.run_key))
        if user.get("id") == SYSTEM_RESPONDER["id"]:  # closed by the gate guard: superseded or expired
            return self._finish(check_plan(url, self.run_key))
        state = record_gate_decision(
            url,
            self.run_key,
            decision="approved" if chosen == [APPROVE] else "rejected",
            decided_by=user.get("name") or user.get("id") or "unknown",
            comment=params.get("comment") or None,
            plan_hash=params.get("plan_hash") or None,
            responded_at=answer.get("responded_at"),
        )
        if state.get("status") == "pending":  # one approval of several: open the request for the next approver
            return self._reopen(context, state)
        return self._finish(state)

    def _reopen(self, context, state: dict[str, Any]):
        """Ask again (same request, answer cleared by Airflow) until the plan has all its approvals."""
        from pulsar_rebalance.orchestration.connections import database_url
        from pulsar_rebalance.store import repository as repo

        if state.get("message"):
            self.log.warning("%s", state["message"])
        with _session(database_url()) as s:
            plan = repo.get_plan(s, plan_id=state["plan_id"])
        if plan.expires_at is not None:
            self.response_timeout = max(plan.expires_at - dt.datetime.now(dt.UTC), dt.timedelta(seconds=1))
        self.log.info(
            "Plan %s has %d of %d approvals (%s); waiting for another approver at the same gate.",
            plan.plan_id,
            len(plan.votes),
            plan.required_approvals,
            ", ".join(v.voter for v in plan.votes),
        )
        return HITLOperator.execute(self, context)

    def _finish(self, state: dict[str, Any]):
        status = state.get("status")
        if state.get("message"):
            self.log.warning("%s", state["message"])
        if status == "missing":
            raise RuntimeError(f"run {self.run_key} has no plan: plan_split must run first")
        if status == "empty":
            raise AirflowSkipException("Nothing to do: the plan has no actions, so there is nothing to approve.")
        if status in ("rejected", "expired", "superseded"):
            who = f" by {state['decided_by']}" if state.get("decided_by") else ""
            extra = f" (superseded by plan {state['superseded_by']})" if state.get("superseded_by") else ""
            raise AirflowSkipException(f"Plan {state.get('plan_id')} was {status}{who}{extra}: nothing is executed.")
        if status != "approved":
            raise AirflowSkipException(f"Plan {state.get('plan_id')} is {status}: nothing to execute from this gate.")
        self.log.info(
            "Plan %s approved by %s (via %s)%s",
            state.get("plan_id"),
            state.get("decided_by"),
            state.get("via"),
            f": {state['comment']}" if state.get("comment") else "",
        )
        return state
