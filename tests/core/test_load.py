"""Pulsar's load data model: float32 percentUsage, weighted maxima, running averages, JSON parsing."""

from __future__ import annotations

import copy

import pytest

from pulsar_rebalance.core.contract.load_json import (
    broker_load_data_from_json,
    bundle_data_from_json,
    local_broker_data_from_json,
    namespace_bundle_stats_from_json,
    parse_bundle_data_map,
    time_average_broker_data_from_json,
)
from pulsar_rebalance.core.pulsar.config import LoadBalancerConfig
from pulsar_rebalance.core.pulsar.load import (
    DEFAULT_MESSAGE_RATE,
    DEFAULT_MESSAGE_THROUGHPUT,
    NUM_LONG_SAMPLES,
    NUM_SHORT_SAMPLES,
    BrokerLoadData,
    BundleData,
    LocalBrokerData,
    NamespaceBundleStats,
    ResourceUsage,
    SystemResourceUsage,
    TimeAverageBrokerData,
    TimeAverageMessageData,
    f32,
)
from pulsar_rebalance.errors import ScenarioError

# ---------------------------------------------------------------------------------------------
# ResourceUsage.percentUsage(): ((float) usage / (float) limit) * 100 in float32
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("usage", "limit", "expected"),
    [
        (999, 1000, 99.90000152587890625),  # the reference's example: not 99.9
        (1, 3, 33.333335876464844),
        (2, 3, 66.66667175292969),
        (0.1, 0.3, 33.33333206176758),
        (1400, 1000, 140.0),  # may exceed 100
        (85, 100, 85.0),
        (5, 0, 0.0),  # limit <= 0 -> 0
    ],
)
def test_percent_usage_is_float32(usage: float, limit: float, expected: float) -> None:
    assert ResourceUsage(usage, limit).percent_usage() == expected


def test_percent_usage_differs_from_double_arithmetic() -> None:
    assert ResourceUsage(999, 1000).percent_usage() != 999 / 1000 * 100


def test_f32_overflow_is_infinity_like_java() -> None:
    assert f32(1e300) == float("inf")
    assert f32(-1e300) == float("-inf")


def _broker(**usages: tuple[float, float]) -> LocalBrokerData:
    def ru(name: str) -> ResourceUsage:
        u = usages.get(name, (0.0, 100.0))
        return ResourceUsage(*u)

    return LocalBrokerData(
        cpu=ru("cpu"),
        memory=ru("memory"),
        direct_memory=ru("direct_memory"),
        bandwidth_in=ru("bandwidth_in"),
        bandwidth_out=ru("bandwidth_out"),
    )


def test_max_resource_usage_is_unweighted_float32_over_five_resources() -> None:
    b = _broker(cpu=(10, 100), memory=(999, 1000), bandwidth_in=(50, 100))
    # float max (99.90000152587890625) / 100 in float: 0.9990000128746033, not 0.999000015258789
    assert b.max_resource_usage() == 0.9990000128746033
    assert b.max_resource_usage() == f32(99.90000152587890625 / 100)


def test_weighted_max_five_and_four_arg() -> None:
    b = _broker(
        cpu=(30, 100), memory=(90, 100), direct_memory=(80, 100), bandwidth_in=(40, 100), bandwidth_out=(20, 100)
    )
    # 5-arg: memory counts when weighted
    assert b.max_resource_usage_with_weight(1.0, 1.0, 0.0, 1.0, 1.0) == 0.9
    assert b.max_resource_usage_with_weight(1.0, 0.0, 0.0, 1.0, 1.0) == 0.4
    # cpu% is float32 30.000001907348633; the weight is applied in double: 60.00000381... / 100
    assert b.max_resource_usage_with_weight(2.0, 0.0, 0.0, 1.0, 1.0) == 0.6000000381469727
    # 4-arg (newest, no memory term)
    assert b.max_resource_usage_with_weight_4(1.0, 0.0, 1.0, 1.0) == 0.4
    assert b.max_resource_usage_with_weight_4(1.0, 1.0, 1.0, 1.0) == 0.8
    # the config's default weights: cpu, bwIn, bwOut = 1; memory, directMemory = 0
    assert b.max_resource_usage_with_config_weights(LoadBalancerConfig()) == 0.4


