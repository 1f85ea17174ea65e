"""The four split algorithms: Pulsar's unit-test values and the seed documents' worked examples.

The seed examples give topic *hashes*, not names. ``forge_topic`` builds a real topic name whose
crc32 is the wanted hash (crc32 is affine over GF(2), so choosing 'a'/'b' at 40 positions of a
suffix solves for any 32-bit value), so the examples run through the real hashing and the JSON
contract exactly like user input would.
"""

from __future__ import annotations

import zlib

import pytest

from pulsar_rebalance.core.contract.split import split_scenario
from pulsar_rebalance.core.pulsar.bundles import BundleRange, topic_hash
from pulsar_rebalance.core.pulsar.config import LoadBalancerConfig
from pulsar_rebalance.core.pulsar.split_algorithms import (
    SPLIT_ALGORITHMS,
    TopicRates,
    explain_split,
    flow_or_qps_equally_divide,
    get_split_boundaries,
    range_equally_divide,
    specified_positions_divide,
    topic_count_equally_divide,
)
from pulsar_rebalance.errors import ScenarioError

MB = 1024 * 1024
CFG = LoadBalancerConfig()


def forge_topic(prefix: str, target: int, *, width: int = 40) -> str:
    """A name ``prefix + [ab]{width}`` whose zlib.crc32 (UTF-8) is ``target``."""
    prefix_len = len(prefix.encode("utf-8"))
    base = prefix + "a" * width
    n = len(base.encode("utf-8"))
    zero = zlib.crc32(bytes(n))

    def delta(i: int) -> int:  # crc change of flipping position i from 'a' to 'b' (xor 0x03)
        d = bytearray(n)
        d[prefix_len + i] = 0x03
        return zlib.crc32(bytes(d)) ^ zero

    basis: dict[int, tuple[int, int]] = {}  # pivot bit -> (vector, positions mask)
    for i in range(width):
        v, m = delta(i), 1 << i
        for bit in sorted(basis, reverse=True):
            if v >> bit & 1:
                v ^= basis[bit][0]
                m ^= basis[bit][1]
        if v:
            basis[v.bit_length() - 1] = (v, m)
    v, m = zlib.crc32(base.encode("utf-8")) ^ target, 0
    for bit in sorted(basis, reverse=True):
        if v >> bit & 1:
            v ^= basis[bit][0]
            m ^= basis[bit][1]
    assert v == 0, "suffix too short to reach the target hash"
    name = prefix + "".join("b" if m >> i & 1 else "a" for i in range(width))
    assert zlib.crc32(name.encode("utf-8")) == target
    return name


def test_forge_topic_hits_any_hash() -> None:
    for target in (0, 1, 0x12345678, 0xFFFFFFFF):
        assert topic_hash(forge_topic("persistent://public/default/x-", target)) == target


# ---------------------------------------------------------------------------------------------
# Pulsar's unit tests
# ---------------------------------------------------------------------------------------------


def test_range_equally_divide_lower_10() -> None:
    # RangeEquallyDivideBundleSplitAlgorithmTest: 10 + (0xffffffff - 10) / 2
    assert range_equally_divide(BundleRange.of(10, 0xFFFFFFFF), config=CFG) == [2147483652]


def test_range_equally_divide_full_range_is_0x7fffffff() -> None:
    assert range_equally_divide(BundleRange.full(), config=CFG) == [0x7FFFFFFF]


def test_topic_count_pulsar_test_values() -> None:
    # TopicCountEquallyDivideBundleSplitAlgorithmTest: topics a, b, c
    hashes = sorted(topic_hash(t) for t in "abc")  # [112844655, 1908338681, 3904355907]
    start, end = hashes[0], hashes[1]  # n=3: h[max(3/2-1, 0)] = h[0], h[3/2] = h[1]
    assert topic_count_equally_divide(BundleRange.full(), topics=["a", "b", "c"], config=CFG) == [
        start + (end - start) // 2
    ]
    assert topic_count_equally_divide(BundleRange.full(), topics=["a", "b", "c"], config=CFG) == [1010591668]
    # testTopicsSizeLessThan1
    assert topic_count_equally_divide(BundleRange.full(), topics=["a"], config=CFG) is None
    assert topic_count_equally_divide(BundleRange.full(), topics=[], config=CFG) is None


def test_topic_count_keeps_duplicate_hashes() -> None:
    h = 0x40000000
    same = [forge_topic(f"persistent://t/n/d{i}-", h) for i in range(3)]
    other = forge_topic("persistent://t/n/o-", 0x50000000)
    # sorted [h, h, h, 0x50000000]: n/2-1 = 1 -> h, n/2 = 2 -> h  => boundary h itself
    assert topic_count_equally_divide(BundleRange.full(), topics=[*same, other], config=CFG) == [h]


