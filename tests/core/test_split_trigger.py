"""Split triggers: BundleSplitterTask (modular) and DefaultNamespaceBundleSplitStrategyImpl (extensible)."""

from __future__ import annotations

import pytest

from pulsar_rebalance.core.pulsar.config import LoadBalancerConfig
from pulsar_rebalance.core.pulsar.load import (
    BundleData,
    LocalBrokerData,
    NamespaceBundleStats,
    ResourceUsage,
    TimeAverageMessageData,
)
from pulsar_rebalance.core.pulsar.split_trigger import extensible_bundles_to_split, modular_bundles_to_split
from pulsar_rebalance.errors import ScenarioError

MB = 1024 * 1024
CFG = LoadBalancerConfig()
B1 = "t/ns/0x00000000_0x40000000"
B2 = "t/ns/0x40000000_0x80000000"
B3 = "t/ns/0x80000000_0xc0000000"
OTHER = "t/other/0x00000000_0xffffffff"


def _broker(stats: dict[str, NamespaceBundleStats]) -> LocalBrokerData:
    zero = ResourceUsage(0, 100)
    return LocalBrokerData(cpu=zero, bandwidth_in=zero, bandwidth_out=zero, last_stats=stats, bundles=tuple(stats))


def _long_term(rate: float = 0.0, throughput: float = 0.0) -> BundleData:
    short = TimeAverageMessageData(10, 10)
    long_ = TimeAverageMessageData(1000, 1000, throughput / 2, throughput / 2, rate / 2, rate / 2)
    return BundleData(short, long_, 2)


def _stats(topics: int = 2, **kw: float) -> NamespaceBundleStats:
    return NamespaceBundleStats(topics=topics, **kw)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# modular
# ---------------------------------------------------------------------------------------------


def test_modular_uses_long_term_rates_not_the_instant_stats() -> None:
    brokers = {
        "b1": _broker(
            {
                B1: _stats(msg_rate_in=99_999.0),  # hot right now, but no long-term data -> rate 0
                B2: _stats(msg_rate_in=1.0),  # quiet right now, hot long-term
            }
        )
    }
    result = modular_bundles_to_split(
        brokers=brokers,
        bundle_data={B2: _long_term(rate=30_001.0)},
        namespace_bundle_counts={"t/ns": 4},
        config=CFG,
    )
    assert [c.bundle for c in result] == [B2]
    assert result[0].broker == "b1"
    assert result[0].metric == "msgRate"
    assert "30001" in result[0].reason and "loadBalancerNamespaceBundleMaxMsgRate 30000" in result[0].reason


def test_modular_thresholds_are_strict_and_topics_lt_2_is_skipped() -> None:
    brokers = {
        "b1": _broker(
            {
                B1: _stats(topics=1000),  # == max: not split
                B2: _stats(topics=1001),
                B3: _stats(topics=1, consumer_count=5000),  # < 2 topics: never split
            }
        )
    }
    result = modular_bundles_to_split(brokers=brokers, bundle_data={}, namespace_bundle_counts={"t/ns": 4}, config=CFG)
    assert [(c.bundle, c.metric) for c in result] == [(B2, "topics")]


def test_modular_sessions_and_bandwidth() -> None:
    brokers = {"b1": _broker({B1: _stats(consumer_count=600, producer_count=401), B2: _stats()})}
    bundle_data = {B2: _long_term(throughput=100 * MB + 1)}
    result = modular_bundles_to_split(
        brokers=brokers, bundle_data=bundle_data, namespace_bundle_counts={"t/ns": 4}, config=CFG
    )
    assert [(c.bundle, c.metric) for c in result] == [(B1, "sessions"), (B2, "bandwidth")]
    # maxSessions <= 0 disables the sessions check
    no_sessions = CFG.with_overrides({"loadBalancerNamespaceBundleMaxSessions": -1})
    result = modular_bundles_to_split(
        brokers=brokers, bundle_data=bundle_data, namespace_bundle_counts={"t/ns": 4}, config=no_sessions
    )
    assert [c.bundle for c in result] == [B2]


def test_modular_namespace_cap_counts_this_cycle() -> None:
    brokers = {"b1": _broker({B1: _stats(topics=2000), B2: _stats(topics=2000), B3: _stats(topics=2000)})}
    result = modular_bundles_to_split(
        brokers=brokers, bundle_data={}, namespace_bundle_counts={"t/ns": 126}, config=CFG
    )
    assert [c.bundle for c in result] == [B1, B2]  # 126 + 0 < 128, 126 + 1 < 128, 126 + 2 = 128 stops


def test_modular_same_bundle_on_two_brokers_counts_twice() -> None:
    # Pulsar's quirk: the result is a map, but the per-namespace counter increments per acceptance;
    # bundleCache.put(bundle, broker) keeps the last broker reporting the bundle.
    brokers = {
        "b1": _broker({B1: _stats(topics=2000)}),
        "b2": _broker({B1: _stats(topics=2000), B2: _stats(topics=2000)}),
    }
    result = modular_bundles_to_split(
        brokers=brokers, bundle_data={}, namespace_bundle_counts={"t/ns": 126}, config=CFG
    )
    assert [(c.bundle, c.broker) for c in result] == [(B1, "b2")]


