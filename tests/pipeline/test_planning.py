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

# The same cluster with a third, heavy bundle on b1 that no test moves, so the bundles the plans below
# move are a small share of b1's 90 %: their moves pass the do-no-harm guard. With REPORTS, the hot
# bundle's heavy child carries 580 of b1's 800 msg/s: moving it puts b2 from 10 % at 75 %, above the
# target band (average 50 % + 10 points) and past half its free capacity - an overshoot the guard cuts
# (test_the_guard_cuts_an_overshooting_child_move_and_keeps_the_split).
ROOMY = {
    **REPORTS,
    "b1:8080": report(
        90.0,
        80.0,
        80.0,
        {
            "t/n/0x00000000_0x40000000": (600.0, 6e6),
            "t/n/0x40000000_0x80000000": (200.0, 2e6),
            "t/n/0xc0000000_0xffffffff": (2400.0, 24e6),
        },
    ),
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
    from pulsar_rebalance.core.pulsar.bundles import topic_hash

    names = [f"persistent://t/n/topic-{i}" for i in range(200)]
    low = next(n for n in names if topic_hash(n) < 0x20000000)
    high = next(n for n in names if 0x20000000 <= topic_hash(n) < 0x40000000)
    topics = {
        hot: {
            low: {"msgRateIn": 10.0, "msgRateOut": 10.0, "msgThroughputIn": 1e5, "msgThroughputOut": 1e5},
            high: {"msgRateIn": 290.0, "msgRateOut": 290.0, "msgThroughputIn": 2.9e6, "msgThroughputOut": 2.9e6},
        }
    }
    draft = build_plan(decision=d, params=params, reports=ROOMY, topics_by_bundle=topics, ownership={hot: "b1:8080"})
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
    from pulsar_rebalance.core.pulsar.bundles import topic_hash

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
        decision=d, params=RunParams.from_json({}), reports=ROOMY, topics_by_bundle=topics, ownership={hot: "b1:8080"}
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


def test_the_strategys_own_warnings_reach_the_plan_summary():
    """A constraint no move can meet (the planner's stats.warnings) is on the plan page, kind 'strategy'."""
    d = {"cycle": {"label": "Skip", "reason": "Balanced", "unloads": [], "splits": [], "stats": {"warnings": ["w1"]}}}
    draft = build_plan(
        decision=d,
        params=RunParams.from_json({"shedding_strategy": "GlobalPlanner"}),
        reports=REPORTS,
        topics_by_bundle={},
        ownership={},
        snapshot_check={"warnings": [{"kind": "snapshot", "message": "s1"}], "excludedBundles": []},
    )
    assert draft.summary["warnings"][:2] == [
        {"kind": "snapshot", "message": "s1"},
        {"kind": "strategy", "message": "w1"},
    ]


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
    from pulsar_rebalance.core.pulsar.bundles import topic_hash

    names = [f"persistent://t/n/topic-{i}" for i in range(200)]
    high = next(n for n in names if 0x20000000 <= topic_hash(n) < 0x40000000)
    topics = {
        hot: {high: {"msgRateIn": 290.0, "msgRateOut": 290.0, "msgThroughputIn": 2.9e6, "msgThroughputOut": 2.9e6}}
    }
    draft = build_plan(
        decision=d,
        params=RunParams.from_json({}),
        reports=ROOMY,
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
        "bundleSamples": 4,  # ROOMY's third bundle on b1
        "bundlesOwned": 3,
    }


def test_a_plan_that_would_raise_the_busiest_broker_is_cut_by_the_guard():
    """Whatever strategy proposed it: moving b2's bundle onto the already busiest b1 would make b1 busier.
    Before the do-no-harm guard this plan was stored with a warning; now the move is cut, the plan is
    empty and says why (the "predicted to raise" warning remains for rollbacks, which are not cut)."""
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
    assert draft.empty
    assert draft.summary["maxUsageAfterPredicted"] == draft.summary["maxUsageBefore"]
    (failed,) = draft.summary["guard"]["failed"]
    assert "worst-broker" in failed["rules"] and "overload-threshold" in failed["rules"]
    assert any(w.startswith("do-no-harm guard: 1 of 1 planned action(s) removed") for w in draft.summary["warnings"])
    assert not any("predicted to raise" in w for w in draft.summary["warnings"])
    better = decision(
        unloads=[{"broker": "b1:8080", "bundle": "t/n/0x40000000_0x80000000", "destination": "b2:8080", "reason": "x"}]
    )
    draft = build_plan(decision=better, params=params, reports=REPORTS, topics_by_bundle={}, ownership={})
    assert len(draft.actions) == 1 and draft.summary["guard"] == {**draft.summary["guard"], "kept": 1, "dropped": 0}
    assert not any("predicted to raise" in w or "do-no-harm" in w for w in draft.summary["warnings"])


def test_a_planner_decision_its_own_model_thinks_good_is_cut_when_the_reports_show_it_overloads():
    """A deliberately wrong load model: the GlobalPlanner's decision (built by hand, as it stores it with
    its own predicted before/after) believes the hot bundle costs 8 points; b1's load report says it carries
    70 % of b1's traffic - about 62 points, which would put b2 at 112 %. The guard judges by the reports."""
    hot, small = "t/n/0x00000000_0x40000000", "t/n/0x40000000_0x50000000"
    reports = {
        "b1:8080": report(
            88.0, 88.0, 88.0, {hot: (700.0, 7e6), "t/n/0x50000000_0x80000000": (250.0, 2.5e6), small: (50.0, 5e5)}
        ),
        "b2:8080": report(50.0, 50.0, 50.0, {"t/n/0x80000000_0xc0000000": (500.0, 5e6)}),
        "b3:8080": report(55.0, 55.0, 55.0, {"t/n/0xc0000000_0xffffffff": (500.0, 5e6)}),
    }
    model_says = {"sourceBefore": 0.88, "sourceAfter": 0.80, "destinationBefore": 0.50, "destinationAfter": 0.58}
    d = {
        "cycle": {
            "label": "Success",
            "reason": "Overloaded",
            "splits": [],
            "unloads": [
                {
                    "broker": "b1:8080",
                    "bundle": hot,
                    "destination": "b2:8080",
                    "reason": "Overloaded: GlobalPlanner: b1:8080 predicted usage 0.88 > target 0.66",
                    "predicted": model_says,
                },
                {
                    "broker": "b1:8080",
                    "bundle": small,
                    "destination": "b3:8080",
                    "reason": "Overloaded: GlobalPlanner",
                    "predicted": {**model_says, "destinationBefore": 0.55, "destinationAfter": 0.59},
                },
            ],
        }
    }
    params = RunParams.from_json({"shedding_strategy": "GlobalPlanner"})
    threshold = params.lb_config().overload_threshold_fraction
    draft = build_plan(decision=d, params=params, reports=reports, topics_by_bundle={}, ownership={})
    # what is stored: no destination predicted (from the reports) above the overload threshold, the busiest
    # broker not above the busiest now, and the hot bundle not moved
    for a in draft.actions:
        assert a.predicted.destination.after <= threshold, (a.bundle, a.predicted.destination)
    assert draft.summary["maxUsageAfterPredicted"] <= draft.summary["maxUsageBefore"]
    assert [a.bundle for a in draft.actions] == [small]
    guard = draft.summary["guard"]
    assert (guard["kept"], guard["dropped"]) == (1, 1)
    (cut,) = guard["failed"]
    assert cut["bundle"] == hot and cut["destination"] == "b2:8080"
    assert {"worst-broker", "overload-threshold", "target-band", "free-capacity"} <= set(cut["rules"])
    assert "b2:8080 would end at 111.6%, above Pulsar's overload threshold 85%" in cut["reason"]
    assert any("do-no-harm guard: 1 of 2 planned action(s) removed" in w for w in draft.summary["warnings"])


def test_the_guard_refuses_a_destination_the_stored_isolation_policy_forbids():
    """plan_split passes the run's placement constraints to the do-no-harm guard: the move the guard keeps
    without them (test above) is cut when t/n may only live on b1 (its primary)."""
    params = RunParams.from_json({"shedding_strategy": "ThresholdShedder"})
    move = decision(
        unloads=[{"broker": "b1:8080", "bundle": "t/n/0x40000000_0x80000000", "destination": "b2:8080", "reason": "x"}]
    )
    policies = {
        "namespaceIsolationPolicies": {
            "t-n-on-b1": {
                "namespaces": ["t/n"],
                "primary": ["b1"],
                "secondary": [],
                "auto_failover_policy": {
                    "policy_type": "min_available",
                    "parameters": {"min_limit": "1", "usage_threshold": "80"},
                },
            }
        },
        "failureDomains": {},
        "antiAffinityGroups": {},
    }
    draft = build_plan(
        decision=move, params=params, reports=REPORTS, topics_by_bundle={}, ownership={}, placement_policies=policies
    )
    assert draft.empty
    (failed,) = draft.summary["guard"]["failed"]
    assert failed["rules"] == ["isolation-policy"], failed
    assert "t-n-on-b1" in failed["reason"]
    # no policy field filled: as without any
    empty = {"namespaceIsolationPolicies": {}, "failureDomains": {}, "antiAffinityGroups": {}}
    kept = build_plan(
        decision=move, params=params, reports=REPORTS, topics_by_bundle={}, ownership={}, placement_policies=empty
    )
    assert len(kept.actions) == 1


def _iso_policy(name: str, namespaces: str, primary: str) -> dict:
    return {
        name: {
            "namespaces": [namespaces],
            "primary": [primary],
            "secondary": [],
            "auto_failover_policy": {
                "policy_type": "min_available",
                "parameters": {"min_limit": "1", "usage_threshold": "80"},
            },
        }
    }


# pay/* may live on b3 only, but pay/a sits on b1; o/x and o/y (anti-affinity group 'orders') share b2
# while b1 holds no namespace of the group. Every bundle that moves carries a tenth of its broker's traffic.
PAY_A, O_X = "pay/a/0x00000000_0xffffffff", "o/x/0x00000000_0xffffffff"
O_Y = ("o/y/0x00000000_0x80000000", "o/y/0x80000000_0xffffffff")
VIOLATING = {
    "b1:8080": report(30.0, 30.0, 30.0, {PAY_A: (100.0, 1e6), "s/q/0x00000000_0xffffffff": (900.0, 9e6)}),
    "b2:8080": report(50.0, 50.0, 50.0, {O_X: (100.0, 1e6), O_Y[0]: (450.0, 4.5e6), O_Y[1]: (450.0, 4.5e6)}),
    "b3:8080": report(20.0, 20.0, 20.0, {"pay/b/0x00000000_0xffffffff": (100.0, 1e6)}),
}
CONSTRAINTS = {
    "namespaceIsolationPolicies": _iso_policy("pay-on-b3", "pay/.*", "b3"),
    "failureDomains": {},
    "antiAffinityGroups": {"o/x": "orders", "o/y": "orders"},
}


def _owners(reports: dict) -> dict[str, str]:
    return {b: br for br, r in reports.items() for b in r["lastStats"]}


def test_the_fix_plan_moves_each_violating_bundle_once_through_the_guard_and_records_the_compliance():
    from pulsar_rebalance.core.plan_summary import summarize_plan
    from pulsar_rebalance.pipeline.planning import build_fix_plan

    params = RunParams.from_json({"fix_policy_violations": True})
    draft, cycle = build_fix_plan(
        params=params, reports=VIOLATING, ownership=_owners(VIOLATING), placement_policies=CONSTRAINTS
    )
    # pay/a to b3 (its only primary); o/x, the smaller namespace on b2, to b1 - o/y then breaks nothing
    assert [(a.bundle, a.source_broker, a.destination_broker) for a in draft.actions] == [
        (PAY_A, "b1:8080", "b3:8080"),
        (O_X, "b2:8080", "b1:8080"),
    ]
    assert draft.actions[0].reason.startswith("policy violation: isolation-policy: b1:8080 is neither primary")
    assert draft.actions[1].reason.startswith("policy violation: anti-affinity-group: o/x shares broker b2:8080")
    assert cycle["label"] == "FixPolicyViolations" and len(cycle["unloads"]) == 2
    s = draft.summary
    assert s["guard"]["failed"] == [] and s["guard"]["kept"] == 2  # checked by the guard like any plan
    assert s["strategies"]["shedding"] == "fix_policy_violations"
    fix = s["fixPolicyViolations"]
    assert fix["moves"] == 2 and fix["unfixable"] == []
    assert sorted(v["bundle"] for v in fix["resolved"]) == sorted(O_Y)
    assert any("o/y/0x00000000_0x80000000 on b2:8080 (anti-affinity-group) is not moved" in n for n in s["notes"])
    # the compliance view: what the run's ownership breaks (before the fix), with rule and why
    assert sorted((v["bundle"], v["rule"]) for v in s["placement"]["violations"]) == sorted(
        [(PAY_A, "isolation-policy"), (O_X, "anti-affinity-group")] + [(b, "anti-affinity-group") for b in O_Y]
    )
    placement = summarize_plan(summary=s, actions=[a.to_row() for a in draft.actions]).placement
    assert placement is not None and placement.fix
    assert placement.constraints_of(0) == "isolation policy 'pay-on-b3': primary b3"
    assert placement.constraints_of(1) == (
        "no isolation policy for o/x: shared brokers only (not a primary of 'pay-on-b3'); "
        "anti-affinity group 'orders' (with o/y)"
    )
    assert s["maxUsageAfterPredicted"] <= s["maxUsageBefore"]


def test_an_empty_fix_plan_says_why_and_a_bundle_nowhere_to_go_is_a_warning():
    from pulsar_rebalance.core.plan_summary import why_nothing_planned
    from pulsar_rebalance.pipeline.planning import build_fix_plan

    params = RunParams.from_json({"fix_policy_violations": True})
    compliant = {**_owners(VIOLATING), PAY_A: "b3:8080", O_X: "b1:8080"}
    draft, _ = build_fix_plan(params=params, reports=VIOLATING, ownership=compliant, placement_policies=CONSTRAINTS)
    assert draft.empty and draft.summary["placement"]["violations"] == []
    assert why_nothing_planned(draft.summary)[0] == ("FixPolicyViolations (no bundle breaks its namespace's policies)")
    # no constraint stored at all: the same
    none, _ = build_fix_plan(params=params, reports=VIOLATING, ownership=compliant, placement_policies=None)
    assert none.empty and "no bundle breaks its namespace's policies" in why_nothing_planned(none.summary)[0]
    # pay/* isolated to b9, which is not in the cluster: pay/a cannot move anywhere
    gone = {
        **CONSTRAINTS,
        "namespaceIsolationPolicies": _iso_policy("pay-on-b9", "pay/.*", "b9"),
        "antiAffinityGroups": {},
    }
    stuck, _ = build_fix_plan(params=params, reports=VIOLATING, ownership=_owners(VIOLATING), placement_policies=gone)
    assert stuck.empty
    assert any(
        w.startswith(f"{PAY_A} on b1:8080 breaks isolation-policy and is not moved: no other live broker")
        for w in stuck.summary["warnings"]
    )
    assert "none can move to a broker the policies allow" in why_nothing_planned(stuck.summary)[0]


def test_every_plan_records_the_constraints_of_its_moves_and_the_runs_violations():
    params = RunParams.from_json({"shedding_strategy": "ThresholdShedder"})
    move = decision(unloads=[{"broker": "b2:8080", "bundle": O_X, "destination": "b1:8080", "reason": "x"}])
    draft = build_plan(
        decision=move,
        params=params,
        reports=VIOLATING,
        topics_by_bundle={},
        ownership=_owners(VIOLATING),
        placement_policies=CONSTRAINTS,
    )
    placement = draft.summary["placement"]
    assert placement["actions"] == {
        "0": [
            {
                "rule": "isolation-policy",
                "text": "no isolation policy for o/x: shared brokers only (not a primary of 'pay-on-b3')",
            },
            {"rule": "anti-affinity-group", "text": "anti-affinity group 'orders' (with o/y)"},
        ]
    }
    assert len(placement["violations"]) == 4 and placement["empty"] is False
    # a run without stored constraints records none (shown as not recorded)
    bare = build_plan(decision=move, params=params, reports=VIOLATING, topics_by_bundle={}, ownership={})
    assert bare.summary["placement"] is None


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"fix_policy_violations": "yes"}, "fix_policy_violations must be true or false"),
        ({"fix_policy_violations": True, "rollback_plan": "p-1"}, "set one of them"),
    ],
)
def test_fix_policy_violations_is_a_boolean_and_not_with_a_rollback(doc, message):
    with pytest.raises(ConfigError, match=message) as exc:
        RunParams.from_json(doc)
    assert exc.value.key == "fix_policy_violations"


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"mode": "evacuate"}, "mode must be one of ['rebalance', 'drain', 'fill']"),
        ({"mode": "drain"}, "mode 'drain' needs the brokers to drain"),
        ({"mode": "fill", "brokers": []}, "mode 'fill' needs the brokers to fill"),
        ({"brokers": ["b1:8080"]}, "brokers are only for mode drain or fill"),
        ({"mode": "drain", "brokers": [""]}, "brokers must be a list of broker ids"),
        ({"mode": "drain", "brokers": ["b1"], "fix_policy_violations": True}, "mode 'drain' is its own plan"),
    ],
)
def test_bad_mode_params_are_refused_naming_the_problem(doc, message):
    with pytest.raises(ConfigError) as err:
        RunParams.from_json(doc)
    assert message in str(err.value)


