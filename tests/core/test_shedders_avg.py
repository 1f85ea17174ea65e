"""AvgShedder: Pulsar's AvgShedderTest cases ported (hit counts, pairs, planned destinations), the
bundle-name keyed, attempt-scoped planned destinations of PR #26246, and its own placement."""

from __future__ import annotations

import random

from pulsar_rebalance.core.decision import Label, Reason
from pulsar_rebalance.core.pulsar.config import LoadBalancerConfig
from pulsar_rebalance.core.pulsar.load import BundleData, LocalBrokerData, ResourceUsage, TimeAverageMessageData
from pulsar_rebalance.core.pulsar.shedders import SHEDDERS, avg_shedder
from pulsar_rebalance.core.pulsar.shedders.base import ModularInput
from pulsar_rebalance.core.pulsar.state import StrategyState

ZERO = ResourceUsage(0, 0)


def broker(cpu: float, rate: float, bundles=()) -> LocalBrokerData:
    return LocalBrokerData(
        cpu=ResourceUsage(cpu, 100),
        bandwidth_in=ZERO,
        bandwidth_out=ZERO,
        msg_rate_in=rate,
        msg_rate_out=rate,
        bundles=tuple(bundles),
    )


def bundle(rate_in: float, rate_out: float, num_samples: int = 0) -> BundleData:
    # AvgShedderTest gave every bundle its own numSamples so the BundleData values differed; since
    # PR #26246 (keyed by bundle name) the tests pass with identical data too - see the equal-data test
    return BundleData(
        TimeAverageMessageData(10, num_samples, 0, 0, rate_in, rate_out), TimeAverageMessageData(1000, 0, 0, 0, 0, 0), 0
    )


SHEDDER = SHEDDERS["AvgShedder"]


def cycle(inp: ModularInput, conf: LoadBalancerConfig, state: StrategyState):
    return SHEDDER.find_bundles_for_unloading(inp, conf, state)


def _three_brokers(cpu1: float, cpu2: float) -> ModularInput:
    names = [f"bundle-{i}" for i in range(11)]
    bundles = {n: bundle(450, 450, i) for i, n in enumerate(names)}
    brokers = {"broker1": broker(cpu1, 10000, names), "broker2": broker(cpu2, 1000), "broker3": broker(50, 5000)}
    return ModularInput(brokers, bundles)


def _placed(state: StrategyState, inp: ModularInput, bundle_name: str) -> str | None:
    placement, _ = avg_shedder.select_broker(
        bundle=bundle_name, candidates=list(inp.brokers), state=state, rng=random.Random(0)
    )
    return placement.broker


def test_hit_high_threshold() -> None:
    conf = LoadBalancerConfig.from_mapping(
        {
            "maxUnloadPercentage": 0.5,
            "loadBalancerAvgShedderHighThreshold": 40,
            "loadBalancerAvgShedderHitCountHighThreshold": 2,
        }
    )
    inp = _three_brokers(80, 30)
    first, state = cycle(inp, conf, StrategyState())
    assert first.unloads == () and first.reason is Reason.HIT_COUNT
    second, state = cycle(inp, conf, state)
    # (20000 - 2000) * 0.5 = 9000 msg/s = 10 bundles of 900
    assert len(second.unloads) == 10
    assert {u.broker for u in second.unloads} == {"broker1"}
    assert {u.destination for u in second.unloads} == {"broker2"}
    assert all(_placed(state, inp, u.bundle) == "broker2" for u in second.unloads)


def test_hit_low_threshold() -> None:
    conf = LoadBalancerConfig.from_mapping(
        {
            "maxUnloadPercentage": 0.5,
            "loadBalancerAvgShedderLowThreshold": 20,
            "loadBalancerAvgShedderHitCountLowThreshold": 6,
        }
    )
    inp = _three_brokers(60, 40)
    state = StrategyState()
    for _ in range(5):
        decision, state = cycle(inp, conf, state)
        assert decision.unloads == ()
    decision, state = cycle(inp, conf, state)
    assert len(decision.unloads) == 10
    assert {u.broker for u in decision.unloads} == {"broker1"}
    assert all(_placed(state, inp, u.bundle) == "broker2" for u in decision.unloads)


