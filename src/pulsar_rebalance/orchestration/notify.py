"""Notifications through Airflow's notifier mechanism: email (SMTP) and a webhook (JSON, Slack-compatible).

:func:`attach_notifications` wires one :class:`PlanNotifier` per event into a DAG built of our tasks:

    event        Airflow hook                                       sent when
    waiting      the gate's ``notifiers`` (HITLOperator)            the Required Action is opened
    executed     execute_unload's ``on_success_callback``           execution finished
    expired      the gate's ``on_skipped_callback``                 the plan expired undecided
    interrupted  execute_unload's ``on_failure_callback``           it failed while its plan was executing
    failed       every task's ``on_failure_callback``               a task failed after its retries

Channels are Airflow Connections; an absent Connection turns its channel off (no error):

* ``pulsar_rebalance_smtp`` (``smtp``): sent with the SMTP provider's ``SmtpHook`` (host, port, login,
  password; extra ``from_email``, ``disable_ssl``, ``disable_tls``, ``timeout``, ``retry_limit`` as the
  provider reads them) to the extra's ``to`` (an address, a comma-separated list or a JSON list).
* ``pulsar_rebalance_webhook`` (any type, e.g. ``http``): host = the full URL (a Slack incoming-webhook
  URL works), or host/port/schema with extra ``endpoint``; password, if set, is sent as
  ``Authorization: Bearer ...``; extra ``timeout`` (seconds, default 10).

What a message says is composed in :mod:`pulsar_rebalance.core.notifications`; here it is read from the
store, redacted of every credential this process knows (the admin token or OAuth2 secret, the state DB
URL, the SMTP password, the webhook URL and token), and sent. Sending never fails a task: a channel
that cannot deliver logs one warning naming it, and the other channel still sends.
"""

from __future__ import annotations

import html
import json
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from airflow.sdk import BaseNotifier

from pulsar_rebalance.core import clusters
from pulsar_rebalance.core import notifications as compose
from pulsar_rebalance.orchestration.approval import PLAN_PAGE

if TYPE_CHECKING:
    from airflow.sdk import DAG

SMTP_CONN_ID = "pulsar_rebalance_smtp"
WEBHOOK_CONN_ID = "pulsar_rebalance_webhook"
EXECUTE_JOB = "execute_unload"
WEBHOOK_TIMEOUT_SECONDS = 10.0
DEFAULT_BASE_URL = "http://localhost:8080"

Hook = Literal["waiting", "executed", "gate_skipped", "task_failed"]

logger = logging.getLogger(__name__)


def _connection(conn_id: str):
    from pulsar_rebalance.orchestration.connections import _get

    return _get(conn_id)


# ----------------------------------------------------------------------------------------- channels
def webhook_url(conn) -> str:
    """The webhook's URL from its Connection (host as a full URL, or schema/host/port + extra endpoint)."""
    host = (conn.host or "").strip()
    if not host:
        raise ValueError(f"Connection {WEBHOOK_CONN_ID!r} has no host (the webhook URL)")
    if "://" not in host:
        host = f"{conn.schema or 'https'}://{host}" + (f":{conn.port}" if conn.port else "")
    endpoint = str((conn.extra_dejson or {}).get("endpoint") or "")
    return host.rstrip("/") + ("/" + endpoint.lstrip("/") if endpoint else "")


def channel_secrets(smtp, webhook) -> list[str]:
    """Every credential of the two channels: SMTP password, webhook URL, its path and query, its token."""
    secrets: list[str] = []
    if smtp is not None and smtp.password:
        secrets.append(smtp.password)
    if webhook is not None:
        if webhook.password:
            secrets.append(webhook.password)
        try:
            url = webhook_url(webhook)
        except ValueError:
            url = None
        if url:
            parts = urlsplit(url)
            secrets += [url, parts.path if len(parts.path) > 1 else "", parts.query]
            # a token as a path segment (Slack's /services/T…/B…/<token>), not a plain word like "services"
            secrets += [p for p in parts.path.split("/") if len(p) >= 8 and any(c.isdigit() for c in p)]
            if parts.password:
                secrets.append(parts.password)
    return [s for s in secrets if s]


def pipeline_secrets(admin_conn_id: str | None = None) -> list[str]:
    """The admin token / OAuth2 client secret (of ``admin_conn_id``, the DAG's cluster; default
    ``pulsar_admin_default``) and the state DB URL (and its password), if configured."""
    from pulsar_rebalance.orchestration.connections import ADMIN_CONN_ID, DB_CONN_ID, job_environment

    admin_conn_id = admin_conn_id or ADMIN_CONN_ID
    try:
        env = job_environment(admin_conn_id)
    except Exception:  # a Connection the jobs would refuse: its passwords are still secrets
        conns = [_connection(admin_conn_id), _connection(DB_CONN_ID)]
        return [c.password for c in conns if c is not None and c.password]
    secrets = [
        env.get("PULSAR_ADMIN_TOKEN", ""),
        env.get("PULSAR_ADMIN_OAUTH2_CLIENT_SECRET", ""),
        env.get("PULSAR_REBALANCE_DATABASE_URL", ""),
    ]
    for value in env.values():
        if "://" in value:
            try:
                secrets.append(urlsplit(value).password or "")
            except ValueError:
                pass
    return [s for s in secrets if s]


