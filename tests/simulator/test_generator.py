"""The generated cluster and the in-memory state's Pulsar semantics (no HTTP here)."""

from __future__ import annotations

import bisect
import json
import zlib

import pytest

from pulsar_rebalance.errors import ConfigError
from pulsar_rebalance.simulator.cluster import (
    ClusterState,
    PulsarRestError,
    creation_boundaries,
    java_long_decode,
    topic_hash,
)
from pulsar_rebalance.simulator.generator import generate_cluster

pytestmark = pytest.mark.timeout(60)

MB = 1024 * 1024
FOUR_BUNDLES = [0x00000000, 0x40000000, 0x80000000, 0xC0000000, 0xFFFFFFFF]


def _pct(usage: dict[str, float]) -> float:
    return usage["usage"] / usage["limit"] * 100 if usage["limit"] > 0 else 0.0


def _weighted_max_usage(report: dict) -> float:
    """getMaxResourceUsageWithWeight with Pulsar 4.x defaults: cpu 1, memory 0, directMemory 0, bw 1/1."""
    weights = {"cpu": 1.0, "memory": 0.0, "directMemory": 0.0, "bandwidthIn": 1.0, "bandwidthOut": 1.0}
    return max(_pct(report[k]) * w for k, w in weights.items()) / 100


def _expected_range(topic: str, boundaries: list[int]) -> str:
    h = zlib.crc32(topic.encode()) & 0xFFFFFFFF
    i = bisect.bisect_right(boundaries, h) - 1
    return f"0x{boundaries[i]:08x}_0x{boundaries[i + 1]:08x}"


def test_same_seed_same_cluster_and_different_seed_differs() -> None:
    a, b, c = generate_cluster(seed=7), generate_cluster(seed=7), generate_cluster(seed=8)
    assert a.snapshot() | {"startedAtMs": 0} == b.snapshot() | {"startedAtMs": 0}
    assert [t.msg_rate_in for t in a.topics()] != [t.msg_rate_in for t in c.topics()]


def test_default_cluster_layout() -> None:
    state = generate_cluster()
    assert state.broker_ids() == [f"127.0.0.1:{18080 + i}" for i in range(5)]
    assert state.namespaces() == ["public/default", "tenant-a/orders", "tenant-b/events"]
    assert state.tenants() == ["public", "tenant-a", "tenant-b"]
    for ns in state.namespaces():
        assert state.bundles_data(ns) == {
            "boundaries": ["0x00000000", "0x40000000", "0x80000000", "0xc0000000", "0xffffffff"],
            "numBundles": 4,
        }
    names = [t.name for t in state.topics()]
    assert "persistent://public/default/topic-0" in names
    assert any(n.endswith("-partition-3") for n in names)
    assert all(n.startswith("persistent://") for n in names)


def test_creation_boundaries_match_pulsar() -> None:
    assert creation_boundaries(4) == FOUR_BUNDLES
    assert creation_boundaries(1) == [0, 0xFFFFFFFF]
    assert creation_boundaries(3) == [0, 0x55555555, 0xAAAAAAAA, 0xFFFFFFFF]


def test_known_hash_values_from_reference() -> None:
    assert topic_hash("persistent://public/default/my-topic") == 732775927
    assert topic_hash("persistent://public/default/test") == 2855153909
    assert topic_hash("non-persistent://public/default/my-topic") == 2199789898


def test_every_topic_maps_to_its_crc32_bundle() -> None:
    state = generate_cluster(seed=3)
    for topic in state.topics():
        expected = f"{topic.namespace}/{_expected_range(topic.name, FOUR_BUNDLES)}"
        assert state.bundle_for_topic(topic.name) == expected


def test_default_cluster_gives_threshold_shedder_work() -> None:
    """ThresholdShedder first cycle (EMA = current usage), Pulsar defaults: 10 % threshold, 10 MB/s floor."""
    state = generate_cluster()
    reports = {b: state.load_report(b) for b in state.broker_ids()}
    usage = {b: _weighted_max_usage(r) for b, r in reports.items()}
    avg = sum(usage.values()) / len(usage)
    flagged = []
    for broker, report in reports.items():
        if usage[broker] < avg + 0.10:
            continue
        to_offload = (usage[broker] - avg - 0.10 + 0.05) * (report["msgThroughputIn"] + report["msgThroughputOut"])
        if to_offload >= 10 * MB and len(report["bundles"]) > 1:
            flagged.append((broker, usage[broker] - avg, to_offload))
    assert flagged, f"no broker flagged; usage={usage} avg={avg}"
    assert max(margin for _, margin, _ in flagged) > 0.25  # well over the 10-point threshold


