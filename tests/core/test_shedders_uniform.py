"""UniformLoadShedder: Pulsar's UniformLoadShedderTest cases ported, plus Java int arithmetic."""

from __future__ import annotations

from pulsar_rebalance.core.decision import Reason
from pulsar_rebalance.core.pulsar.config import LoadBalancerConfig
from pulsar_rebalance.core.pulsar.load import BundleData, LocalBrokerData, ResourceUsage, TimeAverageMessageData
from pulsar_rebalance.core.pulsar.shedders import SHEDDERS
from pulsar_rebalance.core.pulsar.shedders.base import ModularInput, java_int, java_int_add
from pulsar_rebalance.core.pulsar.state import StrategyState

MB = 1024 * 1024
ZERO = ResourceUsage(0, 0)


def broker(*, rate_in=0.0, rate_out=0.0, thr_in=0.0, thr_out=0.0, bundles=()) -> LocalBrokerData:
    return LocalBrokerData(
        cpu=ZERO,
        bandwidth_in=ZERO,
        bandwidth_out=ZERO,
        msg_rate_in=rate_in,
        msg_rate_out=rate_out,
        msg_throughput_in=thr_in,
        msg_throughput_out=thr_out,
        bundles=tuple(bundles),
    )


def bundle(*, rate_in=0.0, thr_in=0.0, thr_out=0.0) -> BundleData:
    return BundleData(
        TimeAverageMessageData(10, 10, thr_in, thr_out, rate_in, 0.0),
        TimeAverageMessageData(1000, 10, thr_in, thr_out, rate_in, 0.0),
        1,
    )


def run(inp: ModularInput, config: dict | None = None, name: str = "UniformLoadShedder"):
    conf = LoadBalancerConfig.from_mapping(config or {})
    decision, _ = SHEDDERS[name].find_bundles_for_unloading(inp, conf, StrategyState())
    return decision


def test_max_unload_bundle_num_per_shedding() -> None:
    names = [f"bundle-{i}" for i in range(1, 21)]
    bundles = {n: bundle(thr_in=MB, thr_out=MB) for n in names}
    brokers = {"broker-1": broker(thr_in=20 * MB, thr_out=20 * MB, bundles=names), "broker2": broker()}
    decision = run(ModularInput(brokers, bundles), {"maxUnloadBundleNumPerShedding": 2})
    assert len(decision.unloads) == 2


def test_broker_with_multiple_bundles() -> None:
    names = [f"bundle-{i}" for i in range(1, 11)]
    bundles = {f"bundle-{i}": bundle(thr_in=i * MB, thr_out=i * MB) for i in range(1, 11)}
    brokers = {"broker-1": broker(thr_in=55 * MB, thr_out=55 * MB, bundles=names), "broker2": broker()}
    assert run(ModularInput(brokers, bundles)).unloads != ()


def _five_brokers() -> tuple[dict[str, LocalBrokerData], dict[str, BundleData]]:
    rates = [50000, 60000, 70000, 10000, 20000]
    thrs = [50 * MB, 60 * MB, 70 * MB, 80 * MB, 10 * MB]
    brokers: dict[str, LocalBrokerData] = {}
    bundles: dict[str, BundleData] = {}
    for b in range(5):
        names = [f"broker-{b}-bundle-{i}" for i in range(5)]
        for n in names:
            bundles[n] = bundle(rate_in=rates[b] / 5, thr_in=thrs[b] / 5)
        brokers[f"broker{b}"] = broker(rate_in=rates[b], thr_in=thrs[b], bundles=names)
    return brokers, bundles


def test_overload_broker_select() -> None:
    brokers, bundles = _five_brokers()
    base = {"maxUnloadBundleNumPerShedding": 1, "maxUnloadPercentage": 0.5}
    rate_only = run(
        ModularInput(brokers, bundles),
        {
            **base,
            "loadBalancerMsgRateDifferenceShedderThreshold": 50,
            "loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold": 0,
        },
    )
    assert len(rate_only.unloads) == 1 and rate_only.unloads[0].broker == "broker2"
    thr_only = run(
        ModularInput(brokers, bundles),
        {
            **base,
            "loadBalancerMsgRateDifferenceShedderThreshold": 0,
            "loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold": 2,
        },
    )
    assert len(thr_only.unloads) == 1 and thr_only.unloads[0].broker == "broker3"
    both = run(
        ModularInput(brokers, bundles),
        {
            **base,
            "loadBalancerMsgRateDifferenceShedderThreshold": 50,
            "loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold": 2,
        },
    )
    assert len(both.unloads) == 1 and both.unloads[0].broker == "broker2"  # msg rate takes precedence