def test_a_drain_plan_moves_only_off_the_drained_broker_and_records_the_mode():
    from pulsar_rebalance.pipeline.planning import build_mode_plan

    reports = {**ROOMY, "b3:8080": report(20.0, 20.0, 20.0, {"t/m/0x00000000_0x80000000": (100.0, 1e6)})}
    ownership = {b: broker for broker, r in reports.items() for b in r["lastStats"]}
    params = RunParams.from_json({"mode": "drain", "brokers": "b2:8080"})
    assert params.brokers == ("b2:8080",)
    draft, cycle = build_mode_plan(
        params=params, reports=reports, ownership=ownership, placement_policies=None, cordoned=["b2:8080"]
    )
    moved = [a for a in draft.actions if a.kind == "unload"]
    assert moved and all(a.source_broker == "b2:8080" and a.destination_broker != "b2:8080" for a in moved)
    assert cycle["label"] == "Drain" and draft.summary["mode"]["brokers"] == ["b2:8080"]
    assert draft.summary["strategies"]["shedding"] == "drain"
    # a bundle the drained broker owns but has no sample of (no topic loaded: Pulsar samples only those)
    # moves too, predicted as idle: the guard would otherwise cut it and the broker never end empty
    idle = "t/idle/0x00000000_0xffffffff"
    draft, _ = build_mode_plan(
        params=params, reports=reports, ownership={**ownership, idle: "b2:8080"}, placement_policies=None
    )
    [idle_move] = [a for a in draft.actions if a.kind == "unload" and a.bundle == idle]
    assert idle_move.source_broker == "b2:8080" and set(idle_move.predicted.bundle_load.values()) == {0}
    assert sorted(a.bundle for a in draft.actions) == sorted(
        b for b, o in {**ownership, idle: "b2:8080"}.items() if o == "b2:8080"
    )
    assert (
        f"unload of {idle} from b2:8080: no load sample (no topic loaded), predicted as idle" in draft.summary["notes"]
    )
    assert not draft.summary["guard"]["failed"]
    with pytest.raises(ConfigError, match="broker.s. nope:1 are not in this cluster's snapshot"):
        build_mode_plan(
            params=RunParams.from_json({"mode": "fill", "brokers": ["nope:1"]}),
            reports=ROOMY,
            ownership=ownership,
            placement_policies=None,
        )


