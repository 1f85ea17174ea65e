"""Runs, brokers, per-run load rows (upsert on retry), carried-over time averages and strategy state."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from pulsar_rebalance.store import InvalidRowError, UnknownRunError, session_scope
from pulsar_rebalance.store import repository as repo

BUNDLE = "public/default/0x00000000_0x80000000"


def test_start_run_is_idempotent_and_finish_stamps(world) -> None:
    with session_scope(world.engine) as s:
        repo.set_run_stage(s, run_id=world.run_id, stage="collect_load")
        repo.finish_run(s, run_id=world.run_id, status="failed")
        failed = repo.get_run(s, run_id=world.run_id)
        again = repo.start_run(s, run_id=world.run_id, cluster_id=world.cluster_id, params={"retry": 1})
    assert failed.status == "failed" and failed.finished_at is not None
    assert again.status == "running" and again.finished_at is None
    assert again.stage == "collect_load" and again.params == {"retry": 1}
    assert again.started_at == failed.started_at
    with session_scope(world.engine) as s:
        other = repo.get_or_create_cluster(s, name="c2", admin_url="http://other:8080")
        with pytest.raises(InvalidRowError, match="already exists for cluster id"):
            repo.start_run(s, run_id=world.run_id, cluster_id=other)
    with session_scope(world.engine) as s:
        with pytest.raises(UnknownRunError):
            repo.set_run_stage(s, run_id="nope", stage="x")
        with pytest.raises(InvalidRowError, match="status"):
            repo.finish_run(s, run_id=world.run_id, status="running")  # type: ignore[arg-type]


def test_cluster_is_created_once_and_admin_url_updated(engine) -> None:
    with session_scope(engine) as s:
        first = repo.get_or_create_cluster(s, name="prod", admin_url="http://a:8080")
        second = repo.get_or_create_cluster(s, name="prod", admin_url="http://b:8080")
        url = s.execute(text("SELECT admin_url FROM clusters WHERE id = :i"), {"i": first}).scalar()
    assert first == second and url == "http://b:8080"


def test_brokers_track_first_and_last_seen(world) -> None:
    with session_scope(world.engine) as s:
        repo.upsert_brokers(s, cluster_id=world.cluster_id, run_id=world.run_id, brokers={"b1:8080": "http://b1:8080"})
        repo.start_run(s, run_id="run-2", cluster_id=world.cluster_id)
        repo.upsert_brokers(s, cluster_id=world.cluster_id, run_id="run-2", brokers={"b1:8080": "http://b1:9090"})
        row = s.execute(text("SELECT web_service_url, first_seen_run_id, last_seen_run_id FROM brokers")).one()
    assert tuple(row) == ("http://b1:9090", world.run_id, "run-2")


def test_broker_load_upserts_on_retry_and_ema_reads_the_previous_run(world) -> None:
    report = {"cpu": {"usage": 80.0, "limit": 100.0}}
    with session_scope(world.engine) as s:
        repo.record_broker_load(s, run_id=world.run_id, rows=[
            {"broker_id": "b1:8080", "raw_report": report, "cpu_usage": 80.0, "max_usage": 0.8, "usage_ema": 0.7},
            {"broker_id": "b2:8080", "raw_report": report, "cpu_usage": 20.0, "usage_ema": 0.2},
        ])  # fmt: skip
        repo.start_run(s, run_id="run-2", cluster_id=world.cluster_id)
        # first attempt of run-2 writes an EMA, the retry overwrites the same row
        repo.record_broker_load(
            s, run_id="run-2", rows=[{"broker_id": "b1:8080", "raw_report": report, "usage_ema": 0.99}]
        )
        assert repo.latest_broker_ema(s, cluster_id=world.cluster_id, exclude_run_id="run-2") == {
            "b1:8080": 0.7,
            "b2:8080": 0.2,
        }
        repo.record_broker_load(
            s, run_id="run-2", rows=[{"broker_id": "b1:8080", "raw_report": report, "usage_ema": 0.75}]
        )
        latest = repo.latest_broker_ema(s, cluster_id=world.cluster_id)
        rows = s.execute(text("SELECT count(*), max(cpu_usage) FROM broker_load WHERE run_id = 'run-2'")).one()
    assert latest == {"b1:8080": 0.75, "b2:8080": 0.2}
    assert tuple(rows) == (1, None)  # overwritten entirely: the retry did not send cpu_usage


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ({"raw_report": {}}, "rows[0].broker_id"),
        ({"broker_id": "b1", "raw_report": "{}"}, "rows[0].raw_report"),
        ({"broker_id": "b1", "raw_report": {}, "cpu_usage": "80"}, "rows[0].cpu_usage"),
        ({"broker_id": "b1", "raw_report": {}, "cpu_usage": float("inf")}, "rows[0].cpu_usage"),
        ({"broker_id": "b1", "raw_report": {}, "num_topics": 1.5}, "rows[0].num_topics"),
        ({"broker_id": "b1", "raw_report": {}, "cpu": 1.0}, "rows[0].cpu"),
    ],
)
def test_bad_broker_rows_name_the_field(world, row: dict, field: str) -> None:
    with pytest.raises(InvalidRowError) as info, session_scope(world.engine) as s:
        repo.record_broker_load(s, run_id=world.run_id, rows=[row])
    assert info.value.field == field


def test_bundle_load_derives_namespace_and_range(world) -> None:
    with session_scope(world.engine) as s:
        repo.record_bundle_load(s, run_id=world.run_id, rows=[
            {"bundle": BUNDLE, "broker_id": "b1:8080", "msg_rate_in": 100.0, "topics": 3,
             "short_term": {"msgRateIn": 100.0}, "long_term": {"msgRateIn": 90.0}},
        ])  # fmt: skip
        row = s.execute(text("SELECT namespace, bundle_range, topics, long_term FROM bundle_load")).one()
        with pytest.raises(InvalidRowError, match="does not match bundle"):
            repo.record_bundle_load(s, run_id=world.run_id, rows=[
                {"bundle": BUNDLE, "broker_id": "b1:8080", "namespace": "other/ns"}])  # fmt: skip
        with pytest.raises(InvalidRowError, match="duplicate bundle"):
            repo.record_bundle_load(s, run_id=world.run_id, rows=[
                {"bundle": BUNDLE, "broker_id": "b1:8080"}, {"bundle": BUNDLE, "broker_id": "b2:8080"}])  # fmt: skip
        with pytest.raises(UnknownRunError):
            repo.record_bundle_load(s, run_id="nope", rows=[{"bundle": BUNDLE, "broker_id": "b1:8080"}])
    assert tuple(row) == ("public/default", "0x00000000_0x80000000", 3, {"msgRateIn": 90.0})


def test_time_averages_and_strategy_state_carry_across_runs(world) -> None:
    other = "public/default/0x80000000_0xffffffff"
    with session_scope(world.engine) as s:
        assert repo.load_strategy_state(s, cluster_id=world.cluster_id, name="ThresholdShedder") is None
        repo.save_strategy_state(s, cluster_id=world.cluster_id, name="ThresholdShedder", run_id=world.run_id,
                                 state={"brokerAvgResourceUsage": {"b1:8080": 0.5}})  # fmt: skip
        repo.save_strategy_state(s, cluster_id=world.cluster_id, name="ThresholdShedder", run_id=world.run_id,
                                 state={"brokerAvgResourceUsage": {"b1:8080": 0.6}})  # fmt: skip
        repo.save_bundle_time_averages(s, cluster_id=world.cluster_id, run_id=world.run_id,
                                       data={BUNDLE: {"shortTermData": {"msgRateIn": 1.0}}, other: {"x": 1}})  # fmt: skip
        repo.save_bundle_time_averages(s, cluster_id=world.cluster_id, run_id=world.run_id,
                                       data={BUNDLE: {"shortTermData": {"msgRateIn": 2.0}}})  # fmt: skip
        kept = repo.load_bundle_time_averages(s, cluster_id=world.cluster_id)
        repo.save_bundle_time_averages(s, cluster_id=world.cluster_id, run_id=world.run_id,
                                       data={BUNDLE: {"shortTermData": {"msgRateIn": 3.0}}}, replace=True)  # fmt: skip
        replaced = repo.load_bundle_time_averages(s, cluster_id=world.cluster_id)
        state = repo.load_strategy_state(s, cluster_id=world.cluster_id, name="ThresholdShedder")
    assert state == {"brokerAvgResourceUsage": {"b1:8080": 0.6}}
    assert kept == {BUNDLE: {"shortTermData": {"msgRateIn": 2.0}}, other: {"x": 1}}
    assert replaced == {BUNDLE: {"shortTermData": {"msgRateIn": 3.0}}}


POLICIES = {
    "namespaceIsolationPolicies": {
        "payments": {
            "namespaces": ["payments/.*"],
            "primary": ["broker-1"],
            "secondary": [],
            "auto_failover_policy": {
                "policy_type": "min_available",
                "parameters": {"min_limit": "1", "usage_threshold": "80"},
            },
        }
    },
    "failureDomains": {"rack-a": {"brokers": ["broker-1:8080"]}},
    "antiAffinityGroups": {"orders/eu": "orders", "orders/us": "orders"},
}


def test_placement_policies_are_stored_per_run_and_found_by_time(world) -> None:
    from datetime import UTC, datetime, timedelta

    t0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    none = {"namespaceIsolationPolicies": {}, "failureDomains": {}, "antiAffinityGroups": {}}
    with session_scope(world.engine) as s:
        repo.record_placement_policies(s, run_id=world.run_id, cluster_id=world.cluster_id, policies=none, at=t0)
        # a retried collect overwrites its run's row
        repo.record_placement_policies(s, run_id=world.run_id, cluster_id=world.cluster_id, policies=POLICIES, at=t0)
        repo.start_run(s, run_id="run-2", cluster_id=world.cluster_id)
        repo.record_placement_policies(
            s, run_id="run-2", cluster_id=world.cluster_id, policies=none, at=t0 + timedelta(hours=1)
        )
    with session_scope(world.engine) as s:
        stored = repo.placement_policies(s, run_id=world.run_id)
        assert stored is not None and stored.contract() == POLICIES and stored.collected_at == t0
        assert repo.placement_policies(s, run_id="nope") is None
        # "why was bundle X on broker Y at T": the constraints as last read at or before T
        at = repo.placement_policies_at(s, cluster_id=world.cluster_id, at=t0 + timedelta(minutes=30))
        assert at is not None and at.run_id == world.run_id and at.contract() == POLICIES
        later = repo.placement_policies_at(s, cluster_id=world.cluster_id, at=t0 + timedelta(hours=2))
        assert later is not None and later.run_id == "run-2" and later.contract() == none
        assert repo.placement_policies_at(s, cluster_id=world.cluster_id, at=t0 - timedelta(seconds=1)) is None
        assert s.execute(text("SELECT count(*) FROM placement_policies")).scalar_one() == 2


@pytest.mark.parametrize(
    ("policies", "error", "match"),
    [
        ({"failureDomains": {}, "antiAffinityGroups": {}}, InvalidRowError, "must have exactly the keys"),
        (
            {**POLICIES, "failureDomains": ["rack-a"]},
            InvalidRowError,
            r"policies\.failureDomains: must be a JSON object",
        ),
        ({**POLICIES, "antiAffinityGroups": {"a/b": float("nan")}}, InvalidRowError, "not JSON-serialisable"),
    ],
)
def test_placement_policies_rejects_bad_input_before_writing(world, policies, error, match) -> None:
    with session_scope(world.engine) as s:
        with pytest.raises(error, match=match):
            repo.record_placement_policies(s, run_id=world.run_id, cluster_id=world.cluster_id, policies=policies)
        with pytest.raises(UnknownRunError):
            repo.record_placement_policies(s, run_id="nope", cluster_id=world.cluster_id, policies=POLICIES)
        assert s.execute(text("SELECT count(*) FROM placement_policies")).scalar_one() == 0
