"""Guard in front of Airflow's human-in-the-loop answer for our gate (an ASGI root middleware).

Registered by the plugin (``fastapi_root_middlewares``), it sees every
``PATCH /api/v2/dags/{dag}/dagRuns/{run}/taskInstances/{task}/{map_index}/hitlDetails`` — the call
the Airflow UI's Required Actions page, the REST API and our CLI all make. For a request that is one of
our plan gates (the plan row names it), from an authenticated user allowed to answer it:

1. **before** Airflow stores the answer, the stored plan is checked: an expired, superseded, already
   decided or changed (content hash) plan is refused with ``409`` and a message saying which, and so
   is a second approval by the same person of a plan that needs several approvers;
2. the request goes on to Airflow unchanged (its own checks: 400 bad option, 409 already answered);
3. if Airflow accepted it, the decision is recorded in our ``approvals`` table (Airflow user, time,
   comment, content hash, ``via=airflow-gate``) at once (for a plan that needs several approvers, as
   one vote until the last); if the plan changed state in the
   milliseconds between, the answer is reported back as refused (409) and the task, when it resumes,
   follows the stored plan.

Anything else (other paths, other DAGs' gates, unauthenticated or unauthorised callers) passes
through untouched, so Airflow answers it (401/403) exactly as it would without the plugin.

Two things the Airflow UI cannot show by itself:

* **a refusal's reason**: the UI's toast shows only the status text ("Conflict"), so a refused answer
  is also written at the top of the gate's own text (its HITL body), where the operator is;
* **a gate that can no longer be decided** (its plan was superseded by a newer plan, or expired) would
  stay under Required Actions: before the UI reads Airflow's API (at most every few seconds) such gates
  are answered by the system (``Reject``, responder ``pulsar-rebalance``, the reason as comment), so they
  leave the list and the task ends skipped saying why (:func:`close_stale_gates`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pulsar_rebalance.store.approvals import Decision

log = logging.getLogger(__name__)

HITL_PATH = re.compile(
    r"^(?:.*)?/api/v2/dags/(?P<dag_id>[^/]+)/dagRuns/(?P<run_id>[^/]+)/taskInstances/(?P<task_id>[^/]+)/"
    r"(?P<map_index>-?\d+)/hitlDetails/?$"
)
DECISIONS: dict[str, Decision] = {"Approve": "approved", "Reject": "rejected"}
SYSTEM_RESPONDER = {"id": "pulsar-rebalance", "name": "pulsar-rebalance (system)"}
REFUSAL_MARK = "**Answer refused**"
CLOSED_MARK = "**Closed by pulsar-rebalance**"
SWEEP_SECONDS = 5.0  # at most one sweep of stale gates per this many seconds (per api-server process)
_last_sweep = [float("-inf")]


def _db_url() -> str | None:
    from pulsar_rebalance.orchestration.connections import server_database_url

    return server_database_url()


def precheck(
    url: str,
    dag_id: str,
    run_id: str,
    task_id: str,
    plan_hash: str | None,
    *,
    voter: str | None = None,
    decision: str | None = None,
) -> tuple[str | None, str | None]:
    """``(plan_id, refusal)`` for an answer to this gate; plan_id None: not one of our gates.

    ``voter``/``decision``: who answers what; a second approval by the same person of a plan that
    needs several approvers is refused.
    """
    import datetime as dt

    from pulsar_rebalance.store import repository as repo
    from pulsar_rebalance.store.engine import make_engine, session_scope

    with session_scope(make_engine(url)) as s:
        plan = repo.plan_at_gate(s, dag_id=dag_id, run_id=run_id, task_id=task_id)
        if plan is None:
            return None, None
        if plan.status == "pending" and repo.expire_plan(s, plan_id=plan.plan_id, now=dt.datetime.now(dt.UTC)):
            plan = repo.get_plan(s, plan_id=plan.plan_id)
    if plan.status == "expired":
        return plan.plan_id, f"plan {plan.plan_id} expired at {plan.expires_at:%Y-%m-%d %H:%M:%S} UTC: nothing will run"
    if plan.status == "superseded":
        return plan.plan_id, (
            f"plan {plan.plan_id} was superseded by plan {plan.superseded_by}: review and decide the newer plan instead"
        )
    if plan.status != "pending":
        a = plan.approval
        who = f" ({a.decision} by {a.decided_by} at {a.decided_at:%Y-%m-%d %H:%M:%S} UTC)" if a else ""
        return plan.plan_id, f"plan {plan.plan_id} is already {plan.status}{who}"
    if decision == "approved" and voter and any(v.voter == voter for v in plan.votes):
        return plan.plan_id, (
            f"plan {plan.plan_id} already has your approval ({voter}); it needs "
            f"{plan.required_approvals} approvals from different people ({len(plan.votes)} so far): "
            "another approver must decide"
        )
    if plan_hash and plan.content_hash and plan_hash != plan.content_hash:
        return plan.plan_id, (
            f"plan {plan.plan_id} has content {plan.content_hash[:12]} but the answer was given on "
            f"{plan_hash[:12]}: reload the plan and decide again"
        )
    return plan.plan_id, None


def record(
    url: str, plan_id: str, *, decision: Decision, decided_by: str, comment: str | None, plan_hash: str | None
) -> str | None:
    """Record the accepted answer; returns a refusal message if the plan changed state meanwhile."""
    from pulsar_rebalance.errors import PlanError
    from pulsar_rebalance.store import repository as repo
    from pulsar_rebalance.store.engine import make_engine, session_scope

    try:
        with session_scope(make_engine(url)) as s:
            repo.decide_plan(
                s,
                plan_id=plan_id,
                decision=decision,
                decided_by=decided_by,
                comment=comment,
                plan_hash=plan_hash,
                via="airflow-gate",
            )
    except PlanError as exc:
        return f"the answer was stored by Airflow but not applied to the plan: {exc}"
    return None


def waiting_for_next_approver(url: str, plan_id: str) -> str | None:
    """A message if the plan has some but not all of its approvals (the gate is about to open again)."""
    from pulsar_rebalance.store import repository as repo
    from pulsar_rebalance.store.engine import make_engine, session_scope

    with session_scope(make_engine(url)) as s:
        plan = repo.get_plan(s, plan_id=plan_id)
    if plan.status != "pending" or not plan.votes:
        return None
    return (
        f"plan {plan_id} has {len(plan.votes)} of {plan.required_approvals} approvals "
        f"({', '.join(v.voter for v in plan.votes)}); its gate opens again for the next approver in a few "
        "seconds: retry then"
    )


async def _authorized(scope, dag_id: str):
    """The caller if authenticated and allowed to answer this DAG's required actions, else None."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails
    from airflow.api_fastapi.core_api.security import USER_INJECTED_BY_TRUSTED_MIDDLEWARE
    from starlette.requests import Request

    request = Request(scope)
    user = None
    token: str | None
    header = request.headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        token = header[7:].strip()
    else:
        injected = getattr(request.state, "user", None)
        if (
            injected is not None
            and getattr(request.state, "user_authenticated_via", None) is USER_INJECTED_BY_TRUSTED_MIDDLEWARE
        ):
            user = injected
        token = request.cookies.get("_token")
    try:
        if user is None and token:
            user = await get_auth_manager().get_user_from_token(token)
        if user is None:
            return None
        allowed = get_auth_manager().is_authorized_dag(
            method="PUT", access_entity=DagAccessEntity.HITL_DETAIL, details=DagDetails(id=dag_id), user=user
        )
        return user if allowed else None
    except Exception:
        return None


