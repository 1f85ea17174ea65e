"""Maintenance windows in the store, and the wait of an approved plan for one (real Postgres)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from pulsar_rebalance.errors import ConfigError
from pulsar_rebalance.store import repository as repo
from pulsar_rebalance.store import session_scope
from pulsar_rebalance.store import windows as store_windows

NIGHTLY = {"timezone": "Europe/Berlin", "windows": [{"cron": "0 2 * * *", "duration_minutes": 120}]}


def _events(engine, event: str) -> list[dict]:
    with engine.connect() as c:
        rows = c.execute(
            text("SELECT actor, details, plan_id FROM audit_log WHERE event = :e ORDER BY id"), {"e": event}
        )
        return [dict(r._mapping) for r in rows]


def test_set_show_clear_are_audited(world):
    with session_scope(world.engine) as s:
        assert store_windows.window_setting(s, cluster_id=world.cluster_id) is None
        store_windows.set_windows(s, cluster_id=world.cluster_id, setting=NIGHTLY, by="alice")
    with session_scope(world.engine) as s:
        shown = store_windows.all_windows(s)
        assert [(w.cluster, w.setting.as_json(), w.updated_by) for w in shown] == [("c1", NIGHTLY, "alice")]
        replaced = {"timezone": "UTC", "windows": [{"cron": "30 1 * * 6", "duration_minutes": 60}]}
        store_windows.set_windows(s, cluster_id=world.cluster_id, setting=replaced, by="bob")
    with session_scope(world.engine) as s:
        assert store_windows.window_setting(s, cluster_id=world.cluster_id).timezone == "UTC"
        assert store_windows.clear_windows(s, cluster_id=world.cluster_id, by="carol") is True
    with session_scope(world.engine) as s:
        assert store_windows.clear_windows(s, cluster_id=world.cluster_id, by="carol") is False
        assert store_windows.window_setting(s, cluster_id=world.cluster_id) is None
    assert [e["actor"] for e in _events(world.engine, "maintenance_windows_set")] == ["alice", "bob"]
    cleared = _events(world.engine, "maintenance_windows_cleared")
    assert len(cleared) == 1 and cleared[0]["details"]["was"]["timezone"] == "UTC"


def test_a_bad_setting_is_refused_and_nothing_is_written(world):
    with pytest.raises(ConfigError, match="unknown timezone 'Nowhere/Land'"):
        with session_scope(world.engine) as s:
            store_windows.set_windows(
                s, cluster_id=world.cluster_id, setting={**NIGHTLY, "timezone": "Nowhere/Land"}, by="alice"
            )
    with session_scope(world.engine) as s:
        assert store_windows.all_windows(s) == []
    assert _events(world.engine, "maintenance_windows_set") == []


def _approved_plan(world, make_plan, expires_at: datetime) -> str:
    plan_id = make_plan(expires_at=expires_at)
    with session_scope(world.engine) as s:
        repo.decide_plan(
            s, plan_id=plan_id, decision="approved", decided_by="alice", now=expires_at - timedelta(hours=1)
        )
    return plan_id


def test_window_gate_waits_opens_and_expires(world, make_plan, db_url):
    from pulsar_rebalance.orchestration.windows import RECHECK, window_gate

    now = datetime(2026, 6, 10, 12, 0, tzinfo=UTC)  # 14:00 in Berlin: outside the nightly window
    plan_id = _approved_plan(world, make_plan, expires_at=now + timedelta(hours=2))
    assert window_gate(db_url, world.run_id, now)["status"] == "open"  # no windows: today's behaviour
    with session_scope(world.engine) as s:
        store_windows.set_windows(s, cluster_id=world.cluster_id, setting=NIGHTLY, by="alice")

    waiting = window_gate(db_url, world.run_id, now)
    assert waiting["status"] == "wait"
    assert waiting["opens_at"] == datetime(2026, 6, 11, 0, 0, tzinfo=UTC)  # 02:00 CEST
    assert waiting["wake_at"] == now + RECHECK  # checks again (the setting may change), holding no slot
    assert waiting["windows"] == "Europe/Berlin: 0 2 * * * for 120 min"

    inside = window_gate(db_url, world.run_id, datetime(2026, 6, 11, 1, 0, tzinfo=UTC))
    assert inside["status"] == "open" and inside["closes_at"] == datetime(2026, 6, 11, 2, 0, tzinfo=UTC)
    with session_scope(world.engine) as s:
        assert repo.get_plan(s, plan_id=plan_id).status == "approved"  # looking changes nothing

    # the approval window ends (14:00 UTC) long before the maintenance window opens: expired, and says why
    late = window_gate(db_url, world.run_id, now + timedelta(hours=2))
    assert late["status"] == "expired"
    with session_scope(world.engine) as s:
        plan = repo.get_plan(s, plan_id=plan_id)
        assert plan.status == "expired"
        assert plan.approval.decision == "approved"  # the approval stays on record
    [event] = _events(world.engine, "plan.expired")
    assert event["plan_id"] == plan_id and event["details"]["waiting_for"] == "maintenance_window"
    assert "did not open before it expired" in event["details"]["reason"]
    assert window_gate(db_url, world.run_id, now + timedelta(hours=3))["status"] == "not_approved"


def test_wait_wakes_at_expiry_when_that_comes_first(world, make_plan, db_url):
    from pulsar_rebalance.orchestration.windows import window_gate

    now = datetime(2026, 6, 10, 12, 0, tzinfo=UTC)
    _approved_plan(world, make_plan, expires_at=now + timedelta(minutes=2))
    with session_scope(world.engine) as s:
        store_windows.set_windows(s, cluster_id=world.cluster_id, setting=NIGHTLY, by="alice")
    assert window_gate(db_url, world.run_id, now)["wake_at"] == now + timedelta(minutes=2)


def test_only_an_approved_plan_waits(world, make_plan, db_url):
    from pulsar_rebalance.orchestration.windows import window_gate

    make_plan()
    state = window_gate(db_url, world.run_id)
    assert state["status"] == "not_approved" and state["plan_status"] == "pending"
    assert window_gate(db_url, "no-such-run")["status"] == "missing"


def test_the_watch_never_triggers_while_the_cluster_is_busy_or_outside_its_window(world, make_plan, db_url):
    from pulsar_rebalance.orchestration.imbalance import watch_sample

    def sample(run: str, when: datetime) -> dict:
        return watch_sample(
            db_url,
            cluster="c1",
            admin_url="http://pulsar:8080",
            broker="b1:8080",
            worst=0.95,
            threshold=0.85,
            samples=1,
            trigger_run_id=f"imbalance__{run}",
            now=when,
        )

    now = datetime(2026, 6, 10, 12, 0, tzinfo=UTC)  # 14:00 in Berlin
    # run-1 (the world's) is still planning: no plan yet
    assert "run run-1 of this cluster is planning" in sample("a", now)["reason"]
    plan_id = make_plan()  # now it has a plan awaiting a decision
    blocked = sample("b", now)
    assert not blocked["trigger"] and f"plan {plan_id} of run run-1 is pending" in blocked["reason"]
    with session_scope(world.engine) as s:
        repo.decide_plan(s, plan_id=plan_id, decision="rejected", decided_by="alice")
        store_windows.set_windows(s, cluster_id=world.cluster_id, setting=NIGHTLY, by="alice")
    outside = sample("c", now)
    assert not outside["trigger"] and "outside the maintenance window" in outside["reason"]
    inside = sample("d", datetime(2026, 6, 11, 0, 30, tzinfo=UTC))  # 02:30 in Berlin
    assert inside["trigger"] and inside["run_id"] == "imbalance__d"
    assert not sample("e", datetime(2026, 6, 11, 0, 35, tzinfo=UTC))["trigger"]  # same episode
    [event] = _events(world.engine, "imbalance_run_triggered")
    assert event["details"]["dag_run_id"] == "imbalance__d"
