"""What Pulsar's leader executes, one level above the strategy (ModularLoadManagerImpl at apache/pulsar
009a9bf2): doLoadShedding's destination choice and drops, no preallocation at shedding time, excluded
namespaces, the split guard and order, the AvgShedder pairing, the 4-resource overload re-check, and a
state that makes chained one-cycle calls equal one multi-cycle document."""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest

from pulsar_rebalance.core.contract.decide import decide_scenario
from pulsar_rebalance.core.contract.load_json import bundle_data_from_json
from pulsar_rebalance.core.pulsar.config import LoadBalancerConfig
from pulsar_rebalance.core.pulsar.load import LocalBrokerData, ResourceUsage
from pulsar_rebalance.core.pulsar.placement.assignment import ModularPlacementContext, select_broker
from pulsar_rebalance.core.pulsar.state import StrategyState
from pulsar_rebalance.errors import ScenarioError

MB = 1024 * 1024
NOW = 1_700_000_000_000
HALF = ("0x00000000_0x80000000", "0x80000000_0xffffffff")


def stats(rate: float, thr: float = 1 * MB, topics: int = 1) -> dict[str, Any]:
    return {
        "msgRateIn": rate,
        "msgRateOut": rate,
        "msgThroughputIn": thr,
        "msgThroughputOut": thr,
        "consumerCount": 1,
        "producerCount": 1,
        "topics": topics,
        "cacheSize": 0,
    }


def report(cpu: float, last_stats: dict[str, dict[str, Any]], *, memory: float = 1.0) -> dict[str, Any]:
    return {
        "cpu": {"usage": cpu, "limit": 100.0},
        "memory": {"usage": memory, "limit": 100.0},
        "directMemory": {"usage": 1.0, "limit": 100.0},
        "bandwidthIn": {"usage": 1.0, "limit": 100.0},
        "bandwidthOut": {"usage": 1.0, "limit": 100.0},
        "lastUpdate": NOW,
        "lastStats": last_stats,
    }


def three_brokers_two_bundles_each() -> dict[str, Any]:
    """The issue's example: b1 hottest by cpu (80%: above avg + 10%, below the 85% overload
    threshold) but the least loaded by long-term message rate."""
    ranges = [f"0x{i * 0x20000000:08x}_0x{(i + 1) * 0x20000000 if i < 7 else 0xFFFFFFFF:08x}" for i in range(8)]
    b = [f"t/ns/{r}" for r in ranges]
    return {
        "nowMs": NOW,
        "brokers": {
            "b1": report(80, {b[0]: stats(10, 20 * MB), b[1]: stats(10, 10 * MB)}),
            "b2": report(20, {b[2]: stats(500), b[3]: stats(500)}),
            "b3": report(20, {b[4]: stats(400), b[5]: stats(400)}),
        },
    }


def test_destination_is_the_source_drops_the_unload_and_does_not_record_it() -> None:
    out = decide_scenario(
        {
            "shedding": "ThresholdShedder",
            "placement": "LeastLongTermMessageRate",
            "cycles": [three_brokers_two_bundles_each()],
        }
    )
    cycle = out["cycles"][0]
    # the strategy selects b1's biggest bundle ...
    assert [(u["broker"], u["bundle"]) for u in cycle["unloads"]] == [("b1", "t/ns/0x00000000_0x20000000")]
    # ... but selectBroker over all brokers (the source included) picks b1 itself: nothing moves
    assert cycle["executed"]["unloads"] == []
    [dropped] = cycle["executed"]["dropped"]
    assert dropped["dropped"] == "DestinationIsSource" and dropped["broker"] == "b1"
    assert "least long-term msg rate" in dropped["detail"]
    assert out["state"]["recentlyUnloadedBundles"] == {}  # only executed unloads are recorded


def hot_broker_and_three_cold(namespaces: int = 2) -> dict[str, Any]:
    """b1 at 95% cpu with two big bundles of different namespaces; b2 < b4 < b3 by message rate
    (b2 200, b4 240, b3 600 msg/s: one preallocated default bundle, +100 msg/s, puts b2 above b4)."""
    big = {f"t/ns{i}/0x00000000_0xffffffff": stats(10, 30 * MB) for i in range(namespaces)}
    return {
        "nowMs": NOW,
        "brokers": {
            "b1": report(95, {**big, "t/other/0x00000000_0x80000000": stats(10, 1 * MB)}),
            "b2": report(10, {"t/x/0x00000000_0xffffffff": stats(100)}),
            "b3": report(10, {"t/y/0x00000000_0xffffffff": stats(300)}),
            "b4": report(10, {"t/z/0x00000000_0xffffffff": stats(120)}),
        },
    }


