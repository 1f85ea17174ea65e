"""The plugin's FastAPI app: the plans list, one page per plan, and the plan's usage chart.

Mounted by Airflow's api-server at :data:`URL_PREFIX` (``plugins/pulsar_rebalance_plugin.py``).
Airflow does not authenticate plugin apps (a Starlette mount inherits none of the parent's
dependencies), so every route of this app depends on :func:`_auth_dependency`: Airflow's own
``requires_access_dag(method="GET")`` for the ``pulsar_rebalance`` DAG, which authenticates the
caller (``Authorization: Bearer <jwt>`` or the UI's ``_token`` cookie; 401 without) and asks the
configured auth manager whether they may read that DAG (403 if not). FastAPI's own ``/docs``,
``/redoc`` and ``/openapi.json`` are switched off. The pages are read-only except for three buttons,
each for a user Airflow lets create runs of the DAG (``POST`` on the DAG's runs, 403 otherwise) and
from this origin only (:func:`_operator_dependencies`): *Plan to fix* (``POST /plans/{plan_id}/fix``)
triggers a run of the DAG with ``{"fix_policy_violations": true}``, whose plan waits at the gate like
any other (deciding happens at the Airflow gate, Browse → Required Actions, which the plan page links
to); *Uncordon* and *Cordon* on the Brokers page (``POST /brokers/uncordon``, ``/brokers/cordon``)
change a broker's cordon as ``pulsar-rebalance brokers uncordon|cordon`` does, audited under the
user's name.

The state DB comes from the ``pulsar_rebalance_db`` Airflow Connection (or
``PULSAR_REBALANCE_DATABASE_URL`` / ``DATABASE_URL``), as for the tasks.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from fastapi import Depends, FastAPI, Form, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from pulsar_rebalance.errors import ConfigError

log = logging.getLogger(__name__)

URL_PREFIX = "/pulsar-rebalance"
DAG_ID = "pulsar_rebalance"
GATE_TASK_ID = "await_approval"

REFRESH_SECONDS = 15  # the plan page of an executing plan reloads itself this often (its Progress section)

STATUS_TONE = {
    "pending": "warn",
    "approved": "info",
    "executing": "info",
    "executed": "ok",
    "partially_executed": "warn",
    "failed": "bad",
    "rejected": "bad",
    "expired": "muted",
    "empty": "muted",
    "superseded": "muted",
    "interrupted": "warn",
    "aborted": "bad",
    "in_progress": "info",
    "completed": "ok",
    "skipped": "muted",
}


def _auth_dependency() -> Callable[..., None]:
    """Airflow's authentication + ``GET`` access to the DAG (imported lazily: Airflow loads plugins everywhere)."""
    from airflow.api_fastapi.core_api.security import requires_access_dag

    return requires_access_dag(method="GET", param_dag_id=DAG_ID)