def test_shedding_multiple_pairs() -> None:
    conf = LoadBalancerConfig.from_mapping(
        {
            "maxUnloadPercentage": 0.5,
            "loadBalancerAvgShedderHighThreshold": 40,
            "loadBalancerAvgShedderHitCountHighThreshold": 2,
        }
    )
    b1 = [f"bundle1-{i}" for i in range(11)]
    b3 = [f"bundle3-{i}" for i in range(11)]
    # PR #26246's version of this test drops the per-bundle numSamples: identical data, distinct names
    bundles = {n: bundle(450, 450) for n in b1} | {n: bundle(450, 450) for n in b3}
    brokers = {
        "broker1": broker(80, 10000, b1),
        "broker2": broker(30, 1000),
        "broker3": broker(75, 10000, b3),
        "broker4": broker(35, 1000),
    }
    inp = ModularInput(brokers, bundles)
    first, state = cycle(inp, conf, StrategyState())
    assert first.unloads == ()
    second, state = cycle(inp, conf, state)
    assert len(second.unloads) == 20
    assert sum(1 for u in second.unloads if u.broker == "broker1") == 10
    assert sum(1 for u in second.unloads if u.broker == "broker3") == 10
    for u in second.unloads:
        expected = "broker2" if u.bundle.startswith("bundle1-") else "broker4"
        assert u.destination == expected and _placed(state, inp, u.bundle) == expected


def test_no_pair_clears_hit_counts() -> None:
    conf = LoadBalancerConfig()
    state = StrategyState(avg_hit_high={"a": 1}, avg_hit_low={"a": 3, "b": 2})
    inp = ModularInput({"a": broker(50, 1), "b": broker(55, 1)}, {})
    decision, new_state = cycle(inp, conf, state)
    assert decision.label is Label.SKIP and decision.reason is Reason.BALANCED
    assert dict(new_state.avg_hit_high) == {} and dict(new_state.avg_hit_low) == {}


def test_equal_bundle_data_keep_their_own_planned_destinations() -> None:
    # Before PR #26246 bundleBrokerMap was keyed by BundleData value: p1 and q1 (equal data) shared one
    # entry and both went to cold2. Keyed by bundle name, each keeps its pair's low broker.
    conf = LoadBalancerConfig.from_mapping(
        {"maxUnloadPercentage": 0.5, "loadBalancerAvgShedderHitCountHighThreshold": 1}
    )
    same = bundle(450, 450, 5)
    bundles = {"p1": same, "p2": bundle(450, 450, 6), "q1": bundle(450, 450, 5), "q2": bundle(450, 450, 7)}
    brokers = {
        "hot1": broker(90, 2000, ["p1", "p2"]),
        "cold1": broker(10, 500),
        "hot2": broker(85, 2000, ["q1", "q2"]),
        "cold2": broker(20, 500),
    }
    inp = ModularInput(brokers, bundles)
    decision, state = cycle(inp, conf, StrategyState())
    by_bundle = {u.bundle: u.destination for u in decision.unloads}
    # each pair moves (4000 - 1000) * 0.5 = 1500 msg/s: one 900 msg/s bundle each, p1 and q1.
    assert by_bundle == {"p1": "cold1", "q1": "cold2"}
    assert {b: e.broker for b, e in state.avg_bundle_broker.items()} == {"p1": "cold1", "q1": "cold2"}
    assert _placed(state, inp, "p1") == "cold1" and _placed(state, inp, "q1") == "cold2"


def test_planning_starts_from_an_empty_plan() -> None:
    # the map is cleared when planning starts: a plan left in the state does not survive a cycle
    conf = LoadBalancerConfig()
    old = StrategyState(avg_bundle_broker={"x": avg_shedder.AvgShedderBinding("x", "b")})
    _, state = cycle(ModularInput({"a": broker(50, 1), "b": broker(55, 1)}, {}), conf, old)
    assert dict(state.avg_bundle_broker) == {}


def test_unplanned_bundle_gets_a_seeded_random_broker_not_remembered() -> None:
    state = StrategyState()
    first, state2 = avg_shedder.select_broker(
        bundle="t/ns/0x00000000_0xffffffff", candidates=["b3", "b1", "b2"], state=state, rng=random.Random(7)
    )
    assert first.tied == ("b1", "b2", "b3") and first.broker in first.tied
    assert state2 is state and dict(state2.avg_bundle_broker) == {}


def test_overload_retry_bypasses_the_planned_broker() -> None:
    planned = StrategyState(avg_bundle_broker={"t/ns/a": avg_shedder.AvgShedderBinding("t/ns/a", "b1")})
    hit, _ = avg_shedder.select_broker(bundle="t/ns/a", candidates=["b1", "b2"], state=planned, rng=random.Random(0))
    assert hit.broker == "b1" and hit.tied == ("b1",)
    picks = {
        avg_shedder.select_broker(
            bundle="t/ns/a", candidates=["b1", "b2"], state=planned, rng=random.Random(seed), bypass_planned=True
        )[0].broker
        for seed in range(20)
    }
    assert picks == {"b1", "b2"}  # a draw among all candidates, not the plan
