"""Plan building and load prediction (pure: no Spark, no DB)."""

from __future__ import annotations

import pytest

from pulsar_rebalance.core.plan import UsageChange
from pulsar_rebalance.core.prediction import Move, predict
from pulsar_rebalance.errors import ConfigError
from pulsar_rebalance.pipeline.params import RunParams
from pulsar_rebalance.pipeline.planning import build_plan


def report(cpu: float, bw_in: float, bw_out: float, bundles: dict[str, tuple[float, float]]) -> dict:
    """A LocalBrokerData JSON with bundles {name: (msgRate, throughput)} split evenly in/out."""
    last = {
        b: {
            "msgRateIn": r / 2,
            "msgRateOut": r / 2,
            "msgThroughputIn": t / 2,
            "msgThroughputOut": t / 2,
            "consumerCount": 1,
            "producerCount": 1,
            "topics": 4,
            "cacheSize": 0,
        }
        for b, (r, t) in bundles.items()
    }
    rate = sum(r for r, _ in bundles.values())
    thr = sum(t for _, t in bundles.values())
    return {
        "cpu": {"usage": cpu, "limit": 100.0},
        "memory": {"usage": 1.0, "limit": 100.0},
        "directMemory": {"usage": 1.0, "limit": 100.0},
        "bandwidthIn": {"usage": bw_in, "limit": 100.0},
        "bandwidthOut": {"usage": bw_out, "limit": 100.0},
        "msgRateIn": rate / 2,
        "msgRateOut": rate / 2,
        "msgThroughputIn": thr / 2,
        "msgThroughputOut": thr / 2,
        "lastStats": last,
        "numBundles": len(bundles),
        "bundles": list(bundles),
    }


REPORTS = {
    "b1:8080": report(
        90.0, 80.0, 80.0, {"t/n/0x00000000_0x40000000": (600.0, 6e6), "t/n/0x40000000_0x80000000": (200.0, 2e6)}
    ),
    "b2:8080": report(10.0, 10.0, 10.0, {"t/n/0x80000000_0xc0000000": (100.0, 1e6)}),
}


def test_prediction_moves_the_bundles_share_of_load_to_the_destination():
    p = predict(REPORTS, [Move("t/n/0x00000000_0x40000000", "b1:8080", "b2:8080")], (1.0, 0.0, 0.0, 1.0, 1.0))
    b1, b2 = p["brokers"]["b1:8080"], p["brokers"]["b2:8080"]
    # the bundle carries 6e6 of b1's 8e6 bytes/s and 600 of its 800 msg/s: 3/4 of bw and cpu move
    assert b1["before"]["usage"] == pytest.approx(0.9)
    assert b1["after"]["cpu"] == pytest.approx(22.5, abs=1e-3)
    assert b2["after"]["bandwidthIn"] == pytest.approx(70.0, abs=1e-3)
    assert b2["after"]["bundles"] == 2 and b1["after"]["bundles"] == 1
    assert p["maxUsageBefore"] == pytest.approx(0.9)
    assert p["maxUsageAfter"] == pytest.approx(0.775, abs=1e-6)  # b2: cpu 10 + 67.5
    assert p["usageStdAfter"] < p["usageStdBefore"]


def test_no_moves_predicts_no_change():
    p = predict(REPORTS, [], (1.0, 0.0, 0.0, 1.0, 1.0))
    assert all(v["diff"] == 0 for v in p["brokers"].values())


def decision(unloads=(), splits=()):
    return {"cycle": {"label": "Success", "reason": "Overloaded", "unloads": list(unloads), "splits": list(splits)}}