def create_app() -> FastAPI:
    """The app, every route behind Airflow's auth (see the module docstring)."""
    app = FastAPI(
        title="pulsar-rebalance plans",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        dependencies=[Depends(_auth_dependency())],
    )

    @app.exception_handler(StarletteHTTPException)
    async def _to_login(request: Request, exc: StarletteHTTPException) -> Response:
        """A logged-out browser (it asks for HTML) goes to Airflow's login page and comes back here after;
        API callers keep the plain 401."""
        if exc.status_code == 401 and "text/html" in request.headers.get("accept", ""):
            from airflow.api_fastapi.app import get_auth_manager

            return RedirectResponse(get_auth_manager().get_url_login(next_url=str(request.url)), status_code=303)
        return await http_exception_handler(request, exc)

    @app.get("/", response_class=HTMLResponse)
    def plans_list(request: Request, status: str | None = None, cluster: str | None = None) -> HTMLResponse:
        from pulsar_rebalance.store import queries
        from pulsar_rebalance.store import repository as repo

        with _session() as s:
            rows = queries.list_plan_rows(s, limit=100, status=status or None, cluster=cluster or None)
            names = repo.cluster_names(s)
        return _page(
            request,
            "plans.html",
            title="Rebalance plans",
            rows=rows,
            status_filter=status or "",
            cluster_filter=cluster or "",
            clusters=names,
        )

    @app.get("/plans/{plan_id}", response_class=HTMLResponse)
    def plan_page(request: Request, plan_id: str) -> HTMLResponse:
        from pulsar_rebalance.core.plan_summary import summarize_plan
        from pulsar_rebalance.core.progress import PROGRESS_STATUSES, eta_text, progress_lines
        from pulsar_rebalance.errors import UnknownPlanError
        from pulsar_rebalance.store import queries

        try:
            with _session() as s:
                detail = queries.plan_detail(s, plan_id=plan_id)
                window = maintenance_window(s, cluster_id=detail.plan.cluster_id)
        except UnknownPlanError:
            return _page(request, "missing.html", title="No such plan", plan_id=plan_id, status_code=404)
        plan = detail.plan
        summary = summarize_plan(summary=plan.summary, actions=detail.action_dicts(), result=plan.result)
        progress = detail.progress() if plan.actions and plan.status in PROGRESS_STATUSES else None
        gate = dict(plan.gate or {})
        dag_id, run_id = airflow_run(plan)
        root = _airflow_root(request)
        links = {
            "gate": f"{root}/dags/{quote(dag_id, safe='')}/runs/{quote(run_id, safe='')}/tasks/"
            f"{quote(gate.get('task_id') or GATE_TASK_ID, safe='')}/required_actions",
            "run": f"{root}/dags/{quote(dag_id, safe='')}/runs/{quote(run_id, safe='')}",
            "dag": f"{root}/dags/{quote(dag_id, safe='')}",
            "chart": f"{_own_root(request)}/plans/{quote(plan.plan_id, safe='')}/chart.png",
            "fix": f"{_own_root(request)}/plans/{quote(plan.plan_id, safe='')}/fix",
        }
        return _page(
            request,
            "plan.html",
            title=f"Plan {plan.plan_id}",
            d=detail,
            p=plan,
            s=summary,
            progress=progress,
            progress_lines=progress_lines(progress) if progress else (),
            progress_eta=eta_text(progress) if progress else "",
            refresh_seconds=REFRESH_SECONDS,
            window=window,
            links=links,
            raw_summary=plan.summary or {},
            dag_id=dag_id,
            run_id=run_id,
            lines={**{u.seq: u for u in summary.unloads}, **{x.seq: x for x in summary.splits}},
        )

    @app.get("/plans/{plan_id}/chart.png")
    def plan_chart(plan_id: str) -> Response:
        from pulsar_rebalance.cli.plot import plan_png
        from pulsar_rebalance.errors import UnknownPlanError
        from pulsar_rebalance.store import repository as repo

        try:
            with _session() as s:
                plan = repo.get_plan(s, plan_id=plan_id)
        except UnknownPlanError:
            return Response(f"no plan with id {plan_id!r}", status_code=404, media_type="text/plain")
        return Response(plan_png(plan), media_type="image/png", headers={"Cache-Control": "private, no-cache"})

    from airflow.api_fastapi.core_api.security import get_user

    the_user = Depends(get_user)
    operator_only = _operator_dependencies()

    @app.post("/plans/{plan_id}/fix", dependencies=operator_only)
    def plan_fix(request: Request, plan_id: str, user: Any = the_user) -> Response:
        """Trigger a ``fix_policy_violations`` run of the plan's DAG, then show that run in Airflow."""
        from pulsar_rebalance.errors import UnknownPlanError
        from pulsar_rebalance.store import repository as repo

        try:
            with _session() as s:
                plan = repo.get_plan(s, plan_id=plan_id)
        except UnknownPlanError:
            return _page(request, "missing.html", title="No such plan", plan_id=plan_id, status_code=404)
        dag_id, _ = airflow_run(plan)
        if not _may_trigger(dag_id, user):  # the route's dependency checked the default DAG only
            return Response(f"you may not trigger runs of {dag_id}", status_code=403, media_type="text/plain")
        run_id = trigger_fix_run(dag_id, user=user.get_name(), plan_id=plan_id)
        log.info(
            "user %s triggered %s run %s to fix the violations shown on plan %s",
            user.get_name(),
            dag_id,
            run_id,
            plan_id,
        )
        url = f"{_airflow_root(request)}/dags/{quote(dag_id, safe='')}/runs/{quote(run_id, safe='')}"
        return RedirectResponse(url, status_code=303)

    @app.get("/brokers", response_class=HTMLResponse)
    def brokers_page(request: Request) -> HTMLResponse:
        from pulsar_rebalance.store import queries

        with _session() as s:
            rows = queries.broker_rows(s)
        return _page(request, "brokers.html", title="Brokers", rows=rows)

    @app.post("/brokers/uncordon", dependencies=operator_only)
    def brokers_uncordon(
        request: Request, cluster: str = Form(), broker: str = Form(), user: Any = the_user
    ) -> Response:
        """Let plans target ``broker`` again (``pulsar-rebalance brokers uncordon``, audited as that)."""
        from pulsar_rebalance.store import repository as repo

        with _session() as s:
            gone = repo.uncordon(s, cluster_id=repo.cluster_id_named(s, cluster), brokers=[broker], by=user.get_name())
        log.info(
            "user %s uncordoned %s of cluster %s%s",
            user.get_name(),
            broker,
            cluster,
            "" if gone else " (was not cordoned)",
        )
        return RedirectResponse(f"{_own_root(request)}/brokers", status_code=303)

    @app.post("/brokers/cordon", dependencies=operator_only)
    def brokers_cordon(
        request: Request, cluster: str = Form(), broker: str = Form(), reason: str = Form(""), user: Any = the_user
    ) -> Response:
        """Keep every plan of every mode off ``broker`` (``pulsar-rebalance brokers cordon``, audited as that)."""
        from pulsar_rebalance.errors import ConfigError
        from pulsar_rebalance.store import queries
        from pulsar_rebalance.store import repository as repo

        why = reason.strip() or "cordoned on the Brokers page"
        with _session() as s:
            cid = repo.cluster_id_named(s, cluster)
            if not any(r.cluster == cluster and r.broker == broker for r in queries.broker_rows(s)):
                raise ConfigError(f"unknown broker {broker!r} in cluster {cluster!r}", key="broker")
            repo.cordon(s, cluster_id=cid, brokers=[broker], by=user.get_name(), reason=why)
        log.info("user %s cordoned %s of cluster %s: %s", user.get_name(), broker, cluster, why)
        return RedirectResponse(f"{_own_root(request)}/brokers", status_code=303)

    @app.exception_handler(ConfigError)
    def _bad_input(request: Request, exc: ConfigError) -> HTMLResponse:
        return _page(request, "error.html", title="Cannot do that", status_code=400, message=str(exc))

    @app.exception_handler(NoStateDatabase)
    def _no_db(request: Request, exc: NoStateDatabase) -> HTMLResponse:
        return _page(
            request,
            "error.html",
            title="No state database",
            status_code=503,
            message="The plan pages cannot find the state database: define the Airflow Connection "
            "pulsar_rebalance_db (or set PULSAR_REBALANCE_DATABASE_URL) for the api-server.",
        )

    @app.middleware("http")
    async def _headers(request: Request, call_next):  # framed by the Airflow UI only (nav entry iframe)
        response = await call_next(request)
        response.headers.setdefault("Content-Security-Policy", "frame-ancestors 'self'")
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        return response

    return app