def test_specified_positions_pulsar_test_values() -> None:
    # SpecifiedPositionsBundleSplitAlgorithmTest.testAlgorithmReturnCorrectResult: bundle [1, 1000)
    bundle = BundleRange.of(1, 1000)
    positions = [-1, 0, 1, 100, 200, 500, 800, 1000, 1100]
    assert specified_positions_divide(bundle, topics=["topic", "topic2"], positions=positions, config=CFG) == [
        100,
        200,
        500,
        800,
    ]
    # unsorted input is sorted first
    assert specified_positions_divide(bundle, topics=["t1", "t2"], positions=[800, 100], config=CFG) == [100, 800]
    # testTotalTopicsSizeLessThan1
    assert specified_positions_divide(bundle, topics=["a"], positions=[1, 2], config=CFG) is None
    # nothing strictly inside
    assert specified_positions_divide(bundle, topics=["a", "b"], positions=[1, 1000], config=CFG) is None


@pytest.mark.parametrize("positions", [None, []])
def test_specified_positions_empty_raises(positions: list[int] | None) -> None:
    # testSpecifiedPositionsLessThan1: IllegalArgumentException("SplitBoundaries can't be empty")
    with pytest.raises(ScenarioError) as info:
        specified_positions_divide(BundleRange.full(), topics=["a", "b"], positions=positions, config=CFG)
    assert info.value.field == "positions"


def _rates(rate_in: float, rate_out: float, thr_in: float, thr_out: float) -> TopicRates:
    return TopicRates(msg_rate_in=rate_in, msg_rate_out=rate_out, msg_throughput_in=thr_in, msg_throughput_out=thr_out)


FLOW_CFG = LoadBalancerConfig.from_mapping(
    {
        "loadBalancerNamespaceBundleMaxMsgRate": 1010,
        "loadBalancerNamespaceBundleMaxBandwidthMbytes": 100,
        "flowOrQpsDifferenceThresholdPercentage": 10,
    }
)


