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


class GateGuardMiddleware:
    """Pure ASGI middleware (see the module docstring)."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send):
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
        elif status == 409 and (between := await asyncio.to_thread(waiting_for_next_approver, url, plan_id)):
            return await _send_json(send, 409, {"detail": between})
        for message in chunks:
            await send(message)


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
