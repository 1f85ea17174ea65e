"""core.notifications: what each event says, read from stored plan JSON, and that redaction removes secrets."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from pulsar_rebalance.core import notifications as n

EXPIRES = datetime(2026, 11, 26, 12, 30, tzinfo=UTC)
SUMMARY = {
    "maxUsageBefore": 0.923,
    "maxUsageAfterPredicted": 0.615,
    "strategies": {"shedding": "GlobalPlanner", "placement": "LeastResourceUsageWithWeight"},
}
ACTIONS = [("unload", "completed"), ("unload", "skipped"), ("unload", "failed"), ("split", "completed")]


def facts(**kw):
    args = {
        "plan_id": "p-42",
        "status": "pending",
        "summary": SUMMARY,
        "actions": ACTIONS,
        "cluster": "prod-east",
        "expires_at": EXPIRES,
    }
    return n.plan_facts(**{**args, **kw})


def test_plan_facts_read_the_stored_summary_actions_and_result():
    f = facts(result={"max_usage_after": 0.6})
    assert (f.unloads, f.splits, f.done, f.skipped, f.failed) == (3, 1, 2, 1, 1)
    assert f.strategy == "GlobalPlanner / LeastResourceUsageWithWeight" and f.mode == "rebalance"
    assert (f.max_usage_before, f.max_usage_after_predicted, f.max_usage_after) == (0.923, 0.615, 0.6)
    # values a plan did not record stay unknown, never zero
    bare = n.plan_facts(plan_id="p", status="empty", summary=None, actions=[])
    assert bare.max_usage_before is None and bare.strategy is None
    assert "unknown -> unknown" in n.waiting(bare, link=None).text


@pytest.mark.parametrize(
    ("summary", "mode"),
    [
        ({"mode": {"mode": "drain", "brokers": ["b1:8080"]}}, "drain"),
        ({"mode": {"mode": "fill"}}, "fill"),
        ({"rollbackOf": "p-1"}, "rollback"),
        ({"fixPolicyViolations": {"fixed": 2}}, "fix_policy_violations"),
        ({}, "rebalance"),
    ],
)
def test_the_mode_comes_from_the_summary(summary, mode):
    assert n.plan_mode(summary) == mode


def test_waiting_says_everything_needed_to_decide_and_links_the_plan_page():
    m = n.waiting(facts(), link="http://airflow:8080/pulsar-rebalance/plans/p-42")
    assert m.event == "waiting"
    assert m.subject == "Approval needed: rebalance plan p-42 on cluster prod-east: 3 unload(s), 1 split(s)"
    for line in (
        "Plan: p-42",
        "Cluster: prod-east",
        "Mode: rebalance",
        "Strategy: GlobalPlanner / LeastResourceUsageWithWeight",
        "Actions: 3 unload(s), 1 split(s)",
        "Busiest broker's usage: 92.3% -> 61.5% (predicted)",
        "Expires: 2026-11-26 12:30 UTC (undecided by then: nothing runs)",
        "Plan page: http://airflow:8080/pulsar-rebalance/plans/p-42",
    ):
        assert line in m.text.splitlines(), line
    assert "Approvals" not in m.text
    two = n.waiting(facts(approvals=1, required_approvals=2), link=None)
    assert "Approvals: 1 of 2 (from different people)" in two.text and "Plan page" not in two.text


def test_the_webhook_payload_has_a_slack_text_and_the_fields():
    m = n.waiting(facts(), link="http://a/pulsar-rebalance/plans/p-42")
    body = json.loads(json.dumps(m.payload()))  # JSON-serialisable as sent
    assert body["text"].startswith(f"*{m.subject}*\n") and "Plan: p-42" in body["text"]
    assert body["event"] == "waiting" and body["plan_id"] == "p-42" and body["cluster"] == "prod-east"
    assert body["expires_at"] == EXPIRES.isoformat() and body["link"] == "http://a/pulsar-rebalance/plans/p-42"


def test_executed_counts_done_skipped_failed_and_the_measured_balance():
    m = n.executed(facts(status="partially_executed", result={"max_usage_after": 0.64}, dry_run=True), link=None)
    assert m.subject == "Executed: rebalance plan p-42 on cluster prod-east (dry run): 2 done, 1 skipped, 1 failed"
    assert "Done: 2 of 4; skipped: 1; failed: 1" in m.text
    assert "92.3% before, 61.5% predicted, 64.0% measured after" in m.text
    assert (m.fields["done"], m.fields["skipped"], m.fields["failed"]) == (2, 1, 1)


def test_expired_says_nothing_ran():
    m = n.expired(facts(status="expired"), link=None)
    assert m.subject == "Expired: rebalance plan p-42 on cluster prod-east was not decided in time"
    assert "Expired at: 2026-11-26 12:30 UTC; nothing was executed." in m.text


FAILURE = n.Failure("pulsar_rebalance", "manual__1", "collect_load", "AirflowException", "spark-submit exited 1")


def test_failed_names_the_task_and_the_error_with_or_without_a_plan():
    m = n.failed(FAILURE, None, link=None, cluster="prod-east")
    assert m.subject == "Failed: task collect_load of run manual__1 on cluster prod-east: AirflowException"
    assert "Error: AirflowException: spark-submit exited 1" in m.text and m.link is None
    assert m.fields["task_id"] == "collect_load" and m.fields["cluster"] == "prod-east" and m.fields["plan_id"] is None
    with_plan = n.failed(FAILURE, facts(status="failed"), link="http://a/p")
    assert "Plan status: failed; done 2, skipped 1, failed 1" in with_plan.text and with_plan.link == "http://a/p"


def test_interrupted_says_how_far_it_got_and_how_to_go_on():
    m = n.interrupted(FAILURE, facts(status="executing"), link=None)
    assert m.subject == "Interrupted: rebalance plan p-42 on cluster prod-east: 2 of 4 action(s) done"
    assert "pulsar-rebalance plans resume p-42" in m.text and "pulsar-rebalance plans abort p-42" in m.text


def test_error_text_is_one_line_and_bounded():
    name, message = n.error_text(RuntimeError("line one\n  line two " + "x" * 2000 + " Error code is: 1."))
    assert name == "RuntimeError" and message.startswith("line one line two x")
    assert len(message) == n.MAX_ERROR_CHARS and " … " in message and message.endswith("x Error code is: 1.")
    assert n.error_text(None)[0] == "UnknownError"
    assert n.error_text(ValueError(""))[1] == "(no message)"


def test_redact_removes_every_secret_from_every_part_and_url_passwords():
    secret, token = "hooks/T0/B0/s3cretPath", "tok-9f8e7d6c"
    m = n.failed(
        n.Failure(
            "d", "r", "t", "HTTPError", f"POST https://x/{secret} failed; token {token}; db postgresql://u:pw9@h/db"
        ),
        None,
        link=None,
        cluster=f"c-{token}",
    )
    safe = n.redact(m, [secret, token, ""])
    blob = json.dumps([safe.subject, safe.text, safe.fields, safe.payload()])
    assert secret not in blob and token not in blob and "pw9" not in blob
    assert "https://x/***" in safe.text and "postgresql://u:***@h/db" in safe.text
    assert m.fields["error_message"] != safe.fields["error_message"]  # the original is left as it was