def test_weighted_max_multiplies_float_percent_in_double() -> None:
    b = _broker(cpu=(999, 1000))
    assert b.max_resource_usage_with_weight(1.0, 0.0, 0.0, 0.0, 0.0) == 99.90000152587890625 / 100


def test_within_limit_ignores_resources_above_100_percent() -> None:
    b = _broker(cpu=(140, 100), bandwidth_in=(70, 100))
    assert b.max_resource_usage_with_weight(1.0, 0.0, 0.0, 1.0, 1.0) == 1.4
    assert b.max_resource_usage_with_weight_within_limit(1.0, 0.0, 0.0, 1.0, 1.0) == 0.7


# ---------------------------------------------------------------------------------------------
# NamespaceBundleStats.compareTo
# ---------------------------------------------------------------------------------------------


def _stats(**kw: float) -> NamespaceBundleStats:
    return NamespaceBundleStats(**kw)  # type: ignore[arg-type]


def test_compare_to_bandwidth_in_with_tolerance() -> None:
    assert _stats(msg_throughput_in=100_000).compare_to(_stats(msg_throughput_in=0)) == 0  # |d| <= 1e5
    assert _stats(msg_throughput_in=100_001).compare_to(_stats(msg_throughput_in=0)) == 1
    assert _stats(msg_throughput_in=0).compare_to(_stats(msg_throughput_in=100_001)) == -1


def test_compare_to_falls_through_in_pulsar_order() -> None:
    # bandwidth in/out "equal", so msg rate decides (tolerance 100)
    a = _stats(msg_throughput_in=50_000, msg_rate_in=60, msg_rate_out=41)
    b = _stats(msg_throughput_in=0)
    assert a.compare_to(b) == 1
    assert _stats(msg_rate_in=100).compare_to(b) == 0
    # then topics + connections (tolerance 500)
    assert _stats(topics=400, consumer_count=101).compare_to(b) == 1
    assert _stats(topics=400, consumer_count=100).compare_to(b) == 0
    # then cache size (tolerance 100000)
    assert _stats(cache_size=100_001).compare_to(b) == 1
    assert _stats(cache_size=100_000).compare_to(b) == 0
    # bandwidth out beats msg rate
    assert _stats(msg_throughput_out=200_001, msg_rate_in=0).compare_to(_stats(msg_rate_in=10_000)) == 1


def test_bundle_stats_json() -> None:
    s = namespace_bundle_stats_from_json(
        {"msgRateIn": 1, "msgThroughputIn": 2.5, "msgRateOut": 3, "msgThroughputOut": 4, "topics": 5}, "s"
    )
    assert (s.consumer_count, s.producer_count, s.cache_size) == (0, 0, 0)
    assert namespace_bundle_stats_from_json(s.to_json(), "s") == s
    with pytest.raises(ScenarioError) as info:
        namespace_bundle_stats_from_json(
            {"msgRateIn": 1, "msgThroughputIn": 2, "msgRateOut": 3, "msgThroughputOut": 4}, "x.y"
        )
    assert info.value.field == "x.y.topics"


# ---------------------------------------------------------------------------------------------
# LocalBrokerData JSON
# ---------------------------------------------------------------------------------------------

STATS_A = {
    "msgRateIn": 10,
    "msgThroughputIn": 1000,
    "msgRateOut": 20,
    "msgThroughputOut": 2000,
    "topics": 3,
    "consumerCount": 2,
    "producerCount": 1,
}
STATS_B = {
    "msgRateIn": 1.5,
    "msgThroughputIn": 100,
    "msgRateOut": 2.5,
    "msgThroughputOut": 200,
    "topics": 7,
    "consumerCount": 4,
    "producerCount": 5,
}
REPORT = {
    "webServiceUrl": "http://b1:8080",
    "pulsarServiceUrl": "pulsar://b1:6650",
    "cpu": {"usage": 50, "limit": 400},
    "memory": {"usage": 512, "limit": 1024},
    "bandwidthIn": {"usage": 10, "limit": 100},
    "bandwidthOut": {"usage": 20, "limit": 100},
    "lastStats": {"t/ns/0x00000000_0x40000000": STATS_A, "t/ns/0x40000000_0x80000000": STATS_B},
    "lastUpdate": 1700000000000,
    "brokerVersionString": "4.0.0",
    "loadReportType": "LocalBrokerData",
    "protocols": {},  # unknown members are ignored
}


