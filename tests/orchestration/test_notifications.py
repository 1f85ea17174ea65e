"""Notifications (email + webhook) against real local servers: an aiosmtpd SMTP server with AUTH and an
HTTP receiver. First the channels on their own, then whole DAG runs (dag.test, real Spark, the simulator):
a plan waiting at the gate, executed, a run that fails and a plan that expires each arrive on both
channels, with the plan's facts and none of the credentials (admin token, SMTP password, the webhook's
secret path and token, the state DB URL)."""

from __future__ import annotations

import json
import logging
import socket
import threading

import pytest

from tests.notify_receivers import (
    SMTP_PASSWORD,
    SMTP_USER,
    WEBHOOK_PATH,
    WEBHOOK_TOKEN,
    SmtpServer,
    WebhookReceiver,
    free_port,
)
from tests.orchestration import test_dag_e2e as e2e
from tests.waiting import wait_for

Approver, _run_dag = e2e.Approver, e2e._run_dag
cluster, wired = e2e.cluster, e2e.wired  # the DAG end-to-end tests' fixtures: the simulator, Connections to it

ADMIN_TOKEN = "admin-T0ken-2b7d41"
SECRETS = (SMTP_PASSWORD, WEBHOOK_PATH, "whk5ecretPath9d1", WEBHOOK_TOKEN, ADMIN_TOKEN)


@pytest.fixture
def smtp():
    with SmtpServer() as server:
        yield server


@pytest.fixture
def webhook():
    with WebhookReceiver() as receiver:
        yield receiver


def _set_conn(monkeypatch, conn_id: str, conn: dict) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(conn))


@pytest.fixture
def channels(smtp, webhook, monkeypatch):
    _set_conn(monkeypatch, "pulsar_rebalance_smtp", smtp.connection())
    _set_conn(monkeypatch, "pulsar_rebalance_webhook", webhook.connection())
    return smtp, webhook


def _assert_no_secret(smtp: SmtpServer, webhook: WebhookReceiver, db_url: str | None = None) -> None:
    blobs = [m.raw for m in smtp.received()] + [h.raw for h in webhook.received()]
    assert blobs
    for secret in (*SECRETS, *([db_url] if db_url else [])):
        assert not [b for b in blobs if secret in b], f"a notification carries the secret {secret[:6]}…"


def _message(error: str):
    from pulsar_rebalance.core import notifications as n

    failure = n.Failure("pulsar_rebalance", "manual__x", "collect_load", "ConnectError", error)
    return n.failed(failure, None, link=None, cluster="prod-east")


# ------------------------------------------------------------------------------------------ channels
def test_a_message_reaches_both_channels_without_any_secret(channels, monkeypatch):
    from pulsar_rebalance.orchestration.notify import send

    smtp, webhook = channels
    _set_conn(
        monkeypatch,
        "pulsar_admin_default",
        {"conn_type": "http", "host": "http://pulsar:8080", "password": ADMIN_TOKEN},
    )
    # an error text quoting the credentials (as an HTTP library's error may quote a URL) is redacted
    outcome = send(_message(f"POST {webhook.url} with {ADMIN_TOKEN} and {SMTP_PASSWORD} failed"))
    assert outcome == {"email": "sent", "webhook": "sent"}

    [mail] = smtp.received()
    assert mail.login == SMTP_USER  # the hook logged in with the Connection's password
    assert mail.recipients == ["oncall@example.test"] and mail.sender == "pulsar-rebalance@example.test"
    assert (
        mail.subject
        == "[pulsar-rebalance] Failed: task collect_load of run manual__x on cluster prod-east: ConnectError"
    )
    assert mail.headers["X-Pulsar-Rebalance-Event"] == "failed"
    assert (
        "Failed task: collect_load" in mail.text
        and "Error: ConnectError: POST *** with *** and *** failed" in mail.text
    )

    [hook] = webhook.received()
    assert hook.headers["Authorization"] == f"Bearer {WEBHOOK_TOKEN}"
    assert hook.body["event"] == "failed" and hook.body["task_id"] == "collect_load"
    assert hook.body["text"].startswith("*Failed: task collect_load") and "***" in hook.body["error_message"]
    _assert_no_secret(smtp, webhook)


def test_without_connections_both_channels_are_off_and_nothing_fails(smtp, webhook):
    from pulsar_rebalance.orchestration.notify import send

    assert send(_message("boom")) == {"email": "off", "webhook": "off"}
    assert smtp.received() == [] and webhook.received() == []