def test_modular_drops_bundles_that_cannot_split_and_respects_the_switch() -> None:
    tiny = "t/ns/0x00000005_0x00000006"
    brokers = {"b1": _broker({tiny: _stats(topics=2000), B1: _stats(topics=2000)})}
    counts = {"t/ns": 4}
    assert [
        c.bundle
        for c in modular_bundles_to_split(brokers=brokers, bundle_data={}, namespace_bundle_counts=counts, config=CFG)
    ] == [B1]
    off = CFG.with_overrides({"loadBalancerAutoBundleSplitEnabled": False})
    assert modular_bundles_to_split(brokers=brokers, bundle_data={}, namespace_bundle_counts=counts, config=off) == []


def test_modular_missing_namespace_count_is_an_input_error() -> None:
    brokers = {"b1": _broker({OTHER: _stats(topics=2000)})}
    with pytest.raises(ScenarioError) as info:
        modular_bundles_to_split(brokers=brokers, bundle_data={}, namespace_bundle_counts={"t/ns": 4}, config=CFG)
    assert info.value.field == "namespaceBundleCounts.t/other"


def test_modular_bad_bundle_name_names_the_field() -> None:
    brokers = {"b1": _broker({"t/ns/0xzz_0x10": _stats(topics=2000)})}
    with pytest.raises(ScenarioError) as info:
        modular_bundles_to_split(brokers=brokers, bundle_data={}, namespace_bundle_counts={"t/ns": 4}, config=CFG)
    assert info.value.field == "brokers.b1.lastStats.t/ns/0xzz_0x10"


# ---------------------------------------------------------------------------------------------
# extensible
# ---------------------------------------------------------------------------------------------


def _run(
    stats: dict[str, NamespaceBundleStats], counts: dict[str, int], config: LoadBalancerConfig = CFG, ns_count: int = 4
):
    return extensible_bundles_to_split(
        broker="b1",
        bundle_stats=stats,
        namespace_bundle_counts={"t/ns": ns_count, "t/other": 1},
        split_condition_hit_counts=counts,
        config=config,
    )


def test_extensible_splits_on_the_fourth_consecutive_hit() -> None:
    hot = {B1: _stats(msg_rate_in=20_000, msg_rate_out=10_001)}  # current in+out, not long-term
    counts: dict[str, int] = {}
    for expected in (1, 2, 3):
        decisions, counts = _run(hot, counts)
        assert decisions == []
        assert counts == {B1: expected}
    decisions, counts = _run(hot, counts)
    assert [(d.bundle, d.broker, d.metric) for d in decisions] == [(B1, "b1", "msgRate")]
    assert "for 4 consecutive cycles" in decisions[0].reason
    assert counts == {}  # reset after the decision


def test_extensible_a_quiet_cycle_resets_and_gone_bundles_are_forgotten() -> None:
    inputs = {B1: 3, "t/gone/0x00000000_0xffffffff": 2}
    decisions, counts = _run({B1: _stats(msg_rate_in=1.0)}, inputs)
    assert decisions == [] and counts == {}
    assert inputs == {B1: 3, "t/gone/0x00000000_0xffffffff": 2}  # input not mutated


def test_extensible_reason_precedence() -> None:
    both = {B1: _stats(topics=5000, msg_rate_in=50_000, msg_throughput_in=500 * MB)}
    decisions, _ = _run(both, {B1: 3})
    assert decisions[0].metric == "topics"
    decisions, _ = _run({B1: _stats(msg_rate_in=50_000, msg_throughput_in=500 * MB)}, {B1: 3})
    assert decisions[0].metric == "msgRate"
    decisions, _ = _run({B1: _stats(msg_throughput_in=100 * MB + 1)}, {B1: 3})
    assert decisions[0].metric == "bandwidth"


def test_extensible_per_cycle_cap_stops_the_scan() -> None:
    cfg = CFG.with_overrides({"loadBalancerMaxNumberOfBundlesToSplitPerCycle": 2})
    hot = {b: _stats(topics=2000) for b in (B1, B2, B3)}
    decisions, counts = _run(hot, {B1: 3, B2: 3, B3: 3}, cfg)
    assert [d.bundle for d in decisions] == [B1, B2]
    assert counts == {B3: 3}  # not examined after the break: its count did not move
    # 0 never equals the decision count, so it means "no cap" (Pulsar compares with ==)
    uncapped = CFG.with_overrides({"loadBalancerMaxNumberOfBundlesToSplitPerCycle": 0})
    decisions, _ = _run(hot, {B1: 3, B2: 3, B3: 3}, uncapped)
    assert len(decisions) == 3


def test_extensible_namespace_cap_and_unsplittable_and_few_topics() -> None:
    tiny = "t/ns/0x00000005_0x00000006"
    stats = {
        B1: _stats(topics=2000),
        B2: _stats(topics=2000),
        tiny: _stats(topics=2000),
        B3: _stats(topics=1, consumer_count=9999),
    }
    decisions, counts = _run(stats, {B1: 3, B2: 3, tiny: 3, B3: 3}, ns_count=127)
    assert [d.bundle for d in decisions] == [B1]  # 127 + 1 reaches 128
    assert counts == {B2: 4, tiny: 3, B3: 3}  # B2 over the cap keeps counting; skipped ones untouched


def test_extensible_switch_off_keeps_counts() -> None:
    off = CFG.with_overrides({"loadBalancerAutoBundleSplitEnabled": False})
    decisions, counts = _run({B1: _stats(topics=2000)}, {B1: 3}, off)
    assert decisions == [] and counts == {B1: 3}