def test_local_broker_data_derives_rates_counts_and_bundles_from_last_stats() -> None:
    b = local_broker_data_from_json(REPORT, "brokers.b1")
    assert b.bundles == ("t/ns/0x00000000_0x40000000", "t/ns/0x40000000_0x80000000")
    assert (b.msg_rate_in, b.msg_rate_out) == (11.5, 22.5)
    assert (b.msg_throughput_in, b.msg_throughput_out) == (1100.0, 2200.0)
    assert (b.num_topics, b.num_bundles, b.num_consumers, b.num_producers) == (10, 2, 6, 6)
    assert b.direct_memory == ResourceUsage(0.0, 0.0)
    assert b.max_resource_usage() == f32(50.0 / 100)  # memory 50% ties bwIn... max is memory 50%
    assert b.last_update == 1700000000000
    assert b.web_service_url == "http://b1:8080"


def test_local_broker_data_keeps_reported_values_and_round_trips() -> None:
    doc = dict(
        REPORT,
        msgRateIn=1.0,
        msgRateOut=2.0,
        msgThroughputIn=3.0,
        msgThroughputOut=4.0,
        numTopics=99,
        bundles=["x/y/0x00000000_0xffffffff"],
    )
    b = local_broker_data_from_json(doc, "b")
    assert (b.msg_rate_in, b.msg_rate_out, b.msg_throughput_in, b.msg_throughput_out) == (1.0, 2.0, 3.0, 4.0)
    assert b.num_topics == 99
    assert b.bundles == ("x/y/0x00000000_0xffffffff",)
    assert local_broker_data_from_json(b.to_json(), "b") == b


def test_local_broker_data_accepts_bundle_stats_spelling() -> None:
    doc = {k: v for k, v in REPORT.items() if k != "lastStats"}
    doc["bundleStats"] = REPORT["lastStats"]
    assert local_broker_data_from_json(doc, "b").num_bundles == 2


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d.pop("cpu"), "brokers.b1.cpu"),
        (lambda d: d.pop("lastStats"), "brokers.b1.lastStats"),
        (lambda d: d["cpu"].update(usage=float("nan")), "brokers.b1.cpu.usage"),
        (lambda d: d["bandwidthIn"].update(limit=-1), "brokers.b1.bandwidthIn.limit"),
        (
            lambda d: d["lastStats"]["t/ns/0x00000000_0x40000000"].update(msgRateIn=-0.5),
            "brokers.b1.lastStats.t/ns/0x00000000_0x40000000.msgRateIn",
        ),
        (
            lambda d: d["lastStats"]["t/ns/0x00000000_0x40000000"].update(topics=True),
            "brokers.b1.lastStats.t/ns/0x00000000_0x40000000.topics",
        ),
        (
            lambda d: d["lastStats"]["t/ns/0x00000000_0x40000000"].update(msgRateOut="7"),
            "brokers.b1.lastStats.t/ns/0x00000000_0x40000000.msgRateOut",
        ),
        (lambda d: d.update(loadReportType="LoadReport"), "brokers.b1.loadReportType"),
        (lambda d: d.update(msgRateIn=5.0), "brokers.b1.msgRateIn"),  # only one of the four rates
        (lambda d: d.update(bundles=["a", 3]), "brokers.b1.bundles[1]"),
        (lambda d: d.update(lastUpdate=1.5), "brokers.b1.lastUpdate"),
    ],
)
def test_local_broker_data_errors_name_the_field(mutate, field: str) -> None:  # type: ignore[no-untyped-def]
    doc = copy.deepcopy(REPORT)
    mutate(doc)
    with pytest.raises(ScenarioError) as info:
        local_broker_data_from_json(doc, "brokers.b1")
    assert info.value.field == field


# ---------------------------------------------------------------------------------------------
# TimeAverageMessageData / BundleData / TimeAverageBrokerData
# ---------------------------------------------------------------------------------------------