def test_a_channel_that_cannot_deliver_logs_a_warning_naming_it_and_the_other_still_sends(
    smtp, webhook, monkeypatch, caplog
):
    from pulsar_rebalance.orchestration.notify import send

    log = logging.getLogger("test.notify")
    # the webhook refuses (wrong path: 404), the email goes out
    _set_conn(monkeypatch, "pulsar_rebalance_smtp", smtp.connection())
    _set_conn(monkeypatch, "pulsar_rebalance_webhook", webhook.connection(webhook.url + "x"))
    with caplog.at_level(logging.WARNING, logger="test.notify"):
        assert send(_message("boom"), log=log) == {"email": "sent", "webhook": "failed"}
    assert len(smtp.received()) == 1 and webhook.refused == [WEBHOOK_PATH + "x"]
    [warning] = [r.getMessage() for r in caplog.records if r.name == "test.notify"]
    assert "NOT sent by webhook (Connection 'pulsar_rebalance_webhook')" in warning
    assert "HTTP 404" in warning and "whk5ecretPath9d1" not in warning

    # the SMTP server unreachable, the webhook delivers
    caplog.clear()
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        dead = {**smtp.connection(), "port": closed.getsockname()[1]}
        _set_conn(monkeypatch, "pulsar_rebalance_smtp", dead)
        _set_conn(monkeypatch, "pulsar_rebalance_webhook", webhook.connection())
        with caplog.at_level(logging.WARNING, logger="test.notify"):
            assert send(_message("boom"), log=log) == {"email": "failed", "webhook": "sent"}
    [warning] = [r.getMessage() for r in caplog.records if r.name == "test.notify"]
    assert "NOT sent by email (Connection 'pulsar_rebalance_smtp')" in warning
    assert SMTP_PASSWORD not in warning and len(webhook.received()) == 1


def test_the_dag_wires_a_notifier_for_every_event(airflow_db):
    from pathlib import Path

    from airflow.dag_processing.dagbag import DagBag

    from pulsar_rebalance.orchestration.notify import PlanNotifier

    root = Path(__file__).resolve().parents[2]
    dag = DagBag(dag_folder=str(root / "dags")).get_dag("pulsar_rebalance")

    def hooks(callbacks):
        return [cb.hook for cb in callbacks if isinstance(cb, PlanNotifier)]

    for task in dag.tasks:
        assert hooks(task.on_failure_callback) == ["task_failed"], task.task_id
    gate, execute = dag.get_task("await_approval"), dag.get_task("execute_unload")
    assert hooks(gate.notifiers) == ["waiting"] and hooks(gate.on_skipped_callback) == ["gate_skipped"]
    assert hooks(execute.on_success_callback) == ["executed"]


# ------------------------------------------------------------------------------------- whole DAG runs
def _by_event(smtp: SmtpServer, webhook: WebhookReceiver, event: str):
    mails = [m for m in smtp.received() if m.headers.get("X-Pulsar-Rebalance-Event") == event]
    posts = [h.body for h in webhook.received() if h.body["event"] == event]
    return mails, posts


@pytest.mark.slow
@pytest.mark.timeout(1500, method="thread")
def test_a_plan_waiting_at_the_gate_then_executed_is_announced_on_both_channels(
    airflow_db, wired, channels, monkeypatch
):
    import sqlalchemy as sa

    sim, db_url = wired
    smtp, webhook = channels
    _set_conn(
        monkeypatch, "pulsar_admin_default", {"conn_type": "http", "host": sim.admin_url, "password": ADMIN_TOKEN}
    )
    approver = Approver(db_url, "approve")

    def approve_once_announced() -> None:  # the "waiting" message arrives while the plan waits
        try:
            wait_for(lambda: _by_event(smtp, webhook, "waiting")[1], 900, "the 'waiting' webhook")
        except AssertionError as exc:
            approver.error = exc
            return
        approver.run()

    thread = threading.Thread(target=approve_once_announced, daemon=True)
    thread.start()
    dr, states = _run_dag({"shedding_strategy": "ThresholdShedder", "approval_timeout_minutes": 30})
    thread.join(timeout=60)
    assert approver.error is None and approver.exit_code == 0, approver.error
    assert dr.state == "success", states

    engine = sa.create_engine(db_url)
    with engine.connect() as c:
        plan = c.execute(sa.text("SELECT * FROM plans WHERE plan_id = :p"), {"p": approver.plan_id}).mappings().one()
        cluster_name = c.execute(
            sa.text("SELECT name FROM clusters WHERE id = :i"), {"i": plan["cluster_id"]}
        ).scalar_one()
        kinds = [
            r[0] for r in c.execute(sa.text("SELECT kind FROM plan_actions WHERE plan_id = :p"), {"p": plan["plan_id"]})
        ]
    engine.dispose()
    unloads, splits = kinds.count("unload"), kinds.count("split")
    summary = plan["summary"]

    [mail], [post] = _by_event(smtp, webhook, "waiting")
    assert post["plan_id"] == plan["plan_id"] and post["cluster"] == cluster_name and post["mode"] == "rebalance"
    assert post["strategy"].startswith("ThresholdShedder") and (post["unloads"], post["splits"]) == (unloads, splits)
    assert post["max_usage_before"] == pytest.approx(summary["maxUsageBefore"])
    assert post["max_usage_after_predicted"] == pytest.approx(summary["maxUsageAfterPredicted"])
    assert post["expires_at"] == plan["expires_at"].isoformat()
    assert post["link"] == f"http://localhost:8080/pulsar-rebalance/plans/{plan['plan_id']}"  # [api] base_url unset
    for text in (mail.text, post["text"]):
        assert f"Plan: {plan['plan_id']}" in text and f"Cluster: {cluster_name}" in text
        assert f"Actions: {unloads} unload(s), {splits} split(s)" in text
        assert f"Busiest broker's usage: {summary['maxUsageBefore']:.1%} -> " in text and "Expires: " in text
        assert f"Plan page: {post['link']}" in text
    assert mail.subject.startswith(f"[pulsar-rebalance] Approval needed: rebalance plan {plan['plan_id']}")

    [mail], [post] = _by_event(smtp, webhook, "executed")
    assert post["plan_id"] == plan["plan_id"] and post["status"] == "executed"
    assert (post["done"], post["skipped"], post["failed"]) == (unloads + splits, 0, 0)
    assert post["max_usage_after"] == pytest.approx(plan["result"]["max_usage_after"])
    assert f"Done: {unloads + splits} of {unloads + splits}; skipped: 0; failed: 0" in mail.text
    assert {m.headers["X-Pulsar-Rebalance-Event"] for m in smtp.received()} == {"waiting", "executed"}
    _assert_no_secret(smtp, webhook, db_url)


