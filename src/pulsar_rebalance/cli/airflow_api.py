"""Answer a plan's Airflow approval gate through Airflow's REST API (what the CLI does for a gated plan).

Configuration comes from the environment, never argv:

    PULSAR_REBALANCE_AIRFLOW_URL        the api-server, e.g. http://127.0.0.1:8080
    PULSAR_REBALANCE_AIRFLOW_TOKEN      a JWT (from POST /auth/token), or
    PULSAR_REBALANCE_AIRFLOW_USER / PULSAR_REBALANCE_AIRFLOW_PASSWORD   to get one

The answer is the same ``PATCH .../hitlDetails`` the Airflow UI sends, so Airflow authenticates and
authorises it, the gate guard checks it against the stored plan, and exactly one answer wins.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import quote

from pulsar_rebalance.errors import PlanError

URL_ENV, TOKEN_ENV, USER_ENV, PASSWORD_ENV = (
    "PULSAR_REBALANCE_AIRFLOW_URL",
    "PULSAR_REBALANCE_AIRFLOW_TOKEN",
    "PULSAR_REBALANCE_AIRFLOW_USER",
    "PULSAR_REBALANCE_AIRFLOW_PASSWORD",
)
OPTIONS = {"approved": "Approve", "rejected": "Reject"}


class AirflowGateError(PlanError):
    """Airflow did not take the answer (not configured, not allowed, already answered, refused)."""


def hitl_path(gate: dict[str, Any]) -> str:
    return (
        f"/api/v2/dags/{quote(gate['dag_id'], safe='')}/dagRuns/{quote(gate['run_id'], safe='')}"
        f"/taskInstances/{quote(gate['task_id'], safe='')}/{int(gate.get('map_index', -1))}/hitlDetails"
    )


def _client(environ):
    """An httpx client on the api-server with a bearer token (tests may pass their own client)."""
    import httpx

    base = (environ.get(URL_ENV) or "").rstrip("/")
    if not base:
        raise AirflowGateError(
            f"set {URL_ENV} (and {TOKEN_ENV}, or {USER_ENV}/{PASSWORD_ENV}) so the CLI can answer the gate through "
            "Airflow's REST API, or decide in the Airflow UI (Browse -> Required Actions)"
        )
    client = httpx.Client(base_url=base, timeout=30)
    token = environ.get(TOKEN_ENV)
    if not token:
        user, password = environ.get(USER_ENV), environ.get(PASSWORD_ENV)
        if not (user and password):
            raise AirflowGateError(f"set {TOKEN_ENV}, or {USER_ENV} and {PASSWORD_ENV}, to answer through Airflow")
        r = client.post("/auth/token", json={"username": user, "password": password})
        if r.status_code >= 400:
            raise AirflowGateError(f"Airflow refused the login of {user!r} at {base}/auth/token (HTTP {r.status_code})")
        token = r.json().get("access_token")
    client.headers["Authorization"] = f"Bearer {token}"
    return client


def answer_gate(
    gate: dict[str, Any],
    *,
    plan_id: str,
    decision: str,
    comment: str | None,
    plan_hash: str | None,
    client=None,
    environ=os.environ,
) -> dict[str, Any]:
    """PATCH the gate's HITL detail; returns Airflow's answer. Raises AirflowGateError with Airflow's reason."""
    import httpx

    own = client is None
    client = client or _client(environ)
    try:
        r = client.patch(
            hitl_path(gate),
            json={
                "chosen_options": [OPTIONS[decision]],
                "params_input": {"comment": comment or "", "plan_hash": plan_hash or ""},
            },
        )
    except httpx.HTTPError as exc:
        raise AirflowGateError(
            f"could not reach Airflow to answer the gate of plan {plan_id}: {exc}", plan_id=plan_id
        ) from exc
    finally:
        if own:
            client.close()
    if r.status_code < 300:
        return r.json()
    try:
        detail = r.json().get("detail")
    except ValueError:
        detail = r.text[:200]
    reason = {
        401: "not authenticated",
        403: "not allowed to decide this plan",
        404: "the gate is gone",
        409: "refused",
    }.get(r.status_code, f"HTTP {r.status_code}")
    raise AirflowGateError(f"Airflow did not take the answer to plan {plan_id} ({reason}): {detail}", plan_id=plan_id)


def answer_in_process(
    gate: dict[str, Any], *, plan_id: str, decision: str, comment: str | None, plan_hash: str | None, user: str
) -> dict[str, Any]:
    """Answer the gate through Airflow's own Core API app, in this process, as ``user``.

    For the quick start, which runs ``airflow dags test`` without an api-server: the request still goes
    through Airflow's real route, its auth manager and our gate guard. The process's environment must
    be the Airflow one (AIRFLOW_HOME, the metadata DB).
    """
    from airflow.api_fastapi.app import create_app, get_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
    from fastapi.testclient import TestClient

    with TestClient(create_app(apps="core")) as client:
        token = get_auth_manager().generate_jwt(SimpleAuthManagerUser(username=user, role="admin"))
        client.headers["Authorization"] = f"Bearer {token}"
        return answer_gate(
            gate, plan_id=plan_id, decision=decision, comment=comment, plan_hash=plan_hash, client=client
        )


if __name__ == "__main__":  # python -m pulsar_rebalance.cli.airflow_api PLAN_ID DECISION USER [COMMENT]
    import json
    import sys

    from pulsar_rebalance.store import repository as _repo
    from pulsar_rebalance.store.engine import database_url, make_engine, session_scope

    _plan_id, _decision, _user, *_rest = sys.argv[1:]
    with session_scope(make_engine(database_url())) as _s:
        _plan = _repo.get_plan(_s, plan_id=_plan_id)
    if _plan.gate is None:
        sys.exit(f"plan {_plan_id} is not waiting at an Airflow approval gate")
    print(
        json.dumps(
            answer_in_process(
                _plan.gate,
                plan_id=_plan_id,
                decision=_decision,
                user=_user,
                comment=_rest[0] if _rest else None,
                plan_hash=_plan.content_hash,
            ),
            default=str,
        )
    )
