"""OverloadShedder: Pulsar's OverloadShedderTest cases ported, plus the threshold edge, the weighted
(PIP-358) usage versus the opt-in unweighted variant, and the at-least-one-bundle rule."""

from __future__ import annotations

from pulsar_rebalance.core.decision import Label, Reason
from pulsar_rebalance.core.pulsar.config import LoadBalancerConfig
from pulsar_rebalance.core.pulsar.load import BundleData, LocalBrokerData, ResourceUsage, TimeAverageMessageData
from pulsar_rebalance.core.pulsar.shedders import SHEDDERS
from pulsar_rebalance.core.pulsar.shedders.base import ModularInput
from pulsar_rebalance.core.pulsar.state import StrategyState

MB = 1024 * 1024
ZERO = ResourceUsage(0, 0)
CONF = LoadBalancerConfig.from_mapping({"loadBalancerBrokerOverloadedThresholdPercentage": 85})


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
    return BundleData(
        TimeAverageMessageData(10, 10, thr_in, thr_out, 0, 0),
        TimeAverageMessageData(1000, 10, thr_in, thr_out, 0, 0),
        1,
    )


def run(inp: ModularInput, config: LoadBalancerConfig = CONF, name: str = "OverloadShedder"):
    decision, state = SHEDDERS[name].find_bundles_for_unloading(inp, config, StrategyState())
    assert state == StrategyState()  # OverloadShedder keeps no history
    return decision


def test_no_brokers() -> None:
    assert run(ModularInput({}, {})).unloads == ()


def test_brokers_with_no_bundles() -> None:
    b1 = broker(bw_in=ResourceUsage(999, 1000), bw_out=ResourceUsage(999, 1000))
    decision = run(ModularInput({"broker-1": b1}, {}))
    assert decision.unloads == ()
    assert decision.reason is Reason.NO_BUNDLES


def test_broker_not_overloaded() -> None:
    b1 = broker(bw_in=ResourceUsage(500, 1000), bw_out=ResourceUsage(500, 1000), bundles=["bundle-1"])
    decision = run(ModularInput({"broker-1": b1}, {"bundle-1": bundle(1000, 1000)}))
    assert decision.unloads == () and decision.reason is Reason.BALANCED


def test_broker_with_single_bundle() -> None:
    b1 = broker(bw_in=ResourceUsage(999, 1000), bw_out=ResourceUsage(999, 1000), bundles=["bundle-1"])
    assert run(ModularInput({"broker-1": b1}, {"bundle-1": bundle(1000, 1000)})).unloads == ()


def _cluster(with_other: bool = True) -> tuple[dict[str, LocalBrokerData], dict[str, BundleData]]:
    bundles: dict[str, BundleData] = {}
    mine, others = [], []
    total = 0.0
    for i in range(1, 11):
        data = bundle(i * MB, i * MB)
        bundles[f"bundle-{i}"] = data
        mine.append(f"bundle-{i}")
        if with_other:
            bundles[f"another-broker-bundle-{10 + i}"] = data
            others.append(f"another-broker-bundle-{10 + i}")
        total += i * MB
    brokers = {
        "broker-1": broker(
            bw_in=ResourceUsage(999, 1000), bw_out=ResourceUsage(999, 1000), thr_in=total, thr_out=total, bundles=mine
        )
    }
    if with_other:
        brokers["another-broker"] = broker(bundles=others)
    return brokers, bundles


def test_broker_with_multiple_bundles() -> None:
    # 99.9% -> offload (0.999 - 0.85 + 0.05) * 110 MiB/s = 21.9 MiB/s: 20 + 18 MiB/s
    brokers, bundles = _cluster()
    decision = run(ModularInput(brokers, bundles))
    assert [u.bundle for u in decision.unloads if u.broker == "broker-1"] == ["bundle-10", "bundle-9"]
    assert all(u.broker == "broker-1" for u in decision.unloads)
    assert decision.label is Label.SUCCESS and decision.reason is Reason.OVERLOADED


def test_filter_recently_unloaded() -> None:
    brokers, bundles = _cluster(with_other=False)
    decision = run(ModularInput(brokers, bundles, {"bundle-10": 1, "bundle-9": 1}))
    assert [u.bundle for u in decision.unloads] == ["bundle-8", "bundle-7"]


def test_usage_exactly_at_threshold_counts_as_overloaded() -> None:
    # Pulsar skips only when usage < threshold: 85/100 is overloaded
    brokers = {"a": broker(cpu=ResourceUsage(85, 100), thr_in=10 * MB, bundles=["x", "y"]), "b": broker()}
    bundles = {"x": bundle(1 * MB), "y": bundle(2 * MB)}
    decision = run(ModularInput(brokers, bundles))
    # offload (0.85 - 0.85 + 0.05) * 10 MiB/s = 0.5 MiB/s: the largest bundle alone covers it
    assert [u.bundle for u in decision.unloads] == ["y"]


def test_at_least_one_bundle_even_when_offload_target_is_zero() -> None:
    brokers = {"a": broker(cpu=ResourceUsage(99, 100), thr_in=0.0, bundles=["x", "y"]), "b": broker()}
    decision = run(ModularInput(brokers, {"x": bundle(0), "y": bundle(0)}))
    assert [u.bundle for u in decision.unloads] == ["x"]


def test_memory_counts_only_in_the_unweighted_variant() -> None:
    # JVM heap at 95%: ignored by the PIP-358 weighted usage (memory weight 0), counted by the old one
    brokers = {"a": broker(memory=ResourceUsage(95, 100), thr_in=10 * MB, bundles=["x", "y"]), "b": broker()}
    bundles = {"x": bundle(1 * MB), "y": bundle(2 * MB)}
    assert run(ModularInput(brokers, bundles)).unloads == ()
    assert [u.bundle for u in run(ModularInput(brokers, bundles), name="OverloadShedderUnweighted").unloads] == ["y"]
