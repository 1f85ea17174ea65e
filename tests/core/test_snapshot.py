"""The snapshot validation layer (core/snapshot.py) on its own, and through the decide contract."""

from __future__ import annotations

import copy

import pytest

from pulsar_rebalance.core.contract.decide import decide_scenario
from pulsar_rebalance.core.contract.load_json import local_broker_data_from_json
from pulsar_rebalance.core.snapshot import (
    check_load_report,
    check_namespace_boundaries,
    resolve_ownership,
    validate_snapshot,
    validate_topic_stats,
)
from pulsar_rebalance.errors import ScenarioError, SnapshotError

NS = "t/ns"
B1, B2 = "b1:8080", "b2:8080"
HALF = [0, 0x80000000, 0xFFFFFFFF]
LOW, HIGH = f"{NS}/0x00000000_0x80000000", f"{NS}/0x80000000_0xffffffff"


def _stats(**kw):
    return {"msgRateIn": 10, "msgRateOut": 10, "msgThroughputIn": 1000, "msgThroughputOut": 1000, "topics": 2, **kw}


def _report(stats_of=(), **kw):
    usage = {"usage": 10, "limit": 100}
    doc = {
        "cpu": usage,
        "memory": usage,
        "directMemory": usage,
        "bandwidthIn": usage,
        "bandwidthOut": usage,
        "lastStats": {b: _stats() for b in stats_of},
    }
    doc.update(kw)
    return doc


def _validate(reports, claims=None, boundaries=None, brokers=(B1, B2)):
    parsed = {b: local_broker_data_from_json(r, f"load-report[{b}]") for b, r in reports.items()}
    return validate_snapshot(
        brokers=list(brokers),
        boundaries=boundaries or {NS: HALF},
        claims=claims if claims is not None else {B1: [LOW], B2: [HIGH]},
        reports=parsed,
        raw_reports=reports,
    )


def test_a_consistent_snapshot_passes_without_warnings():
    check = _validate({B1: _report([LOW]), B2: _report([HIGH])})
    assert check.ownership == {LOW: B1, HIGH: B2} and check.warnings == []


@pytest.mark.parametrize(
    "bounds, field, words",
    [
        ([0x10, 0x80000000, 0xFFFFFFFF], "[0]", "not 0x00000000"),
        ([0, 0x80000000, 0xFFFFFFF0], "[2]", "not 0xffffffff"),
        ([0, 0x80000000, 0x40000000, 0xFFFFFFFF], "[2]", "overlap"),
        ([0, 0x80000000, 0x80000000, 0xFFFFFFFF], "[2]", "overlap"),
        ([0], "", "at least 2"),
    ],
)
def test_boundaries_must_cover_the_hash_range_without_gap_or_overlap(bounds, field, words):
    with pytest.raises(SnapshotError) as exc:
        check_namespace_boundaries(NS, bounds, "bundles[t/ns].boundaries")
    assert words in str(exc.value) and NS in str(exc.value) and exc.value.field.endswith(field)


def test_a_bundle_claimed_twice_is_a_warning_in_collect_and_an_error_in_the_contract():
    claims = {B1: [LOW, HIGH], B2: [HIGH]}
    check = resolve_ownership(claims, brokers=[B1, B2], boundaries={NS: HALF})
    assert check.ownership == {LOW: B1}
    assert [(w.kind, w.bundle) for w in check.warnings] == [("bundle_claimed_twice", HIGH)]
    assert check.excluded_bundles == [HIGH]
    with pytest.raises(SnapshotError, match="owned by 2 brokers") as exc:
        resolve_ownership(claims, brokers=[B1, B2], boundaries={NS: HALF}, transitional=False)
    assert exc.value.bundle == HIGH and exc.value.broker == B2


def test_claims_from_an_unlisted_broker_or_of_a_non_bundle_are_rejected():
    with pytest.raises(SnapshotError, match="not in the cluster's broker list") as exc:
        resolve_ownership({"b9:8080": [LOW]}, brokers=[B1, B2], boundaries={NS: HALF})
    assert exc.value.broker == "b9:8080" and exc.value.bundle == LOW
    with pytest.raises(SnapshotError, match="not a bundle name"):
        resolve_ownership({B1: [f"{NS}/0x0_zz"]}, brokers=[B1], boundaries={NS: HALF})