def test_default_cluster_has_a_modular_split_candidate() -> None:
    state = generate_cluster()
    candidates = []
    for broker in state.broker_ids():
        for bundle, s in state.load_report(broker)["lastStats"].items():
            rate = s["msgRateIn"] + s["msgRateOut"]
            thr = s["msgThroughputIn"] + s["msgThroughputOut"]
            if s["topics"] >= 2 and (rate > 30000 or thr > 100 * MB or s["topics"] > 1000):
                candidates.append(bundle)
    assert candidates


def test_balanced_cluster_without_skew_spreads_bundles() -> None:
    state = generate_cluster(skew=1.0)
    counts = [len(state.owned_bundles(b)) for b in state.broker_ids()]
    assert max(counts) - min(counts) <= 1


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"brokers": 0}, "brokers"),
        ({"skew": float("nan")}, "skew"),
        ({"namespaces": ["no-slash"]}, "namespaces"),
        ({"hot_namespace": "x/y"}, "hot_namespace"),
        ({"port_base": 65535, "brokers": 2}, "port_base"),
    ],
)
def test_invalid_parameters_name_the_key(kwargs: dict, key: str) -> None:
    with pytest.raises(ConfigError) as info:
        generate_cluster(**kwargs)
    assert info.value.key == key


def test_load_report_is_derived_from_ownership() -> None:
    state = generate_cluster()
    for broker in state.broker_ids():
        report = state.load_report(broker)
        owned_with_topics = {b for b in state.owned_bundles(broker) if state.topics_in_bundle(b)}
        assert set(report["lastStats"]) == owned_with_topics == set(report["bundles"])
        topics = [t for b in owned_with_topics for t in state.topics_in_bundle(b)]
        assert report["msgRateIn"] == pytest.approx(sum(t.msg_rate_in for t in topics))
        assert report["msgThroughputOut"] == pytest.approx(sum(t.msg_throughput_out for t in topics))
        assert report["numTopics"] == len(topics)
        assert report["bandwidthIn"]["usage"] == pytest.approx(report["msgThroughputIn"] * 8 / 1024)
        assert report["bandwidthIn"]["limit"] == 1000 * 1024
        assert report["cpu"]["limit"] == 800


def test_range_split_uses_pulsar_midpoint_and_keeps_owner() -> None:
    state = generate_cluster()
    owner = state.owner("tenant-a/orders/0x00000000_0x40000000")
    children = state.split_bundle("tenant-a/orders", "0x00000000_0x40000000")
    assert children == ["tenant-a/orders/0x00000000_0x20000000", "tenant-a/orders/0x20000000_0x40000000"]
    assert {state.owner(c) for c in children} == {owner}
    # full range: 0 + 0xffffffff // 2 = 0x7fffffff, not 0x80000000 (testSplitBundleInTwo)
    full = ClusterState(
        cluster="c",
        brokers=[state.broker_spec(state.broker_ids()[0])],
        namespaces={"t/n": [0, 0xFFFFFFFF]},
        topics=[],
        owners={"t/n/0x00000000_0xffffffff": state.broker_ids()[0]},
    )
    assert full.split_bundle("t/n", "0x00000000_0xffffffff") == [
        "t/n/0x00000000_0x7fffffff",
        "t/n/0x7fffffff_0xffffffff",
    ]