def _recipients(conn) -> list[str]:
    to = (conn.extra_dejson or {}).get("to")
    if isinstance(to, str) and to.strip().startswith("["):
        to = json.loads(to)
    if isinstance(to, str):
        to = [a.strip() for a in to.split(",")]
    addresses = [str(a).strip() for a in to or [] if str(a).strip()]
    if not addresses:
        raise ValueError(f"Connection {SMTP_CONN_ID!r} has no recipients: set its extra 'to'")
    return addresses


def send_email(conn, message: compose.Message) -> None:
    """One email through the SMTP provider's hook (login with the Connection's password)."""
    from airflow.providers.smtp.hooks.smtp import SmtpHook

    body = f"<pre>{html.escape(message.text, quote=False)}</pre>"
    if message.link:
        body += f'<p><a href="{html.escape(message.link, quote=True)}">Open the plan page</a></p>'
    with SmtpHook(smtp_conn_id=SMTP_CONN_ID) as hook:
        hook.send_email_smtp(
            to=_recipients(conn),
            subject=f"[pulsar-rebalance] {message.subject}",
            html_content=body,
            custom_headers={"X-Pulsar-Rebalance-Event": message.event},
        )


def send_webhook(conn, message: compose.Message) -> None:
    """One JSON POST (``text`` for Slack, plus the event's fields); a non-2xx answer is an error."""
    import httpx

    headers = {"Content-Type": "application/json"}
    if conn.password:
        headers["Authorization"] = f"Bearer {conn.password}"
    timeout = float((conn.extra_dejson or {}).get("timeout") or WEBHOOK_TIMEOUT_SECONDS)
    response = httpx.post(webhook_url(conn), json=message.payload(), headers=headers, timeout=timeout)
    if not response.is_success:
        raise RuntimeError(f"the receiver answered HTTP {response.status_code}")


CHANNELS: tuple[tuple[str, str, Callable[[Any, compose.Message], None]], ...] = (
    ("email", SMTP_CONN_ID, send_email),
    ("webhook", WEBHOOK_CONN_ID, send_webhook),
)


def send(
    message: compose.Message, *, log: logging.Logger | Any = logger, admin_conn_id: str | None = None
) -> dict[str, str]:
    """Send ``message`` on every configured channel; never raises. Returns {channel: sent|off|failed}.
    ``admin_conn_id``: the admin Connection of the message's cluster (its secrets are redacted too)."""
    from airflow.sdk.log import mask_secret

    conns = {channel: _connection(conn_id) for channel, conn_id, _ in CHANNELS}
    secrets = channel_secrets(conns["email"], conns["webhook"]) + pipeline_secrets(admin_conn_id)
    for secret in secrets:
        mask_secret(secret)
    safe = compose.redact(message, secrets)
    outcome: dict[str, str] = {}
    for channel, conn_id, deliver in CHANNELS:
        conn = conns[channel]
        if conn is None:
            outcome[channel] = "off"
            continue
        try:
            deliver(conn, safe)
        except Exception as exc:
            outcome[channel] = "failed"
            log.warning(
                "Notification %r (%s) NOT sent by %s (Connection %r): %s: %s",
                safe.event,
                safe.subject,
                channel,
                conn_id,
                type(exc).__name__,
                compose.redact_text(str(exc), secrets),
            )
        else:
            outcome[channel] = "sent"
            log.info("Notification %r sent by %s: %s", safe.event, channel, safe.subject)
    return outcome


# ------------------------------------------------------------------------------------------ context
def plan_link(plan_id: str) -> str:
    """The plan page's URL under Airflow's ``[api] base_url`` (unset: ``http://localhost:8080``, as Airflow's
    own task-log links)."""
    from airflow.configuration import conf

    base = conf.get("api", "base_url", fallback="") or DEFAULT_BASE_URL
    return f"{base.rstrip('/')}/{PLAN_PAGE.format(plan_id=plan_id)}"