def test_time_average_is_cumulative_mean_then_ema() -> None:
    t = TimeAverageMessageData(max_samples=3)
    seen = []
    for v in (10.0, 20.0, 30.0, 40.0, 50.0):
        t.update(v, 2 * v, 3 * v, 4 * v)
        seen.append((t.num_samples, t.msg_throughput_in))
    # ((n-1) * avg + sample) / n with n = min(numSamples + 1, maxSamples)
    assert seen == [(1, 10.0), (2, 15.0), (3, 20.0), (3, 26.666666666666668), (3, 34.44444444444445)]
    assert t.msg_throughput_out == 2 * 34.44444444444445
    assert t.total_msg_rate() == t.msg_rate_in + t.msg_rate_out
    assert t.total_msg_throughput() == t.msg_throughput_in + t.msg_throughput_out


def test_first_sample_overwrites_defaults() -> None:
    bd = BundleData.new_default()
    assert bd.short_term_data.max_samples == NUM_SHORT_SAMPLES == 10
    assert bd.long_term_data.max_samples == NUM_LONG_SAMPLES == 1000
    assert bd.short_term_data.num_samples == 0
    assert bd.long_term_data.total_msg_rate() == 2 * DEFAULT_MESSAGE_RATE == 100.0
    assert bd.long_term_data.total_msg_throughput() == 2 * DEFAULT_MESSAGE_THROUGHPUT == 100000.0
    sample = NamespaceBundleStats(
        msg_rate_in=200, msg_throughput_in=7, msg_rate_out=300, msg_throughput_out=9, topics=4
    )
    bd.update(sample)
    for avg in (bd.short_term_data, bd.long_term_data):
        assert (avg.num_samples, avg.msg_rate_in, avg.msg_rate_out, avg.msg_throughput_in, avg.msg_throughput_out) == (
            1,
            200,
            300,
            7,
            9,
        )
    assert bd.topics == 4
    bd.update(NamespaceBundleStats(msg_rate_in=100, topics=5))
    assert bd.short_term_data.msg_rate_in == 150.0
    assert bd.topics == 5


def test_long_term_average_becomes_an_ema_after_1000_samples() -> None:
    t = TimeAverageMessageData(max_samples=NUM_LONG_SAMPLES, num_samples=NUM_LONG_SAMPLES, msg_rate_in=100.0)
    t.update(0.0, 0.0, 1100.0, 0.0)
    assert t.num_samples == 1000
    assert t.msg_rate_in == (999 * 100.0 + 1100.0) / 1000  # alpha = 1/1000
    assert t.msg_rate_in == 101.0


def test_bundle_data_json_and_errors() -> None:
    raw = {
        "shortTermData": {
            "maxSamples": 10,
            "numSamples": 10,
            "msgThroughputIn": 1,
            "msgThroughputOut": 2,
            "msgRateIn": 3,
            "msgRateOut": 4,
        },
        "longTermData": {
            "maxSamples": 1000,
            "numSamples": 5,
            "msgThroughputIn": 5,
            "msgThroughputOut": 6,
            "msgRateIn": 7,
            "msgRateOut": 8,
        },
        "topics": 2,
    }
    parsed = parse_bundle_data_map({"t/ns/0x00000000_0xffffffff": raw}, "bundleData")
    bd = parsed["t/ns/0x00000000_0xffffffff"]
    assert bd.long_term_data.total_msg_rate() == 15.0
    assert bundle_data_from_json(bd.to_json(), "x") == bd
    copy_ = bd.copy()
    copy_.update(NamespaceBundleStats(topics=3))
    assert bd.topics == 2  # copies are independent
    bad = copy.deepcopy(raw)
    bad["longTermData"]["msgRateOut"] = float("inf")
    with pytest.raises(ScenarioError) as info:
        parse_bundle_data_map({"t/ns/0x00000000_0xffffffff": bad}, "bundleData")
    assert info.value.field == "bundleData.t/ns/0x00000000_0xffffffff.longTermData.msgRateOut"
    bad = copy.deepcopy(raw)
    bad["shortTermData"]["maxSamples"] = 0
    with pytest.raises(ScenarioError) as info:
        bundle_data_from_json(bad, "b")
    assert info.value.field == "b.shortTermData.maxSamples"
    with pytest.raises(ScenarioError) as info:
        bundle_data_from_json({"shortTermData": raw["shortTermData"]}, "b")
    assert info.value.field == "b.longTermData"