def _airflow_gate(session, gate: dict[str, Any]):
    """``(task instance, HITL detail)`` of a gate in Airflow's metadata DB, both locked (TI first, as
    Airflow's own answer endpoint does); ``(None, None)`` if Airflow has no such task instance."""
    from airflow.models.hitl import HITLDetail
    from airflow.models.taskinstance import TaskInstance
    from sqlalchemy import select

    ti = session.scalar(
        select(TaskInstance)
        .where(
            TaskInstance.dag_id == gate["dag_id"],
            TaskInstance.run_id == gate["run_id"],
            TaskInstance.task_id == gate["task_id"],
            TaskInstance.map_index == int(gate.get("map_index", -1)),
        )
        .with_for_update(of=TaskInstance)
    )
    if ti is None:
        return None, None
    detail = session.scalar(select(HITLDetail).where(HITLDetail.ti_id == ti.id).with_for_update(of=HITLDetail))
    return ti, detail


def close_airflow_gate(gate: dict[str, Any], reason: str) -> bool:
    """Answer an open gate as the system (``Reject``, the reason as comment) and resume its task.

    Returns False if the gate had already been answered (by a person, or earlier by the system)."""
    import datetime as dt

    from airflow.models.trigger import handle_event_submit
    from airflow.triggers.base import TriggerEvent
    from airflow.utils.session import create_session
    from airflow.utils.state import TaskInstanceState

    with create_session() as session:
        ti, detail = _airflow_gate(session, gate)
        if detail is None or detail.response_received:
            return False
        detail.responded_by = dict(SYSTEM_RESPONDER)
        detail.responded_at = dt.datetime.now(dt.UTC)
        detail.chosen_options = ["Reject"]
        detail.params_input = {"comment": reason, "plan_hash": ""}
        detail.body = f"{CLOSED_MARK}: {reason}.\n\n{detail.body or ''}"
        session.add(detail)
        if ti.state in (TaskInstanceState.AWAITING_INPUT, TaskInstanceState.DEFERRED):
            handle_event_submit(TriggerEvent(detail.as_resume_event_payload()), task_instance=ti, session=session)
    return True


