"""ThresholdShedder: Pulsar's ThresholdShedderTest cases ported (same inputs, same asserted results),
plus the EMA history, the minimum-throughput floor and the lower-boundary double-EMA quirk."""

from __future__ import annotations

import pytest

from pulsar_rebalance.core.decision import Label, Reason
from pulsar_rebalance.core.pulsar.config import LoadBalancerConfig
from pulsar_rebalance.core.pulsar.load import BundleData, LocalBrokerData, ResourceUsage, TimeAverageMessageData
from pulsar_rebalance.core.pulsar.shedders import SHEDDERS
from pulsar_rebalance.core.pulsar.shedders.base import ModularInput
from pulsar_rebalance.core.pulsar.state import StrategyState

MB = 1024 * 1024
ZERO = ResourceUsage(0, 0)


def broker(*, cpu=ZERO, memory=ZERO, bw_in=ZERO, bw_out=ZERO, thr_in=0.0, thr_out=0.0, bundles=()) -> LocalBrokerData:
    return LocalBrokerData(
        cpu=cpu,
        memory=memory,
        bandwidth_in=bw_in,
        bandwidth_out=bw_out,
        msg_throughput_in=thr_in,
        msg_throughput_out=thr_out,
        bundles=tuple(bundles),
    )


def bundle(thr_in: float = 0.0, thr_out: float = 0.0) -> BundleData:
    short = TimeAverageMessageData(10, 10, thr_in, thr_out, 0.0, 0.0)
    return BundleData(short, TimeAverageMessageData(1000, 10, thr_in, thr_out, 0.0, 0.0), 1)


def run(
    inp: ModularInput,
    config: LoadBalancerConfig | None = None,
    state: StrategyState | None = None,
    name: str = "ThresholdShedder",
):
    return SHEDDERS[name].find_bundles_for_unloading(inp, config or LoadBalancerConfig(), state or StrategyState())


def unloaded(decision, broker_id: str) -> list[str]:
    return [u.bundle for u in decision.unloads if u.broker == broker_id]


def test_no_brokers_skips_with_reason_no_brokers() -> None:
    decision, _ = run(ModularInput({}, {}))
    assert decision.label is Label.SKIP and decision.reason is Reason.NO_BROKERS
    assert decision.unloads == ()


def test_brokers_with_no_bundles_are_not_shed() -> None:
    b1 = broker(bw_in=ResourceUsage(999, 1000), bw_out=ResourceUsage(999, 1000))
    decision, _ = run(ModularInput({"broker-1": b1}, {}))
    assert decision.unloads == ()


def test_broker_not_reaching_threshold_is_not_shed() -> None:
    b1 = broker(bw_in=ResourceUsage(500, 1000), bw_out=ResourceUsage(500, 1000), bundles=["bundle-1"])
    decision, _ = run(ModularInput({"broker-1": b1}, {"bundle-1": bundle(1000, 1000)}))
    assert decision.unloads == ()
    assert decision.label is Label.SKIP and decision.reason is Reason.BALANCED


def test_broker_reaching_threshold_with_cpu_above_100_percent_is_shed() -> None:
    # ThresholdShedderTest.testBrokerReachThreshold: cpu 140% -> usage 1.4 (no clamp in the newest code)
    b1 = broker(
        cpu=ResourceUsage(140, 100),
        memory=ResourceUsage(10, 100),
        bw_in=ResourceUsage(500, 1000),
        bw_out=ResourceUsage(500, 1000),
        bundles=["bundle-1", "bundle-2"],
        thr_in=1.7976931348623157e308,
    )
    b2 = broker(
        cpu=ResourceUsage(10, 100),
        memory=ResourceUsage(10, 100),
        bw_in=ResourceUsage(500, 1000),
        bw_out=ResourceUsage(500, 1000),
        bundles=["bundle-3", "bundle-4"],
    )
    decision, _ = run(ModularInput({"broker-2": b1, "broker-3": b2}, {"bundle-2": bundle(1000, 1000)}))
    assert [(u.broker, u.bundle) for u in decision.unloads] == [("broker-2", "bundle-2")]