def test_no_preallocation_at_shedding_time_two_bundles_go_to_the_same_broker() -> None:
    doc = {
        "shedding": "OverloadShedder",
        "placement": "LeastLongTermMessageRate",
        "config": {"loadBalancerBrokerOverloadedThresholdPercentage": 85},
        "cycles": [hot_broker_and_three_cold()],
    }
    cycle = decide_scenario(doc)["cycles"][0]
    assert len(cycle["unloads"]) >= 1
    assert {u["destination"] for u in cycle["executed"]["unloads"]} == {"b2"}
    # ThresholdShedder sheds two bundles from b1 here: both to b2 (selectBroker does not preallocate)
    doc2 = {
        "shedding": "ThresholdShedder",
        "placement": "LeastLongTermMessageRate",
        "config": {"loadBalancerBrokerThresholdShedderPercentage": 5},
        "cycles": [hot_broker_and_three_cold()],
    }
    cycle2 = decide_scenario(doc2)["cycles"][0]
    assert len(cycle2["executed"]["unloads"]) == 2
    assert [u["destination"] for u in cycle2["executed"]["unloads"]] == ["b2", "b2"]
    # a lookup does preallocate: two `place` requests land on different brokers
    doc2["cycles"][0]["place"] = ["t/p/0x00000000_0xffffffff", "t/q/0x00000000_0xffffffff"]
    placed = decide_scenario(doc2)["cycles"][0]["placements"]
    assert placed["t/p/0x00000000_0xffffffff"]["broker"] != placed["t/q/0x00000000_0xffffffff"]["broker"]


def test_excluded_namespaces_are_not_unloaded_by_the_modular_load_manager() -> None:
    doc = {
        "shedding": "ThresholdShedder",
        "placement": "LeastLongTermMessageRate",
        "config": {
            "loadBalancerBrokerThresholdShedderPercentage": 5,
            "loadBalancerSheddingExcludedNamespaces": "t/ns0",
        },
        "cycles": [hot_broker_and_three_cold()],
    }
    cycle = decide_scenario(doc)["cycles"][0]
    assert "t/ns0/0x00000000_0xffffffff" in [u["bundle"] for u in cycle["unloads"]]  # the strategy still selects it
    dropped = {d["bundle"]: d["dropped"] for d in cycle["executed"]["dropped"]}
    assert dropped == {"t/ns0/0x00000000_0xffffffff": "ExcludedNamespace"}
    assert "t/ns0/0x00000000_0xffffffff" not in [u["bundle"] for u in cycle["executed"]["unloads"]]


def test_assign_destinations_reports_the_executed_destination_on_the_strategy_level() -> None:
    doc = {
        "shedding": "ThresholdShedder",
        "placement": "LeastLongTermMessageRate",
        "assignDestinations": True,
        "config": {"loadBalancerBrokerThresholdShedderPercentage": 5},
        "cycles": [hot_broker_and_three_cold()],
    }
    cycle = decide_scenario(doc)["cycles"][0]
    assert cycle["unloads"] == cycle["executed"]["unloads"]


def hot_bundle_cycle(brokers: int) -> dict[str, Any]:
    hot = {
        "t/ns/0x00000000_0x80000000": stats(20_000, 30 * MB, topics=5),
        "t/ns/0x80000000_0xffffffff": stats(10, 10 * MB),
    }
    c = {
        "nowMs": NOW,
        "brokers": {"b1": report(90, hot)},
        "bundleData": {
            b: {
                "shortTermData": {
                    "maxSamples": 10,
                    "numSamples": 10,
                    "msgRateIn": s["msgRateIn"],
                    "msgRateOut": s["msgRateOut"],
                    "msgThroughputIn": s["msgThroughputIn"],
                    "msgThroughputOut": s["msgThroughputOut"],
                },
                "longTermData": {
                    "maxSamples": 1000,
                    "numSamples": 1000,
                    "msgRateIn": s["msgRateIn"],
                    "msgRateOut": s["msgRateOut"],
                    "msgThroughputIn": s["msgThroughputIn"],
                    "msgThroughputOut": s["msgThroughputOut"],
                },
                "topics": 5,
            }
            for b, s in hot.items()
        },
    }
    for i in range(2, brokers + 1):
        c["brokers"][f"b{i}"] = report(10, {})
    return c


