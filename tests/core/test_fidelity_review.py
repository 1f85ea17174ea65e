"""Fidelity review: scenarios where Pulsar's own code gives a provably specific answer that an earlier
version of the core got wrong. Each test cites the Pulsar file and method it reproduces."""

from __future__ import annotations

from pulsar_rebalance.core.pulsar.config import LoadBalancerConfig
from pulsar_rebalance.core.pulsar.load import (
    BundleData,
    LocalBrokerData,
    NamespaceBundleStats,
    ResourceUsage,
    TimeAverageMessageData,
)
from pulsar_rebalance.core.pulsar.split_trigger import extensible_bundles_to_split, modular_bundles_to_split

MB = 1024 * 1024
B1 = "t/ns/0x00000000_0x40000000"
B2 = "t/ns/0x40000000_0x80000000"


def _broker(stats: dict[str, NamespaceBundleStats]) -> LocalBrokerData:
    zero = ResourceUsage(0, 100)
    return LocalBrokerData(cpu=zero, bandwidth_in=zero, bandwidth_out=zero, last_stats=stats, bundles=tuple(stats))


def _long_term(throughput: float) -> BundleData:
    return BundleData(
        TimeAverageMessageData(10, 10),
        TimeAverageMessageData(1000, 1000, throughput / 2, throughput / 2, 0.0, 0.0),
        2,
    )


# ---------------------------------------------------------------------------------------------
# Split triggers: the bandwidth limit is an *int* multiplication in Java.
#
# BundleSplitterTask.findBundlesToSplit and DefaultNamespaceBundleSplitStrategyImpl.findBundlesToSplit:
#     long maxBundleBandwidth = conf.getLoadBalancerNamespaceBundleMaxBandwidthMbytes() * LoadManagerShared.MIBI;
# getLoadBalancerNamespaceBundleMaxBandwidthMbytes() is an int and LoadManagerShared.MIBI is
# `public static final int MIBI = 1024 * 1024`, so the product is computed in 32-bit int arithmetic
# (wrapping) and only then widened to long. 4096 MiB -> 2^32 wraps to 0; 2048 MiB -> -2^31.
# (FlowOrQpsEquallyDivideBundleSplitAlgorithm uses a `long MBytes` and does not wrap.)
# ---------------------------------------------------------------------------------------------


def test_modular_split_bandwidth_limit_wraps_like_java_int() -> None:
    cfg = LoadBalancerConfig.from_mapping({"loadBalancerNamespaceBundleMaxBandwidthMbytes": 4096})
    brokers = {"b1": _broker({B1: NamespaceBundleStats(topics=2), B2: NamespaceBundleStats(topics=2)})}
    # B1: 1 MiB/s long-term; B2: no traffic at all.
    result = modular_bundles_to_split(
        brokers=brokers,
        bundle_data={B1: _long_term(1 * MB), B2: _long_term(0.0)},
        namespace_bundle_counts={"t/ns": 4},
        config=cfg,
    )
    # Java: 4096 * 1048576 (int) == 0 -> 1 MiB/s > 0 splits B1; B2's 0 > 0 is false.
    assert [(c.bundle, c.metric) for c in result] == [(B1, "bandwidth")]


def test_modular_split_bandwidth_limit_2048_mib_is_negative_in_java() -> None:
    cfg = LoadBalancerConfig.from_mapping({"loadBalancerNamespaceBundleMaxBandwidthMbytes": 2048})
    brokers = {"b1": _broker({B1: NamespaceBundleStats(topics=2)})}
    result = modular_bundles_to_split(brokers=brokers, bundle_data={}, namespace_bundle_counts={"t/ns": 4}, config=cfg)
    # Java: 2048 * 1048576 (int) == -2147483648, and a bundle without BundleData has throughput 0 > that.
    assert [(c.bundle, c.metric) for c in result] == [(B1, "bandwidth")]


def test_extensible_split_bandwidth_limit_wraps_like_java_int() -> None:
    cfg = LoadBalancerConfig.from_mapping(
        {
            "loadBalancerNamespaceBundleMaxBandwidthMbytes": 5000,
            "loadBalancerNamespaceBundleSplitConditionHitCountThreshold": 0,
        }
    )
    # Java: 5000 * 1048576 = 5242880000 wraps to 947912704 B/s (~904 MiB/s).
    stats = {B1: NamespaceBundleStats(topics=2, msg_throughput_in=950_000_000.0)}
    found, _ = extensible_bundles_to_split(
        broker="b1",
        bundle_stats=stats,
        namespace_bundle_counts={"t/ns": 4},
        split_condition_hit_counts={},
        config=cfg,
    )
    assert [(c.bundle, c.metric) for c in found] == [(B1, "bandwidth")]