def test_broker_with_single_bundle_is_never_shed() -> None:
    b1 = broker(bw_in=ResourceUsage(999, 1000), bw_out=ResourceUsage(999, 1000), bundles=["bundle-1"])
    decision, _ = run(ModularInput({"broker-1": b1}, {"bundle-1": bundle(1000, 1000)}))
    assert decision.unloads == ()


def _ten_bundle_cluster() -> tuple[dict[str, LocalBrokerData], dict[str, BundleData]]:
    """ThresholdShedderTest's broker-1 (99.9% bandwidth, 10 bundles of i MiB/s each way) + idle broker2."""
    bundles: dict[str, BundleData] = {}
    b1_bundles, b2_bundles = [], []
    total = 0.0
    for i in range(1, 11):
        data = bundle(i * MB, i * MB)
        bundles[f"bundle-{i}"] = data
        b1_bundles.append(f"bundle-{i}")
        bundles[f"broker2-bundle-{10 + i}"] = data  # belongs to broker2: never selected for broker-1
        b2_bundles.append(f"broker2-bundle-{10 + i}")
        total += i * MB
    b1 = broker(
        bw_in=ResourceUsage(999, 1000), bw_out=ResourceUsage(999, 1000), thr_in=total, thr_out=total, bundles=b1_bundles
    )
    return {"broker-1": b1, "broker2": broker(bundles=b2_bundles)}, bundles


def test_broker_with_multiple_bundles_sheds_largest_first() -> None:
    brokers, bundles = _ten_bundle_cluster()
    decision, _ = run(ModularInput(brokers, bundles))
    assert unloaded(decision, "broker-1") == ["bundle-10", "bundle-9", "bundle-8"]
    assert unloaded(decision, "broker2") == []
    assert decision.label is Label.SUCCESS and decision.reason is Reason.OVERLOADED
    assert decision.unloads[0].reason.startswith("Overloaded: broker-1 usage 0.9990")


def test_recently_unloaded_bundles_are_filtered() -> None:
    brokers, bundles = _ten_bundle_cluster()
    decision, _ = run(ModularInput(brokers, bundles, {"bundle-10": 1, "bundle-9": 1}))
    assert unloaded(decision, "broker-1") == ["bundle-8", "bundle-7", "bundle-6", "bundle-5"]


def _eleven_brokers(low_node: int, low_load: int, many_bundles: int | None = None, high: int = 80):
    brokers: dict[str, LocalBrokerData] = {}
    bundles: dict[str, BundleData] = {}
    thr = 100 * MB
    for i in range(11):
        n = 10 if many_bundles is None or i == many_bundles else 1
        names = []
        if many_bundles is None:
            names += [f"bundle-{j}" for j in range(n)]
        for j in range(n):
            name = f"broker-{i}-bundle-{j}"
            bundles[name] = bundle(0 if i == low_node else thr, 0 if i == low_node else thr)
            names.append(name)
        load = low_load if i == low_node else high
        brokers[f"broker-{i}"] = broker(
            bw_in=ResourceUsage(load, 100),
            bw_out=ResourceUsage(load, 100),
            thr_in=0 if i == low_node else thr,
            thr_out=0 if i == low_node else thr,
            bundles=names,
        )
    return brokers, bundles


def test_lower_boundary_shedding_only_when_enabled() -> None:
    # testLowerBoundaryShedding: 10 brokers at 80%, one at 0% -> avg 72.7%, threshold 82.7%: no plain shedding
    brokers, bundles = _eleven_brokers(low_node=10, low_load=0)
    decision, _ = run(ModularInput(brokers, bundles))
    assert decision.unloads == ()
    enabled = LoadBalancerConfig.from_mapping({"lowerBoundarySheddingEnabled": True})
    decision, _ = run(ModularInput(brokers, bundles), enabled)
    assert decision.unloads
    assert decision.reason is Reason.UNDERLOADED
    # ties among the 80% brokers go to the first in input order (Pulsar: HashMap order)
    assert {u.broker for u in decision.unloads} == {"broker-0"}