def run_plan_facts(run_id: str) -> compose.PlanFacts | None:
    """The facts of the plan made by ``run_id`` (None before plan_split stored one)."""
    from pulsar_rebalance.orchestration.approval import _session
    from pulsar_rebalance.orchestration.connections import database_url
    from pulsar_rebalance.store import repository as repo

    with _session(database_url()) as s:
        plan = repo.plan_for_run(s, run_id=run_id)
        if plan is None:
            return None
        cluster = repo.cluster_name(s, cluster_id=plan.cluster_id)
    return compose.plan_facts(
        plan_id=plan.plan_id,
        status=plan.status,
        summary=plan.summary,
        actions=[(a.kind, a.state) for a in plan.actions],
        result=plan.result,
        cluster=cluster,
        expires_at=plan.expires_at,
        dry_run=plan.dry_run,
        approvals=len(plan.votes),
        required_approvals=plan.required_approvals,
    )


def _failure(context) -> compose.Failure:
    ti = context["task_instance"]
    error_class, error_message = compose.error_text(context.get("exception"))
    try:
        log_url = ti.log_url
    except Exception:
        log_url = None
    return compose.Failure(
        dag_id=ti.dag_id,
        run_id=ti.run_id,
        task_id=ti.task_id,
        error_class=error_class,
        error_message=error_message,
        log_url=log_url,
    )


def _cluster_of(dag_id: str) -> str:
    """The cluster name of one of our DAGs (``core.clusters``: ``pulsar_rebalance_<name>``), else the default."""
    return clusters.name_of_dag(dag_id) or clusters.DEFAULT_NAME


def message_for(hook: Hook, context) -> compose.Message | None:
    """The message one of our hooks sends for this task context (None: nothing to say)."""
    ti = context["task_instance"]
    try:
        facts = run_plan_facts(clusters.run_key(ti.run_id, _cluster_of(ti.dag_id)))
    except Exception as exc:
        if hook != "task_failed":
            raise
        facts = None  # the store is unreachable: the failure is still worth telling, without the plan
        logger.warning("Notification of the failure of %s sent without its plan: %s", ti.task_id, type(exc).__name__)
    link = plan_link(facts.plan_id) if facts else None
    if hook == "task_failed":
        failure = _failure(context)
        if (
            facts
            and getattr(context.get("task"), "job", None) == EXECUTE_JOB
            and facts.status
            in (
                "executing",
                "interrupted",
            )
        ):
            return compose.interrupted(failure, facts, link=link)
        params = context.get("params") or {}
        return compose.failed(failure, facts, link=link, cluster=params.get("cluster"))
    if facts is None:
        return None
    if hook == "waiting" and facts.status == "pending":
        return compose.waiting(facts, link=link)
    if hook == "executed":
        return compose.executed(facts, link=link)
    if hook == "gate_skipped" and facts.status == "expired":
        return compose.expired(facts, link=link)
    return None


class PlanNotifier(BaseNotifier):
    """Sends this run's plan event (see the module's table) to the configured channels; never raises."""

    def __init__(self, hook: Hook) -> None:
        super().__init__()
        self.hook = hook

    def notify(self, context) -> None:
        admin_conn_id = clusters.conn_id(_cluster_of(context["task_instance"].dag_id))
        try:
            message = message_for(self.hook, context)
        except Exception as exc:  # the store unreachable, ...: the task's own outcome stands
            logger.warning(
                "Notification for %s not composed (no channel was tried): %s: %s",
                self.hook,
                type(exc).__name__,
                compose.redact_text(str(exc), pipeline_secrets(admin_conn_id)),
            )
            return
        if message is not None:
            send(message, admin_conn_id=admin_conn_id)


def _callbacks(value: Any) -> list[Any]:
    """A task's callback attribute as a list (Airflow keeps a list; a mapped task may hold one or None)."""
    if value is None:
        return []
    return list(value) if isinstance(value, Iterable) else [value]


def _appended(value: Any, notifier: PlanNotifier) -> list[Any]:
    return [*_callbacks(value), notifier]


def attach_notifications(dag: DAG) -> None:
    """Add the notifiers to the DAG's tasks: the gate (waiting, expired), execute_unload (executed,
    interrupted) and every task (failed). Idempotent: a task that has ours already is left as is."""
    from airflow.providers.standard.operators.hitl import HITLOperator

    for task in dag.tasks:
        if any(isinstance(cb, PlanNotifier) for cb in _callbacks(task.on_failure_callback)):
            continue
        task.on_failure_callback = _appended(task.on_failure_callback, PlanNotifier("task_failed"))
        if isinstance(task, HITLOperator):
            task.notifiers = _appended(task.notifiers, PlanNotifier("waiting"))
            task.on_skipped_callback = _appended(task.on_skipped_callback, PlanNotifier("gate_skipped"))
        if getattr(task, "job", None) == EXECUTE_JOB:
            task.on_success_callback = _appended(task.on_success_callback, PlanNotifier("executed"))