def test_plan_orders_splits_first_and_moves_the_heaviest_child_of_a_split_bundle():
    params = RunParams.from_json({"shedding_strategy": "ThresholdShedder"})
    hot = "t/n/0x00000000_0x40000000"
    d = decision(
        unloads=[
            {"broker": "b1:8080", "bundle": hot, "destination": "b2:8080", "reason": "overloaded"},
            {
                "broker": "b1:8080",
                "bundle": "t/n/0x40000000_0x80000000",
                "destination": "b2:8080",
                "reason": "overloaded",
                "destinationReason": "least long-term msg rate",
            },
        ],
        splits=[{"bundle": hot, "broker": "b1:8080", "reason": "msgRate 600 > 500"}],
    )
    # two topics in the hot bundle: crc32 puts "t/n/a" (0x...) and "t/n/b" in different halves
    from pulsar_rebalance.core.bundles import topic_hash

    names = [f"persistent://t/n/topic-{i}" for i in range(200)]
    low = next(n for n in names if topic_hash(n) < 0x20000000)
    high = next(n for n in names if 0x20000000 <= topic_hash(n) < 0x40000000)
    topics = {
        hot: {
            low: {"msgRateIn": 10.0, "msgRateOut": 10.0, "msgThroughputIn": 1e5, "msgThroughputOut": 1e5},
            high: {"msgRateIn": 290.0, "msgRateOut": 290.0, "msgThroughputIn": 2.9e6, "msgThroughputOut": 2.9e6},
        }
    }
    draft = build_plan(decision=d, params=params, reports=REPORTS, topics_by_bundle=topics, ownership={hot: "b1:8080"})
    kinds = [(a.kind, a.bundle_range) for a in draft.actions]
    # range_equally_divide (Pulsar's default) splits [0, 0x40000000) at 0x20000000; the heavy child moves
    assert kinds == [
        ("split", "0x00000000_0x40000000"),
        ("unload", "0x20000000_0x40000000"),
        ("unload", "0x40000000_0x80000000"),
    ]
    assert draft.actions[0].boundaries == (0x20000000,)
    assert draft.actions[0].children == ("0x00000000_0x20000000", "0x20000000_0x40000000")
    assert "heaviest child 0x20000000_0x40000000" in draft.actions[1].reason
    assert draft.actions[2].reason.endswith("destination: least long-term msg rate")
    assert draft.summary["numBundleUnloads"] == 2 and draft.summary["numBundleSplits"] == 1
    assert [a.seq for a in draft.actions] == [0, 1, 2]
    # each unload carries its own effect on its two brokers, in plan order: the moves chain from the
    # summary's usage before to its usage after on every broker
    current = {b: v["before"]["usage"] for b, v in draft.summary["brokers"].items()}
    for a in draft.actions[1:]:
        for side, broker in (("source", a.source_broker), ("destination", a.destination_broker)):
            change = getattr(a.predicted, side)
            assert isinstance(change, UsageChange) and change.broker == broker
            assert change.before == pytest.approx(current[broker], abs=1e-6)
            current[broker] = change.after
        assert a.predicted.source.after < a.predicted.source.before  # the source sheds load
        assert a.predicted.destination.after > a.predicted.destination.before
    assert current == pytest.approx({b: v["after"]["usage"] for b, v in draft.summary["brokers"].items()}, abs=1e-6)
    # the child's share (5.8e6 of b1's 8e6 bytes/s) is what the prediction moves
    b2 = draft.summary["brokers"]["b2:8080"]
    assert b2["after"]["msgThroughput"] == pytest.approx(1e6 + 5.8e6 + 2e6)


def test_a_planner_split_keeps_its_boundaries_and_its_moved_child_is_predicted_from_the_topics():
    from pulsar_rebalance.core.bundles import topic_hash

    hot = "t/n/0x00000000_0x40000000"
    names = [f"persistent://t/n/topic-{i}" for i in range(400)]
    heavy = next(n for n in names if 0x10000000 < topic_hash(n) < 0x30000000)
    h = topic_hash(heavy)
    light = next(n for n in names if topic_hash(n) < h)
    topics = {
        hot: {
            light: {"msgRateIn": 10.0, "msgRateOut": 10.0, "msgThroughputIn": 1e5, "msgThroughputOut": 1e5},
            heavy: {"msgRateIn": 290.0, "msgRateOut": 290.0, "msgThroughputIn": 2.9e6, "msgThroughputOut": 2.9e6},
        }
    }
    child = f"t/n/0x{h:08x}_0x{h + 1:08x}"
    d = decision(
        splits=[
            {
                "bundle": hot,
                "broker": "b1:8080",
                "reason": "GlobalPlanner: isolate",
                "boundaries": [f"0x{h:08x}", f"0x{h + 1:08x}"],
                "children": [f"t/n/0x00000000_0x{h:08x}", child, f"t/n/0x{h + 1:08x}_0x40000000"],
            }
        ],
        unloads=[
            {"broker": "b1:8080", "bundle": child, "destination": "b2:8080", "reason": "Overloaded: GlobalPlanner"}
        ],
    )
    draft = build_plan(
        decision=d, params=RunParams.from_json({}), reports=REPORTS, topics_by_bundle=topics, ownership={hot: "b1:8080"}
    )
    split, unload = draft.actions
    assert split.boundaries == (h, h + 1) and split.split_algorithm == "specified_positions_divide"
    assert (unload.kind, unload.bundle_range, unload.destination_broker) == (
        "unload",
        child.rsplit("/", 1)[1],
        "b2:8080",
    )
    # the isolated topic's 5.8e6 bytes/s move, not a guess
    assert draft.summary["brokers"]["b2:8080"]["after"]["msgThroughput"] == pytest.approx(1e6 + 5.8e6)