@pytest.mark.parametrize("name", ["no-slash", "ns/0x00000000_0x80000000", f"{NS}/0x80000000_0x00000000", f"{NS}/"])
def test_load_report_bundle_names_must_be_bundles(name):
    report = _report([LOW])
    report["lastStats"][name] = _stats()
    with pytest.raises(SnapshotError, match="not a bundle name") as exc:
        check_load_report(B1, local_broker_data_from_json(report, "r"), "r")
    assert exc.value.broker == B1 and exc.value.bundle == name


def test_an_owned_bundle_unknown_to_the_boundaries_is_left_out_with_a_warning():
    child = f"{NS}/0x00000000_0x40000000"
    check = resolve_ownership({B1: [child, HIGH]}, brokers=[B1], boundaries={NS: HALF})
    assert check.ownership == {HIGH: B1} and check.excluded_bundles == [child]


@pytest.mark.parametrize(
    "mutate, field, words",
    [
        (lambda r: r["lastStats"][LOW].update(producerCount=2**63), f"lastStats.{LOW}.producerCount", "Java int"),
        (lambda r: r["lastStats"][LOW].update(consumerCount=2**31), f"lastStats.{LOW}.consumerCount", "Java int"),
        (lambda r: r["lastStats"][LOW].update(topics=2**63), f"lastStats.{LOW}.topics", "Java long"),
        (lambda r: r.update(numTopics=1e30), "numTopics", "Java int"),
        (lambda r: r.update(lastUpdate=2**64), "lastUpdate", "Java long"),
        (lambda r: r["cpu"].update(usage=1e39, limit=1), "cpu", "finite float"),
        (lambda r: r["cpu"].update(usage=1, limit=5e-324), "cpu", "finite float"),
        (
            lambda r: r["lastStats"][LOW].update(msgThroughputIn=1e308, msgThroughputOut=1e308),
            f"lastStats.{LOW}",
            "overflow",
        ),
    ],
)
def test_load_report_numbers_must_fit_pulsars_java_types(mutate, field, words):
    report = _report([LOW])
    mutate(report)
    data = local_broker_data_from_json(report, "r")
    with pytest.raises(SnapshotError) as exc:
        check_load_report(B1, data, f"load-report[{B1}]", report.keys())
    assert words in str(exc.value) and B1 in str(exc.value)
    assert exc.value.field == f"load-report[{B1}].{field}"


def test_zero_limits_read_zero_percent_and_warn():
    zero = {"usage": 5, "limit": 0}
    report = _report([LOW], cpu=zero, memory=zero, directMemory=zero, bandwidthIn=zero, bandwidthOut=zero)
    data = local_broker_data_from_json(report, "r")
    assert data.max_resource_usage() == 0.0  # Pulsar's formula: limit 0 -> 0 %
    (w,) = check_load_report(B1, data, "r", report.keys())
    assert w.kind == "limit_zero" and "every resource limit" in w.message and w.broker == B1
    # memory/directMemory absent (optional in LocalBrokerData): default limit 0, no warning
    minimal = {k: v for k, v in _report([LOW]).items() if k not in ("memory", "directMemory")}
    assert check_load_report(B1, local_broker_data_from_json(minimal, "r"), "r", minimal.keys()) == []


def test_a_load_report_listing_another_brokers_bundle_is_rejected():
    with pytest.raises(SnapshotError, match=f"load reports of both {B1} and {B2}") as exc:
        _validate({B1: _report([LOW, HIGH]), B2: _report([HIGH])})
    assert exc.value.bundle == HIGH
    with pytest.raises(SnapshotError, match=f"lists bundle {HIGH}, which is owned by {B2}"):
        _validate({B1: _report([LOW, HIGH]), B2: _report([])})


def test_stats_of_a_bundle_nobody_owns_are_left_out_with_a_warning():
    check = _validate({B1: _report([LOW]), B2: _report([HIGH])}, claims={B1: [LOW], B2: []})
    kinds = sorted(w.kind for w in check.warnings)
    assert kinds == ["bundle_stats_without_owner", "bundles_without_owner"]
    assert check.excluded_bundles == [HIGH]


def test_a_broker_listed_twice_is_rejected():
    with pytest.raises(SnapshotError, match="listed twice"):
        _validate({B1: _report([LOW])}, brokers=[B1, B1])