def close_stale_gates(url: str) -> list[str]:
    """Close the Airflow gates of plans that can no longer be decided; returns the plan ids closed by the
    system. Gates a person answered are only marked, so each plan is looked at until marked, once."""
    from pulsar_rebalance.store import repository as repo
    from pulsar_rebalance.store.engine import make_engine, session_scope

    engine = make_engine(url)
    with session_scope(engine) as s:
        stale = repo.gates_to_close(s)
    closed = []
    for plan in stale:
        if not plan.gate:  # gates_to_close lists only plans with a gate
            continue
        reason = repo.closed_gate_reason(plan)
        by_system = close_airflow_gate(dict(plan.gate), reason)
        with session_scope(engine) as s:
            repo.mark_gate_closed(s, plan_id=plan.plan_id, reason=reason if by_system else None)
        if by_system:
            log.info("closed the gate of %s in Airflow: %s", plan.plan_id, reason)
            closed.append(plan.plan_id)
    return closed


def note_refusal(gate: dict[str, str], voter: str | None, refusal: str) -> None:
    """Write a refused answer's reason at the top of the gate's text (the Airflow UI shows only "Conflict")."""
    import datetime as dt

    from airflow.utils.session import create_session

    with create_session() as session:
        _ti, detail = _airflow_gate(session, gate)
        if detail is None:
            return
        body = detail.body or ""
        if body.startswith(REFUSAL_MARK):  # replace the previous refusal note
            body = body.split("\n\n", 1)[1] if "\n\n" in body else ""
        who = f" ({voter}, {dt.datetime.now(dt.UTC):%H:%M:%S} UTC)" if voter else ""
        detail.body = f"{REFUSAL_MARK}{who}: {refusal}\n\n{body}"
        session.add(detail)


def follow_airflow_runs(url: str) -> dict[str, str]:
    """Runs still ``running`` in the state DB whose Airflow run has ended (also when marked success/failed by
    hand) take Airflow's final state; returns ``{run_id: new status}``."""
    from airflow.utils.session import create_session

    from pulsar_rebalance.store import repository as repo
    from pulsar_rebalance.store.engine import make_engine, session_scope

    engine = make_engine(url)
    with session_scope(engine) as s:
        running = repo.running_run_ids(s)
    if not running:
        return {}
    with create_session() as session:
        states = {
            key: str(getattr(run.state, "value", run.state)) for key, run in _airflow_runs(session, running).items()
        }
    changed = {}
    with session_scope(engine) as s:
        for run_id, state in states.items():
            new = repo.follow_airflow_state(s, run_id=run_id, airflow_state=state)
            if new:
                changed[run_id] = new
    for run_id, new in changed.items():
        log.info("run %s is %s in Airflow: recorded as %s", run_id, states[run_id], new)
    return changed