def test_split_guard_one_known_broker_never_splits() -> None:
    one = decide_scenario(
        {"shedding": "ThresholdShedder", "placement": "LeastLongTermMessageRate", "cycles": [hot_bundle_cycle(1)]}
    )["cycles"][0]
    assert one["splits"] == [] and "checkNamespaceBundleSplit does nothing" in one["stats"]["splitNotes"][0]
    two = decide_scenario(
        {"shedding": "ThresholdShedder", "placement": "LeastLongTermMessageRate", "cycles": [hot_bundle_cycle(2)]}
    )["cycles"][0]
    assert [s["bundle"] for s in two["splits"]] == ["t/ns/0x00000000_0x80000000"]
    assert two["splits"][0]["children"] == ["t/ns/0x00000000_0x40000000", "t/ns/0x40000000_0x80000000"]
    assert two["splits"][0]["boundaries"] == ["0x40000000"] and two["splits"][0]["unloadChildren"] is True


def test_a_bundle_split_in_the_cycle_is_not_also_unloaded() -> None:
    # splits run first and drop the parent's BundleData ("make sure the same bundle is not selected
    # again"), so the shedder of the same cycle sheds the other bundle instead
    doc = {"shedding": "ThresholdShedder", "placement": "LeastLongTermMessageRate", "cycles": [hot_bundle_cycle(2)]}
    cycle = decide_scenario(doc)["cycles"][0]
    split = {s["bundle"] for s in cycle["splits"]}
    assert split == {"t/ns/0x00000000_0x80000000"}
    assert all(u["bundle"] not in split for u in cycle["unloads"])
    doc["config"] = {"loadBalancerAutoBundleSplitEnabled": False}
    assert "t/ns/0x00000000_0x80000000" in [u["bundle"] for u in decide_scenario(doc)["cycles"][0]["unloads"]]


def test_avg_shedder_placement_needs_the_avg_shedder_shedder() -> None:
    base = {"cycles": [three_brokers_two_bundles_each()]}
    with pytest.raises(ScenarioError) as err:
        decide_scenario({**base, "shedding": "ThresholdShedder", "placement": "AvgShedder"})
    assert err.value.field == "placement" and "can't work with" in str(err.value)
    with pytest.raises(ScenarioError):
        decide_scenario(
            {**base, "shedding": "ThresholdShedder", "config": {"loadBalancerLoadPlacementStrategy": "AvgShedder"}}
        )
    # the other way round Pulsar creates both: AvgShedder sheds, LeastLongTermMessageRate places
    out = decide_scenario({**base, "shedding": "AvgShedder", "placement": "LeastLongTermMessageRate"})
    assert (out["shedding"], out["placement"]) == ("AvgShedder", "LeastLongTermMessageRate")
    # AvgShedder alone defaults to its own placement; another shedder alone to LeastLongTermMessageRate
    assert decide_scenario({**base, "shedding": "AvgShedder"})["placement"] == "AvgShedder"
    assert decide_scenario({**base, "shedding": "ThresholdShedder"})["placement"] == "LeastLongTermMessageRate"


def test_pulsar_defaults_are_avg_shedder_for_shedding_and_placement() -> None:
    cfg = LoadBalancerConfig()
    assert (cfg.load_balancer_load_shedding_strategy, cfg.load_balancer_load_placement_strategy) == (
        "AvgShedder",
        "AvgShedder",
    )


def test_overload_recheck_uses_four_resources_without_memory() -> None:
    # b2 has memory at 99% (weight 1): the 5-resource usage would call it overloaded, the re-check's
    # 4-resource getMaxResourceUsageWithWeight(cpu, directMemory, bwIn, bwOut) does not.
    cfg = LoadBalancerConfig.from_mapping({"loadBalancerMemoryResourceWeight": 1.0})

    def local(cpu: float, mem: float) -> LocalBrokerData:
        return LocalBrokerData(
            cpu=ResourceUsage(cpu, 100),
            memory=ResourceUsage(mem, 100),
            bandwidth_in=ResourceUsage(1, 100),
            bandwidth_out=ResourceUsage(1, 100),
        )

    brokers = {"b1": local(50, 1), "b2": local(10, 99)}
    ctx = ModularPlacementContext.build(brokers, {}, None)
    assert ctx.usage("b2", cfg) > 0.85 and ctx.usage4("b2", cfg) < 0.85
    p, _ = select_broker(
        "t/ns/0x00000000_0xffffffff",
        strategy="LeastResourceUsageWithWeight",
        candidates=["b1", "b2"],
        ctx=ctx,
        config=cfg,
        state=StrategyState(),
        rng=random.Random(0),
    )
    assert p.broker == "b2" and "re-run" not in p.reason
    assert ctx.preallocated_owner == {}  # selectBroker never preallocates