@pytest.mark.parametrize(
    "raw, field",
    [
        ({"producerCount": 2**63}, "producerCount"),
        ({"producerCount": 1e30}, "producerCount"),
        ({"producerCount": True}, "producerCount"),
        ({"msgRateIn": float("inf")}, "msgRateIn"),
        ({"msgRateIn": float("nan")}, "msgRateIn"),
        ({"msgThroughputIn": -1}, "msgThroughputIn"),
        ({"msgRateOut": "12"}, "msgRateOut"),
        ({"msgRateOut": None}, "msgRateOut"),
        ({"subscriptions": {"s": {"consumerCount": 2**31}}}, "subscriptions.s.consumerCount"),
        ({"subscriptions": []}, "subscriptions"),
    ],
)
def test_topic_stats_are_validated_naming_broker_bundle_topic_and_field(raw, field):
    with pytest.raises(SnapshotError) as exc:
        validate_topic_stats(raw, broker=B1, bundle=LOW, topic="persistent://t/ns/x")
    message = str(exc.value)
    assert all(part in message for part in (B1, LOW, "persistent://t/ns/x", field)), message
    assert exc.value.topic == "persistent://t/ns/x" and exc.value.field == field


def test_topic_stats_accept_what_pulsar_sends():
    st = validate_topic_stats(
        {
            "msgRateIn": 1,
            "msgThroughputIn": 2.5,
            "producerCount": 3.0,
            "unknown": [1],
            "subscriptions": {"s": {"consumers": [{}, {}]}, "t": {"consumerCount": 1}},
        },
        broker=B1,
        bundle=LOW,
        topic="x",
    )
    assert st.producers() == 3 and sum(s.consumer_total() for s in st.subscriptions.values()) == 3
    assert validate_topic_stats({"publishers": [{}, {}]}, broker=B1, bundle=LOW, topic="x").producers() == 2


# ---------------------------------------------------------------------------------------- decide
def _scenario(brokers):
    return {"shedding": "ThresholdShedder", "cycles": [{"brokers": brokers}]}


def test_decide_rejects_one_bundle_under_two_brokers():
    with pytest.raises(SnapshotError, match=f"bundle {HIGH} is under two brokers: {B1} and {B2}"):
        decide_scenario(_scenario({B1: _report([LOW, HIGH]), B2: _report([HIGH])}))
    bundles_only = _report([LOW], bundles=[LOW, HIGH])
    with pytest.raises(SnapshotError, match="under two brokers"):
        decide_scenario(_scenario({B1: bundles_only, B2: _report([HIGH])}))


def test_decide_rejects_overlapping_bundle_ranges():
    quarter = f"{NS}/0x40000000_0xc0000000"
    with pytest.raises(SnapshotError, match=f"bundle ranges overlap: {LOW} and {quarter}"):
        decide_scenario(_scenario({B1: _report([LOW]), B2: _report([quarter])}))


@pytest.mark.parametrize(
    "mutate",
    [
        lambda r: r["cpu"].update(usage=1e308),
        lambda r: r["cpu"].update(limit=5e-324),
        lambda r: r["lastStats"][LOW].update(producerCount=2**63),
    ],
)
def test_decide_rejects_numbers_outside_pulsars_types_instead_of_crashing(mutate):
    r1 = _report([LOW])
    mutate(r1)
    with pytest.raises(ScenarioError):
        decide_scenario(_scenario({B1: r1, B2: _report([HIGH])}))


def test_decide_still_accepts_distinct_bundles():
    out = decide_scenario(_scenario({B1: copy.deepcopy(_report([LOW])), B2: _report([HIGH])}))
    assert out["cycles"][0]["label"] in ("Success", "Skip")


@pytest.mark.parametrize("text, words", [("a\x00b", r"U\+0000"), ("a\ud800", "UTF-8")])
def test_strings_postgres_cannot_store_are_rejected_at_any_depth(text, words):
    deep: object = {"x": text}
    for _ in range(5000):  # deeper than Python's recursion limit: the check is iterative
        deep = [deep]
    report = _report([LOW], extra=deep)
    with pytest.raises(SnapshotError, match=words) as exc:
        _validate({B1: report, B2: _report([HIGH])})
    assert exc.value.broker == B1 and exc.value.field.startswith(f"load-report[{B1}].extra")
    with pytest.raises(SnapshotError, match=words):
        _validate({B1: _report([LOW]), B2: _report([HIGH])}, brokers=[B1, B2, "b3" + text])
    with pytest.raises(SnapshotError, match=words):
        validate_topic_stats({}, broker=B1, bundle=LOW, topic="persistent://t/ns/" + text)


def test_a_leader_that_is_not_a_string_is_rejected():
    parsed = {B1: local_broker_data_from_json(_report([LOW]), "r")}
    with pytest.raises(SnapshotError, match="leader"):
        validate_snapshot(brokers=[B1], boundaries={NS: HALF}, claims={B1: [LOW]}, reports=parsed, leader=5)