def test_topic_count_equally_divide_matches_formula() -> None:
    state = generate_cluster()
    bundle = "public/default/0x00000000_0x40000000"
    hashes = sorted(topic_hash(t.name) for t in state.topics_in_bundle(bundle))
    n = len(hashes)
    start, end = hashes[max(n // 2 - 1, 0)], hashes[n // 2]
    middle = start + (end - start) // 2
    children = state.split_bundle("public/default", "0x00000000_0x40000000", algorithm="topic_count_equally_divide")
    assert children == [f"public/default/0x00000000_0x{middle:08x}", f"public/default/0x{middle:08x}_0x40000000"]
    left = len(state.topics_in_bundle(children[0]))
    assert left == n // 2


def test_specified_positions_filters_out_of_range_and_may_not_split() -> None:
    state = generate_cluster()
    ns, rng = "tenant-a/orders", "0x80000000_0xc0000000"
    assert state.split_bundle(ns, rng, algorithm="specified_positions_divide", boundaries=[0x10, 0xF0000000]) == []
    assert state.bundle_ranges(ns) == ["0x00000000_0x40000000", "0x40000000_0x80000000", rng, "0xc0000000_0xffffffff"]
    positions = [0xB0000000, 0x90000000, 5]  # unsorted, one out of range
    children = state.split_bundle(ns, rng, algorithm="specified_positions_divide", boundaries=positions)
    assert [c.rsplit("/", 1)[1] for c in children] == [
        "0x80000000_0x90000000",
        "0x90000000_0xb0000000",
        "0xb0000000_0xc0000000",
    ]


@pytest.mark.parametrize(
    ("ns", "rng", "kwargs", "status"),
    [
        ("tenant-a/orders", "0x00000000_0x40000000", {"algorithm": "nope"}, 412),
        ("tenant-a/orders", "0x00000000_0x40000000", {"algorithm": "specified_positions_divide"}, 412),
        ("tenant-a/orders", "0x00000000_0x20000000", {}, 412),  # not a current bundle
        ("tenant-a/orders", "garbage", {}, 412),
        ("tenant-a/missing", "0x00000000_0x40000000", {}, 404),
    ],
)
def test_split_errors_carry_pulsar_status(ns: str, rng: str, kwargs: dict, status: int) -> None:
    state = generate_cluster()
    with pytest.raises(PulsarRestError) as info:
        state.split_bundle(ns, rng, **kwargs)
    assert info.value.status == status


def test_split_with_unload_moves_children_off_the_parent_owner() -> None:
    state = generate_cluster()
    parent = "tenant-b/events/0x00000000_0x40000000"
    owner = state.owner(parent)
    children = state.split_bundle("tenant-b/events", "0x00000000_0x40000000", unload=True)
    assert len(children) == 2
    assert all(state.owner(c) != owner for c in children)


def test_unload_replaces_on_least_loaded_other_broker_and_honours_affinity() -> None:
    state = generate_cluster()
    bundle = "tenant-b/events/0x40000000_0x80000000"
    owner = state.owner(bundle)
    rates = {b: state.load_report(b)["msgRateIn"] + state.load_report(b)["msgRateOut"] for b in state.broker_ids()}
    new_owner = state.unload_bundle("tenant-b/events", "0x40000000_0x80000000")
    assert new_owner != owner
    # every other broker owns 0 bundles of tenant-b/events, so the lowest message rate wins
    assert new_owner == min((b for b in state.broker_ids() if b != owner), key=lambda b: rates[b])
    target = state.broker_ids()[2]
    state.set_bundle_affinity(bundle, target)
    assert state.unload_bundle("tenant-b/events", "0x40000000_0x80000000") == target


def test_state_file_round_trip(tmp_path) -> None:
    path = tmp_path / "state.json"
    state = generate_cluster()
    state.state_file = path
    state.split_bundle("tenant-a/orders", "0x00000000_0x40000000")
    reloaded = ClusterState.load(path)
    assert reloaded.snapshot() == state.snapshot()
    on_disk = json.loads(path.read_text())["namespaces"]["tenant-a/orders"]
    assert on_disk[:3] == ["0x00000000", "0x20000000", "0x40000000"]


def test_rename_brokers_keeps_ownership() -> None:
    state = generate_cluster(brokers=2)
    before = state.owners()
    state.rename_brokers({"127.0.0.1:18080": "127.0.0.1:1", "127.0.0.1:18081": "127.0.0.1:2"})
    mapping = {"127.0.0.1:18080": "127.0.0.1:1", "127.0.0.1:18081": "127.0.0.1:2"}
    assert state.owners() == {b: mapping[o] for b, o in before.items()}
    assert state.leader == "127.0.0.1:1"


def test_java_long_decode() -> None:
    assert java_long_decode("0x40000000") == 0x40000000
    assert java_long_decode("0X10") == 16
    assert java_long_decode("#10") == 16
    assert java_long_decode("010") == 8
    assert java_long_decode("42") == 42
    with pytest.raises(ValueError):
        java_long_decode("0x")