def test_flow_or_qps_first_position_is_overload() -> None:
    # FlowOrQpsEquallyDivideBundleSplitAlgorithmTest.testFirstPositionIsOverLoad
    names = [f"persistent://test-tenant1/test-namespace1/test-partition-{i}" for i in range(5)]
    by_hash = sorted(names, key=topic_hash)
    topics = {by_hash[0]: _rates(1000, 1000, 1000, 1000)}
    topics.update({n: _rates(24.5, 25, 1000, 1000) for n in by_hash[1:]})
    h0, h1 = topic_hash(by_hash[0]), topic_hash(by_hash[1])
    result = flow_or_qps_equally_divide(BundleRange.full(), topics=topics, config=FLOW_CFG)
    assert result is not None
    assert result[0] == h0 + (h1 - h0) // 2 + 1  # note the +1
    assert result == [h0 + (h1 - h0) // 2 + 1]  # the other four fit in one child (4 x 49.5 msg/s)


def test_flow_or_qps_split_bundle_by_flow_or_qps() -> None:
    # FlowOrQpsEquallyDivideBundleSplitAlgorithmTest.testSplitBundleByFlowOrQps: every child stays
    # below the limits
    topics: dict[str, TopicRates] = {}
    for i in range(1, 6):
        for j in range(20):
            topics[f"persistent://test-tenant1/test-namespace1/test{i}-partition-{j}"] = _rates(24.5, 25, 1000, 1000)
    for i in range(6, 13):
        for j in range(20):
            topics[f"persistent://test-tenant1/test-namespace1/test{i}-partition-{j}"] = _rates(25.5, 25, 1000, 1000)
    topics["persistent://test-tenant1/test-namespace1/test695-partition-0"] = _rates(25, 35, 1000, 1000)
    positions = flow_or_qps_equally_divide(BundleRange.full(), topics=topics, config=FLOW_CFG)
    assert positions  # 12,000+ msg/s over a 1010 msg/s limit: many children
    ordered = sorted(topics, key=topic_hash)
    i = 0
    for end in positions:
        rate = thr = 0.0
        while topic_hash(ordered[i]) < end:
            rate += topics[ordered[i]].msg_rate
            thr += topics[ordered[i]].throughput
            i += 1
        assert rate < 1010
        assert thr < 100 * MB


def test_flow_or_qps_split_threshold_is_inclusive() -> None:
    # no split only while bundleMsgRate < maxMsgRate * (1 + 10 / 100.0) = 1100.0 (strict <)
    cfg = LoadBalancerConfig.from_mapping({"loadBalancerNamespaceBundleMaxMsgRate": 1000})
    a = forge_topic("persistent://t/n/a-", 0x10000000)
    b = forge_topic("persistent://t/n/b-", 0x20000000)
    topics = {a: _rates(550, 0, 1, 0), b: _rates(549.9, 0, 1, 0)}
    outcome = explain_split("flow_or_qps_equally_divide", BundleRange.full(), topics=topics, config=cfg)
    assert outcome.boundaries is None
    assert "1099.9 msg/s < 1100" in outcome.reason
    topics[b] = _rates(550, 0, 1, 0)  # exactly 1100: split; 550 + 550 > 1000 -> one boundary (+1)
    assert flow_or_qps_equally_divide(BundleRange.full(), topics=topics, config=cfg) == [0x10000000 + 0x08000000 + 1]


def test_flow_or_qps_skips_empty_topics_and_needs_two() -> None:
    cfg = LoadBalancerConfig.from_mapping({"loadBalancerNamespaceBundleMaxMsgRate": 10})
    a = forge_topic("persistent://t/n/a-", 0x10000000)
    b = forge_topic("persistent://t/n/b-", 0x20000000)
    c = forge_topic("persistent://t/n/c-", 0x30000000)
    topics = {a: _rates(100, 0, 0, 0), b: _rates(0, 0, 0, 0), c: None}
    outcome = explain_split("flow_or_qps_equally_divide", BundleRange.full(), topics=topics, config=cfg)  # type: ignore[arg-type]
    assert outcome.boundaries is None and "1 topic(s) with traffic" in outcome.reason
    # names without stats: Pulsar finds no stats and does not split
    assert flow_or_qps_equally_divide(BundleRange.full(), topics=[a, b, c], config=cfg) is None


def test_flow_or_qps_same_hash_collapses_in_the_map_but_not_in_the_list() -> None:
    # Pulsar keys TopicInfo by hash (HashMap: later topic wins) but keeps every hash in the list.
    cfg = LoadBalancerConfig.from_mapping({"loadBalancerNamespaceBundleMaxMsgRate": 1000})
    h1, h2 = 0x10000000, 0x20000000
    first = forge_topic("persistent://t/n/a-", h1)
    twin_a = forge_topic("persistent://t/n/b-", h2)
    twin_b = forge_topic("persistent://t/n/c-", h2)
    topics = {first: _rates(100, 0, 0, 0), twin_a: _rates(900, 0, 0, 0), twin_b: _rates(950, 0, 0, 0)}
    # walk over [h1, h2, h2] with rates [100, 950, 950]: 100+950 > 1000 -> boundary; 950+950 > 1000
    # -> boundary between the two equal hashes: h2 + 0 + 1
    assert flow_or_qps_equally_divide(BundleRange.full(), topics=topics, config=cfg) == [
        h1 + (h2 - h1) // 2 + 1,
        h2 + 1,
    ]


def test_registry_and_dispatch() -> None:
    assert list(SPLIT_ALGORITHMS) == [
        "range_equally_divide",
        "topic_count_equally_divide",
        "specified_positions_divide",
        "flow_or_qps_equally_divide",
    ]
    assert get_split_boundaries("range_equally_divide", BundleRange.of(0, 0x80000000), config=CFG) == [0x40000000]
    with pytest.raises(ValueError, match="unknown split algorithm"):
        get_split_boundaries("hash_divide", BundleRange.full(), config=CFG)


# ---------------------------------------------------------------------------------------------
# Seed worked examples, through the JSON contract
# ---------------------------------------------------------------------------------------------

SEED_HASHES = [0x10000000, 0x15000000, 0x24000000, 0x39000000, 0x58000000, 0x76000000]


def seed_flow_topics() -> dict[str, dict[str, float]]:
    """t1..t6 of the flow_or_qps seed: rate 100..600 msg/s, throughput 10..60 MB/s (MiB, as Pulsar)."""
    return {
        forge_topic(f"persistent://public/default/t{i + 1}-", h): {
            "msgRateIn": (i + 1) * 100,
            "msgRateOut": 0,
            "msgThroughputIn": (i + 1) * 10 * MB,
            "msgThroughputOut": 0,
        }
        for i, h in enumerate(SEED_HASHES)
    }


def _flow_scenario(max_rate: int, max_mbytes: int) -> dict:
    return {
        "algorithm": "flow_or_qps_equally_divide",
        "bundle": "public/default/0x00000000_0x80000000",
        "topics": seed_flow_topics(),
        "config": {
            "loadBalancerNamespaceBundleMaxMsgRate": max_rate,
            "loadBalancerNamespaceBundleMaxBandwidthMbytes": max_mbytes,
        },
    }


def test_seed_flow_or_qps_case1_message_rate() -> None:
    result = split_scenario(_flow_scenario(450, 200))
    # The seed prints 0x19500000, 31500000, 48500000, 67000000: it added the hex values as if they were
    # decimal and omits Pulsar's +1; Pulsar computes start + (end - start) / 2 + 1 for each pair.
    assert result["boundaries"] == ["0x1c800001", "0x2e800001", "0x48800001", "0x67000001"]
    assert result["split"] is True
    assert result["children"] == [
        "public/default/0x00000000_0x1c800001",
        "public/default/0x1c800001_0x2e800001",
        "public/default/0x2e800001_0x48800001",
        "public/default/0x48800001_0x67000001",
        "public/default/0x67000001_0x80000000",
    ]


def test_seed_flow_or_qps_case2_throughput() -> None:
    result = split_scenario(_flow_scenario(1900, 90))
    # Seed: 0x31500000 and 0x67000000; (0x24000000 + 0x39000000) / 2 is 0x2e800000, and Pulsar adds 1.
    # 40 + 50 MB = 90 MB is not > 90 MB (strict), so t4 and t5 share a child, as the seed says.
    assert result["boundaries"] == ["0x2e800001", "0x67000001"]


def test_seed_flow_or_qps_case3_both_limits() -> None:
    result = split_scenario(_flow_scenario(1100, 110))
    # Seed: 0x48500000; (0x39000000 + 0x58000000) / 2 is 0x48800000, plus Pulsar's +1.
    assert result["boundaries"] == ["0x48800001"]
    assert result["children"] == ["public/default/0x00000000_0x48800001", "public/default/0x48800001_0x80000000"]


def test_seed_topic_count_streamnative_docs_example() -> None:
    hashes = [0x10000000, 0x20000000, 0x35000000, 0x65000000, 0x70000000, 0x75000000]
    topics = [forge_topic(f"persistent://public/default/t{i}-", h) for i, h in enumerate(hashes)]
    result = split_scenario(
        {"algorithm": "topic_count_equally_divide", "bundle": "0x00000000_0x80000000", "topics": topics}
    )
    # The docs say "you can set" 0x50000000 (any point between 0x35000000 and 0x65000000 works);
    # Pulsar computes the midpoint 0x35000000 + 0x30000000 / 2.
    assert result["boundaries"] == ["0x4d000000"]
    assert result["children"] == ["0x00000000_0x4d000000", "0x4d000000_0x80000000"]


def test_seed_topic_count_blog_example() -> None:
    hashes = [0x0000, 0x0005, 0x0010, 0x0015, 0x0020, 0x0025]
    topics = [forge_topic(f"persistent://public/default/t{i}-", h) for i, h in enumerate(hashes)]
    result = split_scenario(
        {"algorithm": "topic_count_equally_divide", "bundle": "0x00000000_0x00008000", "topics": topics}
    )
    assert result["boundaries"] == ["0x00000012"]  # the blog's 0x0012: 0x10 + 5 / 2


def test_seed_range_examples() -> None:
    half = split_scenario({"algorithm": "range_equally_divide", "bundle": "0x00000000_0x80000000"})
    assert half["boundaries"] == ["0x40000000"]
    small = split_scenario({"bundle": "0x00000000_0x00008000"})  # default algorithm: range_equally_divide
    assert small["algorithm"] == "range_equally_divide"
    assert small["boundaries"] == ["0x00004000"]
    full = split_scenario({"bundle": "0x00000000_0xffffffff"})
    # 0x7fffffff, not 0x80000000: (0xffffffff - 0) / 2 in integer arithmetic
    assert full["boundaries"] == ["0x7fffffff"]


def test_seed_specified_positions_example() -> None:
    topics = [
        forge_topic("persistent://public/default/big1-", 0x30000000),
        forge_topic("persistent://public/default/big2-", 0x35000000),
    ]
    result = split_scenario(
        {
            "algorithm": "specified_positions_divide",
            "bundle": "0x00000000_0x40000000",
            "topics": topics,
            "positions": ["0x33000000"],
        }
    )
    assert result["children"] == ["0x00000000_0x33000000", "0x33000000_0x40000000"]