def tie_cycles() -> list[dict[str, Any]]:
    """Four cycles without bundleData, with exact ties among the destinations (random picks)."""
    out = []
    for k in range(4):
        c = three_brokers_two_bundles_each()
        c["nowMs"] = NOW + k * 60_000
        for b in ("b2", "b3"):  # b2 and b3 tie exactly; b1 is hot and busy
            c["brokers"][b] = report(20, {f"t/{b}/0x00000000_0xffffffff": stats(100)})
        c["brokers"]["b1"] = report(90, {f"t/ns/{r}": stats(500 + k, 20 * MB) for r in HALF})
        for br in c["brokers"].values():
            br["lastUpdate"] = c["nowMs"]
        c["place"] = [f"t/new{k}/0x00000000_0xffffffff"]
        out.append(c)
    return out


@pytest.mark.parametrize("shedding", ["ThresholdShedder", "AvgShedder", "UniformLoadShedder"])
def test_chained_one_cycle_calls_equal_one_multi_cycle_document(shedding: str) -> None:
    base: dict[str, Any] = {
        "shedding": shedding,
        "seed": 5,
        "config": {
            "loadBalancerAvgShedderHitCountHighThreshold": 1,
            "minUnloadMessage": 10,
            "maxUnloadPercentage": 0.9,
            "loadBalancerBrokerThresholdShedderPercentage": 5,
        },
    }
    whole = decide_scenario({**base, "cycles": tie_cycles()})
    state = None
    chained = []
    for c in tie_cycles():
        doc = {**base, "cycles": [c]}
        if state is not None:
            doc["state"] = state
        out = decide_scenario(copy.deepcopy(doc))
        chained.append(out["cycles"][0])
        state = out["state"]
    assert chained == whole["cycles"]
    assert state == whole["state"]
    # the ties were real: some pick was among several brokers (so the random stream mattered)
    ties = [p["tied"] for c in whole["cycles"] for p in c["placements"].values()]
    assert any(len(t) > 1 for t in ties)


def test_state_carries_the_leaders_bundle_data_when_not_supplied() -> None:
    c1, c2 = tie_cycles()[:2]
    out = decide_scenario({"shedding": "ThresholdShedder", "cycles": [c1, c2]})
    bd = out["state"]["bundleData"]["t/ns/0x00000000_0x80000000"]
    # two samples (500 then 501 msg/s in) averaged by the leader's TimeAverageMessageData
    assert bd["shortTermData"]["numSamples"] == 2
    assert bd["shortTermData"]["msgRateIn"] == pytest.approx(500.5)
    first = bundle_data_from_json(
        decide_scenario({"shedding": "ThresholdShedder", "cycles": [c1]})["state"]["bundleData"][
            "t/ns/0x00000000_0x80000000"
        ],
        "x",
    )
    assert first.short_term_data.num_samples == 1
    # a bundle no broker reports any more leaves the leader's map (updateBundleData)
    c3 = copy.deepcopy(c2)
    del c3["brokers"]["b2"]["lastStats"]["t/b2/0x00000000_0xffffffff"]
    out3 = decide_scenario({"shedding": "ThresholdShedder", "cycles": [c1, c3]})
    assert "t/b2/0x00000000_0xffffffff" not in out3["state"]["bundleData"]
    # supplied bundleData is the caller's: not copied into the state
    supplied = decide_scenario(
        {"shedding": "ThresholdShedder", "placement": "LeastLongTermMessageRate", "cycles": [hot_bundle_cycle(2)]}
    )
    assert supplied["state"]["bundleData"] == {}


def test_state_random_position_is_validated() -> None:
    doc = {
        "shedding": "ThresholdShedder",
        "cycles": [three_brokers_two_bundles_each()],
        "state": {"random": {"mt": [1, 2]}},
    }
    with pytest.raises(ScenarioError) as err:
        decide_scenario(doc)
    assert err.value.field == "state.random.mt"


def test_memory_of_departed_brokers_is_dropped() -> None:
    c1 = three_brokers_two_bundles_each()
    c2 = copy.deepcopy(c1)
    del c2["brokers"]["b3"]
    # extensible: BrokerLoadData (with its EMAs) of a broker gone is not kept
    t = decide_scenario({"shedding": "TransferShedder", "cycles": [c1, c2]})
    assert set(t["state"]["transferShedder"]["brokerLoadData"]) == {"b1", "b2"}
    # LeastResourceUsageWithWeight.onActiveBrokersChange
    c1["place"] = ["t/a/0x00000000_0xffffffff"]
    lr = decide_scenario(
        {"shedding": "ThresholdShedder", "placement": "LeastResourceUsageWithWeight", "cycles": [c1, c2]}
    )
    assert set(lr["state"]["leastResourceUsageWithWeight"]["brokerAvgResourceUsageWithWeight"]) <= {"b1", "b2"}