def maintenance_window(s, *, cluster_id: int) -> dict[str, Any] | None:
    """The cluster's maintenance windows as the plan page shows them (None: no windows set)."""
    from pulsar_rebalance.core.windows import describe, window_state
    from pulsar_rebalance.store import windows as store_windows

    setting = store_windows.window_setting(s, cluster_id=cluster_id)
    if setting is None:
        return None
    state = window_state(setting, datetime.now(UTC))
    return {"text": describe(setting), "open": state.open, "opens_at": state.opens_at, "closes_at": state.closes_at}


def airflow_run(plan: Any) -> tuple[str, str]:
    """``(dag id, Airflow run id)`` of the run that made ``plan``: its gate's, else from its run id
    (``core.clusters.run_key``: each cluster's DAG records its runs as ``<run id>@<name>``)."""
    from pulsar_rebalance.core import clusters

    gate = plan.gate or {}
    if gate.get("dag_id") and gate.get("run_id"):
        return str(gate["dag_id"]), str(gate["run_id"])
    return clusters.airflow_run(plan.run_id)


def _may_trigger(dag_id: str, user: Any) -> bool:
    """Whether Airflow's auth manager lets ``user`` create runs of ``dag_id``."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails

    if dag_id == DAG_ID:
        return True
    return bool(
        get_auth_manager().is_authorized_dag(
            method="POST", access_entity=DagAccessEntity.RUN, details=DagDetails(id=dag_id), user=user
        )
    )


def _operator_dependencies() -> list[Any]:
    """What every button of these pages (a POST) needs beyond reading: Airflow's permission to create
    runs of the DAG (``POST`` on its runs: 403 for a viewer), and a request from this origin."""
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
    from airflow.api_fastapi.core_api.security import requires_access_dag

    return [Depends(requires_access_dag("POST", DagAccessEntity.RUN, DAG_ID)), Depends(_require_same_origin)]


def _require_same_origin(request: Request) -> None:
    if not _same_origin(request):
        raise StarletteHTTPException(403, "cross-origin request refused")


def trigger_fix_run(dag_id: str, *, user: str, plan_id: str) -> str:
    """Create a manual run of ``dag_id`` with ``{"fix_policy_violations": true}`` (unpausing the DAG, as
    Airflow's trigger form does by default, so the run starts) and return its run id."""
    from airflow.api.common.trigger_dag import trigger_dag
    from airflow.models.dag import DagModel
    from airflow.utils.session import create_session
    from airflow.utils.types import DagRunTriggeredByType

    with create_session() as session:
        model = session.get(DagModel, dag_id)
        if model is not None and model.is_paused:
            model.is_paused = False
    run = trigger_dag(
        dag_id,
        triggered_by=DagRunTriggeredByType.UI,
        triggering_user_name=user,
        conf={"fix_policy_violations": True},
        note=f"Plan to fix the placement-policy violations shown on plan {plan_id}",
    )
    if run is None:  # trigger_dag returns None only when it created nothing
        raise RuntimeError(f"Airflow created no run of {dag_id}")
    return str(run.run_id)


def _same_origin(request: Request) -> bool:
    """A browser's form POST carries ``Origin``; refuse one from another site (the UI's cookie is
    ``SameSite=Lax`` already: this is the second lock). No ``Origin`` (an API client) passes."""
    from urllib.parse import urlsplit

    origin = request.headers.get("origin")
    if origin is None:
        return True
    return urlsplit(origin).netloc == request.headers.get("host", "")


class NoStateDatabase(Exception):
    """Neither the ``pulsar_rebalance_db`` Connection nor ``PULSAR_REBALANCE_DATABASE_URL`` is set."""


def _session():
    from pulsar_rebalance.orchestration.connections import server_database_url
    from pulsar_rebalance.store.engine import make_engine, session_scope

    url = server_database_url()
    if not url:
        raise NoStateDatabase
    return session_scope(make_engine(url))


def _own_root(request: Request) -> str:
    """This app's URL path as mounted (``/pulsar-rebalance``, behind any ``[api] base_url`` path)."""
    return str(request.scope.get("root_path") or URL_PREFIX).rstrip("/")


def _airflow_root(request: Request) -> str:
    """The Airflow UI's URL path (what is left of our mount path without our prefix)."""
    own = _own_root(request)
    return own[: -len(URL_PREFIX)] if own.endswith(URL_PREFIX) else ""


_env = None


def _templates():
    global _env
    if _env is None:
        from jinja2 import Environment, PackageLoader, select_autoescape

        env = Environment(
            loader=PackageLoader("pulsar_rebalance.orchestration.ui", "templates"),
            autoescape=select_autoescape(["html"]),
            trim_blocks=True,
            lstrip_blocks=True,
        )
        env.filters.update(
            q=lambda v: quote(str(v), safe=""),
            pct=pct,
            change=change,
            rate=rate,
            bps=bps,
            when=when,
            num=num,
            tone=lambda s: STATUS_TONE.get(s, "muted"),
            airflow_run=_airflow_run_of_key,
            pretty=lambda v: json.dumps(v, indent=2, sort_keys=True, default=str),
        )
        from pulsar_rebalance.core import lifecycle

        env.globals["lifecycle"] = lifecycle  # statuses and their groups (core/lifecycle.py), not template lists
        _env = env
    return _env


def _airflow_run_of_key(run_key: str) -> tuple[str, str]:
    from pulsar_rebalance.core import clusters

    return clusters.airflow_run(run_key)


def _page(request: Request, template: str, *, status_code: int = 200, **ctx: Any) -> HTMLResponse:
    html = (
        _templates()
        .get_template(template)
        .render(root=_own_root(request), airflow_root=_airflow_root(request), now=datetime.now(UTC), **ctx)
    )
    return HTMLResponse(html, status_code=status_code)


# ----------------------------------------------------------------------------------- formatting


def pct(x: float | None, digits: int = 1) -> str:
    """A usage fraction as a percentage (``0.6807`` -> ``68.1%``); None -> an em dash."""
    return "—" if x is None else f"{100 * x:.{digits}f}%"


def change(pair: tuple[float | None, float | None]) -> str:
    """A usage change ``(before, after)`` as ``62.0% → 55.1% (−6.9 pts)``."""
    before, after = pair
    if before is None or after is None:
        return "—"
    delta = 100 * (after - before)
    return f"{pct(before)} → {pct(after)} ({'+' if delta >= 0 else '−'}{abs(delta):.1f} pts)"


def rate(x: float | None) -> str:
    """Messages per second."""
    return "—" if x is None else f"{x:,.1f} msg/s"


def bps(x: float | None) -> str:
    """Bytes per second in binary units, as Pulsar's dashboards show throughput."""
    if x is None:
        return "—"
    for unit, size in (("GiB/s", 2**30), ("MiB/s", 2**20), ("KiB/s", 2**10)):
        if abs(x) >= size:
            return f"{x / size:,.2f} {unit}"
    return f"{x:,.0f} B/s"


def num(x: int | float | None) -> str:
    return "—" if x is None else f"{x:,}"


def when(x: datetime | str | None) -> str:
    if x is None:
        return "—"
    if isinstance(x, str):
        return x
    return x.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