@pytest.mark.slow
@pytest.mark.timeout(1500, method="thread")
def test_a_run_that_cannot_reach_pulsar_announces_which_task_failed_and_why(
    airflow_db, db_url, channels, monkeypatch, tmp_path
):
    smtp, webhook = channels
    unreachable = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    _set_conn(monkeypatch, "pulsar_admin_default", {"conn_type": "http", "host": unreachable, "password": ADMIN_TOKEN})
    _set_conn(monkeypatch, "pulsar_rebalance_db", {"conn_type": "postgres", "extra": {"url": db_url}})
    monkeypatch.setenv("PULSAR_REBALANCE_WORK_DIR", str(tmp_path / "work"))

    dr, states = _run_dag({"shedding_strategy": "ThresholdShedder"})
    assert dr.state == "failed" and states["collect_load"] == "failed", states

    [mail], [post] = _by_event(smtp, webhook, "failed")
    assert post["task_id"] == "collect_load" and post["run_id"] == dr.run_id and post["plan_id"] is None
    assert post["error_class"] and post["error_message"]
    assert mail.subject == f"[pulsar-rebalance] Failed: task collect_load of run {dr.run_id}: {post['error_class']}"
    assert f"Error: {post['error_class']}: " in mail.text and "Task log: " in mail.text
    _assert_no_secret(smtp, webhook, db_url)


@pytest.mark.slow
@pytest.mark.timeout(1500, method="thread")
def test_a_plan_that_expires_before_anyone_decides_is_announced(airflow_db, wired, channels):
    sim, db_url = wired
    smtp, webhook = channels
    # 0.01 minute: the plan has expired by the time its gate opens; the gate skips, nothing executes
    dr, states = _run_dag({"shedding_strategy": "ThresholdShedder", "approval_timeout_minutes": 0.01})
    assert states["await_approval"] == "skipped" and states["execute_unload"] == "skipped", states

    [mail], [post] = _by_event(smtp, webhook, "expired")
    assert post["status"] == "expired" and post["plan_id"]
    assert "nothing was executed" in mail.text and mail.subject.startswith("[pulsar-rebalance] Expired: rebalance plan")
    assert not _by_event(smtp, webhook, "waiting")[1] and not _by_event(smtp, webhook, "executed")[1]
    _assert_no_secret(smtp, webhook, db_url)