def test_time_average_broker_data_reset_sums_and_uses_defaults() -> None:
    a = BundleData(
        TimeAverageMessageData(10, 10, 1.0, 2.0, 3.0, 4.0), TimeAverageMessageData(1000, 5, 10.0, 20.0, 30.0, 40.0)
    )
    default = NamespaceBundleStats.new_default()
    t = TimeAverageBrokerData.from_bundles(["a", "missing"], {"a": a}, default)
    assert t.short_term_msg_throughput_in == 1.0 + 50000.0
    assert t.short_term_msg_rate_out == 4.0 + 50.0
    assert t.long_term_msg_rate_in == 30.0 + 50.0
    assert t.long_term_msg_throughput_out == 20.0 + 50000.0
    t.reset([], {}, default)
    assert t.to_json() == {k: 0.0 for k in t.to_json()}
    assert (
        time_average_broker_data_from_json(
            TimeAverageBrokerData.from_bundles(["a"], {"a": a}, default).to_json(), "x"
        ).long_term_msg_rate_out
        == 40.0
    )


# ---------------------------------------------------------------------------------------------
# BrokerLoadData (extensible)
# ---------------------------------------------------------------------------------------------


def test_broker_load_data_ema() -> None:
    cfg = LoadBalancerConfig()
    data = BrokerLoadData()
    assert data.weighted_max_ema == 1.0 and data.max_resource_usage == 1.0  # DEFAULT_RESOURCE_USAGE
    hot = SystemResourceUsage(cpu=ResourceUsage(1000, 100), memory=ResourceUsage(100, 100))
    data.update(hot, 10.0, 20.0, 1.0, 2.0, 3, 4, cfg, now_ms=1000)
    # first update: the weighted max itself, no clamp at 1.0 (1000% cpu -> 10.0)
    assert data.weighted_max_ema == 10.0
    assert data.max_resource_usage == 10.0  # memory skipped even though it is 100%
    assert data.msg_throughput_ema == 30.0
    assert (data.updated_at, data.bundle_count, data.topics) == (1000, 3, 4)
    cool = SystemResourceUsage(cpu=ResourceUsage(50, 100))
    data.update(cool, 0.0, 0.0, 0.0, 0.0, 3, 4, cfg, now_ms=2000)
    assert data.weighted_max_ema == 10.0 * 0.9 + (1 - 0.9) * 0.5
    assert data.msg_throughput_ema == 30.0 * 0.9
    assert data.max_resource_usage == 0.5


def test_broker_load_data_memory_weight_applies_to_weighted_max() -> None:
    cfg = LoadBalancerConfig.from_mapping({"loadBalancerMemoryResourceWeight": 1.0})
    data = BrokerLoadData()
    data.update(SystemResourceUsage(memory=ResourceUsage(90, 100)), 0, 0, 0, 0, 0, 0, cfg, now_ms=1)
    assert data.weighted_max_ema == 0.9
    assert data.max_resource_usage == 0.0


def test_broker_load_data_json() -> None:
    doc = {
        "cpu": {"usage": 50, "limit": 100},
        "bandwidthIn": {"usage": 10, "limit": 100},
        "bandwidthOut": {"usage": 70, "limit": 100},
        "msgThroughputIn": 5.0,
        "msgThroughputOut": 6.0,
        "msgRateIn": 1.0,
        "msgRateOut": 2.0,
        "bundleCount": 3,
        "weightedMaxEMA": 0.42,
        "updatedAt": 123,
    }
    data = broker_load_data_from_json(doc, "brokerLoadData.b1")
    assert data.max_resource_usage == 0.699999988079071  # float32(70.0) / 100 in float32
    assert data.msg_throughput_ema == 11.0
    assert data.weighted_max_ema == 0.42
    assert broker_load_data_from_json(data.to_json(), "x") == data
    bad = dict(doc)
    del bad["weightedMaxEMA"]
    with pytest.raises(ScenarioError) as info:
        broker_load_data_from_json(bad, "brokerLoadData.b1")
    assert info.value.field == "brokerLoadData.b1.weightedMaxEMA"