def test_lower_boundary_shedding_needs_a_broker_below_the_bound() -> None:
    # testLowerBoundarySheddingNoBrokerToOffload: everyone at 80%
    brokers, bundles = _eleven_brokers(low_node=-1, low_load=0)
    enabled = LoadBalancerConfig.from_mapping({"lowerBoundarySheddingEnabled": True})
    decision, _ = run(ModularInput(brokers, bundles), enabled)
    assert decision.unloads == ()


def test_lower_boundary_shedding_skips_single_bundle_brokers() -> None:
    # testLowerBoundarySheddingBrokerWithOneBundle: only broker-3 has 10 bundles, broker-5 is idle
    brokers, bundles = _eleven_brokers(low_node=5, low_load=0, many_bundles=3)
    decision, _ = run(ModularInput(brokers, bundles))
    assert decision.unloads == ()
    enabled = LoadBalancerConfig.from_mapping({"lowerBoundarySheddingEnabled": True})
    decision, _ = run(ModularInput(brokers, bundles), enabled)
    assert len(decision.unloads) == 1 and decision.unloads[0].broker == "broker-3"


def test_history_is_an_ema_carried_in_state() -> None:
    brokers, bundles = _ten_bundle_cluster()
    state = StrategyState(threshold_avg_usage={"broker-1": 0.5, "broker2": 0.0})
    decision, new_state = run(ModularInput(brokers, bundles), state=state)
    usage = ResourceUsage(999, 1000).percent_usage() / 100  # 0.99900001525... (float32 percentUsage)
    assert new_state.threshold_avg_usage["broker-1"] == 0.5 * 0.9 + (1 - 0.9) * usage
    assert new_state.threshold_avg_usage["broker-1"] == pytest.approx(0.5499, abs=1e-6)
    # history dominates: 0.5499 >= avg 0.27495 + 0.1 -> overloaded, but only 22.5% (not 45%) is offloaded
    assert state.threshold_avg_usage["broker-1"] == 0.5  # the input state is not modified
    assert unloaded(decision, "broker-1") == ["bundle-10", "bundle-9"]


def test_min_throughput_floor_skips_small_offloads() -> None:
    brokers = {
        "a": broker(cpu=ResourceUsage(90, 100), thr_in=10 * MB, bundles=["x1", "x2"]),
        "b": broker(cpu=ResourceUsage(10, 100), bundles=["y1"]),
    }
    bundles = {"x1": bundle(6 * MB), "x2": bundle(4 * MB), "y1": bundle(1)}
    decision, _ = run(ModularInput(brokers, bundles))
    # offload = 10 MiB/s * (0.9 - 0.5 - 0.1 + 0.05) = 3.5 MiB/s < 10 MiB/s floor
    assert decision.unloads == ()
    assert decision.stats["brokers"]["a"]["status"] == "overloaded, below min throughput"
    lowered = LoadBalancerConfig.from_mapping({"loadBalancerBundleUnloadMinThroughputThreshold": 1})
    decision, _ = run(ModularInput(brokers, bundles), lowered)
    assert unloaded(decision, "a") == ["x1"]


def test_lower_boundary_applies_the_ema_twice_per_cycle_and_the_variant_once() -> None:
    brokers, bundles = _eleven_brokers(low_node=10, low_load=0)
    enabled = LoadBalancerConfig.from_mapping({"lowerBoundarySheddingEnabled": True})
    history = {f"broker-{i}": 0.5 for i in range(11)}
    _, after = run(ModularInput(brokers, bundles), enabled, StrategyState(threshold_avg_usage=history))
    once = 0.5 * 0.9 + (1 - 0.9) * 0.8
    twice = once * 0.9 + (1 - 0.9) * 0.8
    assert after.threshold_avg_usage["broker-0"] == pytest.approx(twice, abs=0, rel=1e-15)
    _, after1 = run(
        ModularInput(brokers, bundles), enabled, StrategyState(threshold_avg_usage=history), "ThresholdShedderSingleEma"
    )
    assert after1.threshold_avg_usage["broker-0"] == pytest.approx(once, abs=0, rel=1e-15)