# ------------------------------------------------------------------- the notifier on a stored plan
def _executing_plan(db_url: str) -> tuple[str, str]:
    """A real stored plan of two unloads, approved, one done, the execution still ``executing``."""
    from datetime import UTC, datetime, timedelta

    from pulsar_rebalance.store import make_engine, session_scope
    from pulsar_rebalance.store import repository as repo

    engine = make_engine(db_url)
    moves = [
        {
            "kind": "unload",
            "bundle": f"t/ns/{r}",
            "source_broker": "b1:8080",
            "destination_broker": "b2:8080",
            "reason": "hot",
        }
        for r in ("0x00000000_0x80000000", "0x80000000_0xffffffff")
    ]
    with session_scope(engine) as s:
        cluster_id = repo.get_or_create_cluster(s, name="prod-east", admin_url="http://pulsar:8080")
        repo.start_run(s, run_id="run-x", cluster_id=cluster_id)
        plan_id = repo.create_plan(
            s,
            run_id="run-x",
            cluster_id=cluster_id,
            status="pending",
            expires_at=datetime.now(UTC) + timedelta(hours=1),
            dry_run=False,
            strategies={"shedding": "GlobalPlanner"},
            config={},
            summary={"maxUsageBefore": 0.9, "maxUsageAfterPredicted": 0.6, "strategies": {"shedding": "GlobalPlanner"}},
            decision={"label": "Unload"},
            actions=moves,
        )
    with session_scope(engine) as s:
        repo.decide_plan(s, plan_id=plan_id, decision="approved", decided_by="alice")
        repo.set_plan_status(s, plan_id=plan_id, status="executing")
        first = repo.get_plan(s, plan_id=plan_id).actions[0]
        repo.transition_action(s, action_id=first.id, to="in_progress")
        repo.transition_action(s, action_id=first.id, to="completed")
    return plan_id, "run-x"


class _TaskInstance:
    """The fields of Airflow's task instance in a callback's context that the notifier reads."""

    def __init__(self, run_id: str, task_id: str) -> None:
        self.dag_id, self.run_id, self.task_id = "pulsar_rebalance", run_id, task_id
        self.log_url = f"http://localhost:8080/dags/pulsar_rebalance/runs/{run_id}/tasks/{task_id}"


def test_execute_unload_failing_mid_execution_is_announced_as_interrupted(airflow_db, db_url, channels, monkeypatch):
    from airflow.dag_processing.dagbag import DagBag

    from pulsar_rebalance.errors import ExecutionError
    from pulsar_rebalance.orchestration.notify import PlanNotifier

    smtp, webhook = channels
    _set_conn(monkeypatch, "pulsar_rebalance_db", {"conn_type": "postgres", "extra": {"url": db_url}})
    plan_id, run_id = _executing_plan(db_url)
    dag = DagBag(dag_folder=str(e2e.ROOT / "dags")).get_dag("pulsar_rebalance")
    context = {
        "task_instance": _TaskInstance(run_id, "execute_unload"),
        "task": dag.get_task("execute_unload"),
        "exception": ExecutionError("lost the admin API after 1 action"),
        "params": {},
    }
    PlanNotifier("task_failed")(context)

    [mail], [post] = _by_event(smtp, webhook, "interrupted")
    assert post["plan_id"] == plan_id and post["status"] == "executing" and post["cluster"] == "prod-east"
    assert (post["done"], post["task_id"], post["error_class"]) == (1, "execute_unload", "ExecutionError")
    assert (
        mail.subject
        == f"[pulsar-rebalance] Interrupted: rebalance plan {plan_id} on cluster prod-east: 1 of 2 action(s) done"
    )
    assert f"pulsar-rebalance plans resume {plan_id}" in mail.text and "Task log: http://localhost:8080/" in mail.text

    # any other task failing on the same run is a plain "failed", with the plan
    context = {
        **context,
        "task_instance": _TaskInstance(run_id, "await_approval"),
        "task": dag.get_task("await_approval"),
    }
    PlanNotifier("task_failed")(context)
    [post] = _by_event(smtp, webhook, "failed")[1]
    assert post["plan_id"] == plan_id and post["task_id"] == "await_approval"
    _assert_no_secret(smtp, webhook, db_url)


def test_a_notifier_that_cannot_read_the_store_warns_and_does_not_raise(channels, monkeypatch, caplog):
    from pulsar_rebalance.orchestration.notify import PlanNotifier

    smtp, webhook = channels
    dead = f"postgresql+psycopg2://u:dbPa55w0rd@127.0.0.1:{free_port()}/x?connect_timeout=2"
    _set_conn(monkeypatch, "pulsar_rebalance_db", {"conn_type": "postgres", "extra": {"url": dead}})
    context = {"task_instance": _TaskInstance("run-y", "execute_unload"), "exception": None, "params": {}}
    with caplog.at_level(logging.WARNING):
        PlanNotifier("executed")(context)  # nothing to say without the plan: a warning, no exception
        PlanNotifier("task_failed")(context)  # a failure is still told, without its plan
    assert _by_event(smtp, webhook, "executed") == ([], [])
    [mail], [post] = _by_event(smtp, webhook, "failed")
    assert post["plan_id"] is None and post["task_id"] == "execute_unload"
    warnings = " ".join(r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING)
    assert "Notification for executed not composed" in warnings and "dbPa55w0rd" not in warnings
    _assert_no_secret(smtp, webhook, dead)