def test_plan_without_destination_records_why_and_is_empty():
    d = decision(
        unloads=[{"broker": "b1:8080", "bundle": "t/n/0x40000000_0x80000000", "destination": None, "reason": "x"}]
    )
    draft = build_plan(
        decision=d,
        params=RunParams.from_json({"shedding_strategy": "ThresholdShedder"}),
        reports=REPORTS,
        topics_by_bundle={},
        ownership={},
    )
    assert draft.empty and "placement found no destination" in draft.notes[0]


@pytest.mark.parametrize(
    "doc, key",
    [
        ({"shedding_strategy": "NoSuchShedder"}, "shedding_strategy"),
        ({"config": {"loadBalancerNoSuchKey": 1}}, "loadBalancerNoSuchKey"),
        ({"namespaces": ["no-slash"]}, "namespaces"),
        ({"surprise": 1}, "surprise"),
        ({"max_parallel_unloads": 0}, "max_parallel_unloads"),
    ],
)
def test_bad_run_params_name_the_offending_key(doc, key):
    with pytest.raises(ConfigError) as exc:
        RunParams.from_json(doc)
    assert key in str(exc.value)


def test_plan_records_what_each_moved_bundle_carries_and_the_data_quality():
    """The plan page's "traffic moved / clients that reconnect" come from these recorded samples."""
    hot = "t/n/0x00000000_0x40000000"
    d = decision(
        unloads=[
            {"broker": "b1:8080", "bundle": hot, "destination": "b2:8080", "reason": "overloaded"},
            {"broker": "b1:8080", "bundle": "t/n/0x40000000_0x80000000", "destination": "b2:8080", "reason": "x"},
        ],
        splits=[{"bundle": hot, "broker": "b1:8080", "reason": "msgRate 600 > 500"}],
    )
    from pulsar_rebalance.core.bundles import topic_hash

    names = [f"persistent://t/n/topic-{i}" for i in range(200)]
    high = next(n for n in names if 0x20000000 <= topic_hash(n) < 0x40000000)
    topics = {
        hot: {high: {"msgRateIn": 290.0, "msgRateOut": 290.0, "msgThroughputIn": 2.9e6, "msgThroughputOut": 2.9e6}}
    }
    draft = build_plan(
        decision=d,
        params=RunParams.from_json({}),
        reports=REPORTS,
        topics_by_bundle=topics,
        ownership={hot: "b1:8080", "t/n/0x40000000_0x80000000": "b1:8080", "t/n/0x80000000_0xc0000000": "b2:8080"},
    )
    split, child, whole = draft.actions
    # the split bundle's own sample (from b1's lastStats)
    assert split.predicted.bundle_load == {
        "msgRateIn": 300.0,
        "msgRateOut": 300.0,
        "msgThroughputIn": 3e6,
        "msgThroughputOut": 3e6,
        "topics": 4,
        "producerCount": 1,
        "consumerCount": 1,
    }
    # a split child has no sample yet: rates and topics from its topics, client counts unknown
    assert child.predicted.bundle_load == {
        "msgRateIn": 290.0,
        "msgRateOut": 290.0,
        "msgThroughputIn": 2.9e6,
        "msgThroughputOut": 2.9e6,
        "topics": 1,
    }
    assert whole.predicted.bundle_load["msgThroughputIn"] == 1e6
    assert whole.predicted.bundle_load["producerCount"] == 1
    assert draft.summary["dataQuality"] == {
        "brokersReporting": 2,
        "brokersOwningBundles": 2,
        "bundleSamples": 3,
        "bundlesOwned": 3,
    }


def test_a_plan_predicted_to_raise_the_busiest_broker_carries_a_warning():
    """Whatever strategy proposed it: moving b2's bundle onto the already busiest b1 makes b1 busier."""
    params = RunParams.from_json({"shedding_strategy": "ThresholdShedder"})
    worse = decision(
        unloads=[
            {
                "broker": "b2:8080",
                "bundle": "t/n/0x80000000_0xc0000000",
                "destination": "b1:8080",
                "reason": "a strategy's choice",
            }
        ]
    )
    draft = build_plan(decision=worse, params=params, reports=REPORTS, topics_by_bundle={}, ownership={})
    assert draft.summary["maxUsageAfterPredicted"] > draft.summary["maxUsageBefore"]
    assert any("predicted to raise the busiest broker's usage from 90.0% to" in w for w in draft.summary["warnings"])
    better = decision(
        unloads=[{"broker": "b1:8080", "bundle": "t/n/0x40000000_0x80000000", "destination": "b2:8080", "reason": "x"}]
    )
    draft = build_plan(decision=better, params=params, reports=REPORTS, topics_by_bundle={}, ownership={})
    assert not any("predicted to raise" in w for w in draft.summary["warnings"])