def _non_traffic_case():

    bundles = {"broker-0-bundle-0": bundle(rate_in=10_000, thr_in=10 * MB)}
    rates = [60_000, 20_000, 20_000, 0, 0]
    thrs = [60 * MB, 20 * MB, 20 * MB, 0, 0]
    names = []
    for i in range(5):
        names.append(f"broker-1-bundle-{i}")
        bundles[f"broker-1-bundle-{i}"] = bundle(rate_in=rates[i], thr_in=thrs[i])
    brokers = {
        "broker0": broker(rate_in=10_000, thr_in=10 * MB, bundles=["broker-0-bundle-0"]),
        "broker1": broker(rate_in=100_000, thr_in=100 * MB, bundles=names),
    }
    base = {"maxUnloadBundleNumPerShedding": 5, "maxUnloadPercentage": 0.5}
    by_rate = {
        **base,
        "loadBalancerMsgRateDifferenceShedderThreshold": 50,
        "loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold": 0,
    }
    by_thr = {
        **base,
        "loadBalancerMsgRateDifferenceShedderThreshold": 0,
        "loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold": 2,
    }
    return ModularInput(brokers, bundles), by_rate, by_thr


def test_filter_out_non_traffic_bundles_for_unloading_opt_in() -> None:
    # the test of the unmerged PR #21214, run against the opt-in variant that applies its filter
    inp, by_rate, by_thr = _non_traffic_case()
    for conf in (by_rate, by_thr):
        out = run(inp, conf, "UniformLoadShedderSkipZeroTraffic")
        assert sorted(u.bundle for u in out.unloads) == ["broker-1-bundle-1", "broker-1-bundle-2"]


def test_newest_pulsar_selects_zero_traffic_bundles() -> None:
    # newest UniformLoadShedder: no traffic filter, a 0 msg/s bundle always "fits" what is required
    inp, by_rate, by_thr = _non_traffic_case()
    for conf in (by_rate, by_thr):
        out = run(inp, conf)
        assert sorted(u.bundle for u in out.unloads) == [
            "broker-1-bundle-1",
            "broker-1-bundle-2",
            "broker-1-bundle-3",
            "broker-1-bundle-4",
        ]


def test_balanced_cluster_is_skipped_with_the_numbers() -> None:
    brokers = {
        "a": broker(rate_in=1000, thr_in=MB, bundles=["x", "y"]),
        "b": broker(rate_in=1100, thr_in=MB, bundles=["z"]),
    }
    decision = run(ModularInput(brokers, {}))
    assert decision.reason is Reason.BALANCED
    assert decision.stats["msgRate"]["differencePercentage"] == 10.0


def test_required_below_minimum_is_skipped() -> None:
    # gap 1500 msg/s * 0.2 = 300 < minUnloadMessage 1000
    brokers = {"a": broker(rate_in=1000, bundles=["x", "y"]), "b": broker(rate_in=2500, bundles=["z", "w"])}
    decision = run(ModularInput(brokers, {n: bundle(rate_in=100) for n in "xyzw"}))
    assert decision.unloads == () and decision.stats["required"] == 300


def test_java_int_semantics() -> None:
    assert java_int(2.9) == 2 and java_int(-2.9) == -2
    assert java_int(3e9) == 2**31 - 1 and java_int(-3e9) == -(2**31)
    assert java_int(float("nan")) == 0
    assert java_int_add(2**31 - 1, 1) == -(2**31)


def test_required_throughput_saturates_at_int_max() -> None:
    # (int)((max - min) * pct) saturates at 2^31-1 bytes/s (~2 GiB/s): a 20 GiB/s gap only asks for 2 GiB/s
    names = [f"big-{i}" for i in range(4)]
    bundles = {n: bundle(thr_in=1.5 * 1024**3) for n in names}
    brokers = {"hot": broker(thr_in=100 * 1024**3, bundles=names), "cold": broker(thr_in=1.0)}
    decision = run(ModularInput(brokers, bundles), {"loadBalancerMsgRateDifferenceShedderThreshold": 0})
    assert decision.stats["required"] == 2**31 - 1
    assert [u.bundle for u in decision.unloads] == ["big-0"]  # 1.5 GiB fits once, then 0.5 GiB remains