def note_empty_runs(url: str, *, recent: int = 50) -> list[str]:
    """The Airflow run of each recent empty plan gets a note saying why nothing was planned (the DAG run
    page shows it), unless the run has a note already; returns the run ids noted."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session

    from pulsar_rebalance.core.plan_summary import why_nothing_planned
    from pulsar_rebalance.store import repository as repo
    from pulsar_rebalance.store.engine import make_engine, session_scope

    with session_scope(make_engine(url)) as s:
        why = {p.run_id: why_nothing_planned(p.summary or {}) for p in repo.list_plans(s, status="empty", limit=recent)}
    if not why:
        return []
    noted = []
    with create_session() as session:
        for key, run in _airflow_runs(session, why, ~DagRun.dag_run_note.has()).items():
            run.note = f"Nothing to do: {'; '.join(why[key])}"[:1000]
            noted.append(key)
    return noted


def _airflow_runs(session, keys, *where) -> dict[str, Any]:
    """``{state DB run id: Airflow DagRun}`` for the run ids ``keys``, across every cluster's DAG
    (``core.clusters.run_key``: a named cluster's runs are recorded as ``<Airflow run id>@<name>``)."""
    from airflow.models.dagrun import DagRun
    from sqlalchemy import select

    from pulsar_rebalance.core import clusters

    keys = set(keys)
    wanted = {clusters.airflow_run(key) for key in keys}
    rows = session.scalars(select(DagRun).where(DagRun.run_id.in_({run_id for _, run_id in wanted}), *where))
    found: dict[str, Any] = {}
    for run in rows:
        name = clusters.name_of_dag(run.dag_id)
        if name is None or (run.dag_id, run.run_id) not in wanted:
            continue
        key = clusters.run_key(run.run_id, name)
        if key in keys:
            found[key] = run
    return found


async def _sweep(url: str | None) -> None:
    """Close stale gates before the UI or the API lists Required Actions (throttled; never fails the request)."""
    import time

    now = time.monotonic()
    if url is None or now - _last_sweep[0] < SWEEP_SECONDS:
        return
    _last_sweep[0] = now
    try:
        await asyncio.to_thread(close_stale_gates, url)
        await asyncio.to_thread(follow_airflow_runs, url)
        await asyncio.to_thread(note_empty_runs, url)
    except Exception:
        log.exception("pulsar-rebalance could not close stale gates, follow Airflow's run states or note empty runs")


def _lists_gates_or_plans(path: str) -> bool:
    """The reads before which stale gates are closed and run states followed: Required Actions (Airflow's
    UI and API) and the plan pages."""
    from pulsar_rebalance.orchestration.ui.app import URL_PREFIX

    return "hitlDetails" in path or path.startswith(URL_PREFIX)


class GateGuardMiddleware:
    """Pure ASGI middleware (see the module docstring)."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send):
        if (
            scope.get("type") == "http"
            and scope.get("method") == "GET"
            and _lists_gates_or_plans(scope.get("path", ""))
        ):
            await _sweep(_db_url())
        if scope.get("type") != "http" or scope.get("method") != "PATCH":
            return await self.app(scope, receive, send)
        match = HITL_PATH.match(scope.get("path", ""))
        if not match:
            return await self.app(scope, receive, send)
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)

        async def replay():
            return {"type": "http.request", "body": body, "more_body": False}

        try:
            return await self._guard(scope, replay, send, match.groupdict(), body)
        except Exception:
            log.exception("pulsar-rebalance gate guard failed; passing the request through")
            return await self.app(scope, replay, send)

    async def _guard(self, scope, replay, send, ids: dict[str, str], body: bytes):
        from urllib.parse import unquote

        url = _db_url()
        dag_id, run_id, task_id = (unquote(ids[k]) for k in ("dag_id", "run_id", "task_id"))
        user = await _authorized(scope, dag_id) if url else None
        if user is None or not url:
            return await self.app(scope, replay, send)
        voter = _user_name(user)
        try:
            payload = json.loads(body or b"{}")
            chosen = payload.get("chosen_options") or []
            params = payload.get("params_input") or {}
        except (ValueError, AttributeError):
            return await self.app(scope, replay, send)
        decision = DECISIONS.get(chosen[0]) if len(chosen) == 1 and isinstance(chosen[0], str) else None
        plan_hash = params.get("plan_hash") if isinstance(params, dict) else None
        plan_id, refusal = await asyncio.to_thread(
            precheck,
            url,
            dag_id,
            run_id,
            task_id,
            plan_hash if isinstance(plan_hash, str) else None,
            voter=voter,
            decision=decision,
        )
        if plan_id is None or decision is None:
            return await self.app(scope, replay, send)
        if refusal:
            log.warning("refused an answer to the gate of %s: %s", plan_id, refusal)
            gate = {"dag_id": dag_id, "run_id": run_id, "task_id": task_id, "map_index": ids["map_index"]}
            await asyncio.to_thread(_note_refusal_safely, gate, voter, refusal)
            return await _send_json(send, 409, {"detail": refusal})

        status_holder: dict[str, Any] = {}
        chunks: list[dict[str, Any]] = []

        async def capture(message):
            if message["type"] == "http.response.start":
                status_holder["status"] = message["status"]
            chunks.append(message)

        await self.app(scope, replay, capture)
        status = status_holder.get("status", 500)
        if 200 <= status < 300:
            response = b"".join(m.get("body", b"") for m in chunks if m["type"] == "http.response.body")
            try:
                who = json.loads(response).get("responded_by") or {}
            except ValueError:
                who = {}
            comment = params.get("comment") if isinstance(params, dict) else None
            problem = await asyncio.to_thread(
                record,
                url,
                plan_id,
                decision=decision,
                decided_by=who.get("name") or who.get("id") or "unknown",
                comment=comment or None,
                plan_hash=plan_hash if isinstance(plan_hash, str) and plan_hash else None,
            )
            if problem:
                return await _send_json(send, 409, {"detail": problem})
            gate = {"dag_id": dag_id, "run_id": run_id, "task_id": task_id, "map_index": ids["map_index"]}
            await asyncio.to_thread(_refresh_body_safely, url, plan_id, gate)
        elif status == 409 and (between := await asyncio.to_thread(waiting_for_next_approver, url, plan_id)):
            return await _send_json(send, 409, {"detail": between})
        for message in chunks:
            await send(message)


def refresh_gate_body(url: str, plan_id: str, gate: dict[str, str]) -> None:
    """After a vote that leaves the plan pending, the gate's text lists who approved so far (Airflow keeps
    a request's text when the same request opens again for the next approver)."""
    from airflow.utils.session import create_session

    from pulsar_rebalance.orchestration.approval import gate_body
    from pulsar_rebalance.store import repository as repo
    from pulsar_rebalance.store.engine import make_engine, session_scope

    with session_scope(make_engine(url)) as s:
        plan = repo.get_plan(s, plan_id=plan_id)
    if plan.status != "pending":
        return
    with create_session() as session:
        _ti, detail = _airflow_gate(session, gate)
        if detail is not None:
            detail.body = gate_body(plan, cluster=(plan.summary or {}).get("cluster"))
            session.add(detail)


def _refresh_body_safely(url: str, plan_id: str, gate: dict[str, str]) -> None:
    try:
        refresh_gate_body(url, plan_id, gate)
    except Exception:  # the vote stands; only the gate's text is not updated
        log.exception("could not update the gate's text after a vote")


def _note_refusal_safely(gate: dict[str, str], voter: str | None, refusal: str) -> None:
    try:
        note_refusal(gate, voter, refusal)
    except Exception:  # the refusal itself stands; only its note in the gate's text is lost
        log.exception("could not write the refusal into the gate's text")


def _user_name(user) -> str | None:
    """The name Airflow records as ``responded_by.name`` for this user (falls back to the id)."""
    for getter in ("get_name", "get_id"):
        try:
            value = getattr(user, getter)()
        except Exception:
            continue
        if value:
            return str(value)
    return None


async def _send_json(send, status: int, doc: dict[str, Any]) -> None:
    body = json.dumps(doc).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