def test_a_move_off_an_overloaded_broker_past_the_band_is_kept_as_overload_relief_and_says_so():
    """b1 reports 120 %: its hot bundle (40 % of its traffic, 48 points) fits within the band on b2 but takes more
    than half of b2's free room. Cutting it would leave b1 at 120 %; the guard keeps it (twice the prediction
    would still leave b2 below b1) and the stored action's reason and the plan's guard section say why."""
    hot = "t/n/0x00000000_0x40000000"
    reports = {
        "b1:8080": report(120.0, 20.0, 20.0, {hot: (400.0, 4e6), "t/n/0x40000000_0x80000000": (600.0, 6e6)}),
        "b2:8080": report(20.0, 20.0, 20.0, {"t/n/0x80000000_0xc0000000": (500.0, 5e6)}),
        "b3:8080": report(40.0, 20.0, 20.0, {"t/n/0xc0000000_0xffffffff": (500.0, 5e6)}),
    }
    d = decision(unloads=[{"broker": "b1:8080", "bundle": hot, "destination": "b2:8080", "reason": "Overloaded"}])
    params = RunParams.from_json({"shedding_strategy": "ThresholdShedder"})
    draft = build_plan(decision=d, params=params, reports=reports, topics_by_bundle={}, ownership={})
    (a,) = draft.actions
    assert a.bundle == hot and a.destination_broker == "b2:8080"
    # stored at the guard's estimate: 400 msg/s at the median broker's 0.08 CPU points per message (b2 pays
    # 0.04, less than typical), not the 48 points of b1's share
    assert a.predicted.destination.after == pytest.approx(0.52)
    assert "its share of b1:8080's usage would put it at 68.0%" in a.reason
    assert a.reason.endswith("the free-capacity rule(s) were waived")
    assert "do-no-harm guard: overload relief: b1:8080 is at 120.0%" in a.reason
    guard = draft.summary["guard"]
    assert (guard["kept"], guard["dropped"], guard["failed"]) == (1, 0, [])
    (relieved,) = guard["relieved"]
    assert relieved["bundle"] == hot and "at most 84.0% were the prediction off by 100 %" in relieved["relief"]
