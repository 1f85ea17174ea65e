"""The do-no-harm guard (core.guard): each rule, the greedy cut-back in plan order, splits kept for the
moves that need them, warn mode, and that its numbers are core.prediction's."""

from __future__ import annotations

import pytest

from pulsar_rebalance.core.contract.load_json import local_broker_data_from_json
from pulsar_rebalance.core.guard import FREE_CAPACITY_SHARE, GuardLimits, GuardSplit, guard_plan
from pulsar_rebalance.core.plan_summary import GuardReport, why_nothing_planned
from pulsar_rebalance.core.prediction import Move, predict
from pulsar_rebalance.core.pulsar.config import LoadBalancerConfig
from pulsar_rebalance.core.pulsar.load import NamespaceBundleStats

W = (1.0, 0.0, 0.0, 1.0, 1.0)  # Pulsar 4.x weights: cpu, memory 0, direct memory 0, bandwidth in/out
LIMITS = GuardLimits.from_config(LoadBalancerConfig())  # 85 % overload, 10 points band, half the free room


def guard(*args, **kwargs):
    """The guard without re-placement: each rule's own verdict (re-placement has its own tests below)."""
    return guard_plan(*args, replace=False, **kwargs)


LOOSE = GuardLimits(overload=10.0, band=10.0, free_share=1.0)  # no rule but worst-broker and prediction bites


def report(cpu: float, bundles: dict[str, float]) -> dict:
    """A load report whose usage is ``cpu`` % (bandwidth low) and whose bundles carry {name: msg/s}
    (throughput 1000 bytes per message): a bundle's share of the broker is its share of the rate."""
    last = {
        b: {
            "msgRateIn": r / 2,
            "msgRateOut": r / 2,
            "msgThroughputIn": r * 500,
            "msgThroughputOut": r * 500,
            "consumerCount": 1,
            "producerCount": 1,
            "topics": 1,
            "cacheSize": 0,
        }
        for b, r in bundles.items()
    }
    rate = sum(bundles.values())
    return {
        "cpu": {"usage": cpu, "limit": 100.0},
        "memory": {"usage": 1.0, "limit": 100.0},
        "directMemory": {"usage": 1.0, "limit": 100.0},
        "bandwidthIn": {"usage": 1.0, "limit": 100.0},
        "bandwidthOut": {"usage": 1.0, "limit": 100.0},
        "msgRateIn": rate / 2,
        "msgRateOut": rate / 2,
        "msgThroughputIn": rate * 500,
        "msgThroughputOut": rate * 500,
        "lastStats": last,
        "numBundles": len(bundles),
        "bundles": list(bundles),
    }


# hot: 80 %, its bundles a (10 % of its traffic), b (20 %), c (70 %); cool1 30 %, cool2 40 %.
# average 50 %: target band 60 %; cool1's free capacity 55 points (at most 27.5 taken), cool2's 45 (22.5).
REPORTS = {
    "hot": report(
        80.0,
        {"t/n/0x00000000_0x10000000": 100.0, "t/n/0x10000000_0x20000000": 200.0, "t/n/0x20000000_0x40000000": 700.0},
    ),
    "cool1": report(30.0, {"t/n/0x40000000_0x80000000": 100.0}),
    "cool2": report(40.0, {"t/n/0x80000000_0xffffffff": 100.0}),
}
A, B, C = "t/n/0x00000000_0x10000000", "t/n/0x10000000_0x20000000", "t/n/0x20000000_0x40000000"


def test_a_small_move_to_a_cool_broker_passes_every_rule():
    r = guard(REPORTS, [Move(A, "hot", "cool1")], W, LIMITS)  # cool1 30 -> 38 %
    assert r.kept == (0,) and r.failed == ()
    assert r.max_before == pytest.approx(0.8) and r.average_before == pytest.approx(0.5)
    assert r.target == pytest.approx(0.6)
    assert r.to_json()["kept"] == 1 and r.to_json()["dropped"] == 0


def test_overload_threshold():
    # a (8 points) to cool2: 40 -> 48 %, above a 45 % threshold (the free-capacity share set out of the way)
    r = guard(REPORTS, [Move(A, "hot", "cool2")], W, GuardLimits(overload=0.45, band=10.0, free_share=10.0))
    (v,) = r.failed
    assert v.rules == ("overload-threshold",) and r.kept == ()
    assert "cool2 would end at 48.0%, above Pulsar's overload threshold 45%" in v.reason
    assert "loadBalancerBrokerOverloadedThresholdPercentage" in v.reason
    # with Pulsar's 85 %: c (56 points) to cool1 ends at 86 %, which breaks every load rule
    (v,) = guard(REPORTS, [Move(C, "hot", "cool1")], W, LIMITS).failed
    assert v.rules == ("worst-broker", "overload-threshold", "target-band", "free-capacity")


def test_target_band():
    # b (16 points) to cool2: 40 -> 56 % is within the default 60 % band; with a 5-point band (55 %) it is not
    assert guard(REPORTS, [Move(B, "hot", "cool2")], W, LIMITS).failed == ()
    r = guard(REPORTS, [Move(B, "hot", "cool2")], W, GuardLimits(overload=10.0, band=0.05, free_share=1.0))
    (v,) = r.failed
    assert v.rules == ("target-band",)
    assert "above the target band 55.0% (the brokers' average 50.0%" in v.reason


def test_free_capacity_share():
    # b to cool1 takes 16 points of its 55 free: fine; a and b both to cool2 take 24 of its 45 (> 22.5): the second is cut
    assert FREE_CAPACITY_SHARE == 0.5
    assert guard(REPORTS, [Move(B, "hot", "cool1")], W, LIMITS).failed == ()
    loose_band = GuardLimits(overload=0.85, band=1.0)
    r = guard(REPORTS, [Move(B, "hot", "cool2"), Move(A, "hot", "cool2")], W, loose_band)
    assert r.kept == (0,)
    (v,) = r.failed
    assert v.index == 1 and v.rules == ("free-capacity",)
    assert (
        "cool2 would take 24.0 points over this plan, more than 50% of its free capacity (45.0 points from 40.0%"
        in v.reason
    )


def test_worst_broker():
    # moving cool1's bundle onto hot: hot (already the busiest) would rise
    r = guard(REPORTS, [Move("t/n/0x40000000_0x80000000", "cool1", "hot")], W, LOOSE)
    (v,) = r.failed
    assert v.rules == ("worst-broker",)
    assert "the busiest broker would be hot at 110.0%, above the busiest now (80.0%)" in v.reason
    assert r.max_after == pytest.approx(0.8)  # nothing kept


def test_overload_relief_waives_the_band_and_the_free_room_for_a_move_off_an_overloaded_broker():
    x, y = "t/n/0x00000000_0x80000000", "t/n/0x80000000_0xffffffff"
    reps = {
        "over": report(120.0, {x: 400.0, y: 600.0}),  # x carries 48 points of its 120 %
        "cool": report(20.0, {"t/m/0x00000000_0xffffffff": 100.0}),
        "mid": report(40.0, {"t/o/0x00000000_0xffffffff": 100.0}),
    }
    # cool 20 -> 68 %: 48 points of its 65 free (more than half); twice that would end at 116 %, below 120 %
    r = guard(reps, [Move(x, "over", "cool")], W, LIMITS)
    assert r.kept == (0,) and r.failed == ()
    (v,) = r.relieved
    assert "overload relief: over is at 120.0%, above Pulsar's overload threshold 85%" in v.relief
    assert "at most 116.0% were the prediction off by 100 %" in v.relief and "free-capacity" in v.relief
    assert r.to_json()["relieved"][0]["relief"] == v.relief
    page = GuardReport.of(r.to_json())  # what the plan page shows
    assert page is not None and [(g.bundle, g.reason) for g in page.relieved] == [(x, v.relief)]
    # never past the overload threshold itself: mid 40 -> 88 %
    (v,) = guard(reps, [Move(x, "over", "mid")], W, LIMITS).failed
    assert "overload-threshold" in v.rules and not v.relief
    # never where twice the predicted load would reach the overloaded broker's usage now
    reps["over"] = report(100.0, {x: 400.0, y: 600.0})  # x carries 40 points: cool 20 -> 60 %, at most 100 %
    r = guard(reps, [Move(x, "over", "cool")], W, LIMITS)
    (v,) = r.failed
    assert v.rules == ("free-capacity",) and r.relieved == ()
    # and never from a broker below the overload threshold (test_target_band: hot at 80 % is cut)


def test_overload_relief_predicts_the_destination_at_its_own_cost_per_message_when_the_source_pays_more():
    """A saturated broker (300 %, 0.3 CPU points per message) pays six times what an idle one does: its share
    puts its hot bundle at 150 points anywhere, which no broker can take; at the destination's own cost (at
    least the median broker's) it is 50 points."""
    x, y = "t/n/0x00000000_0x80000000", "t/n/0x80000000_0xffffffff"
    reps = {
        "over": report(300.0, {x: 500.0, y: 500.0}),
        "cool": report(20.0, {"t/m/0x00000000_0xffffffff": 400.0}),  # 0.05 points per message
        "mid": report(40.0, {"t/o/0x00000000_0xffffffff": 400.0}),  # 0.1: the median
    }
    r = guard(reps, [Move(x, "over", "cool")], W, LIMITS)
    assert r.kept == (0,) and r.failed == ()
    (v,) = r.relieved
    assert "cool ends at 70.0% (its share of over's usage would put it at 170.0%" in v.relief
    assert "overload-threshold" in v.relief and v.arriving is not None and v.arriving["cpu"] == pytest.approx(50.0)
    assert r.max_after == pytest.approx(1.5)  # over loses its share: 300 -> 150 %
    # the stored prediction uses the same numbers
    p = predict(reps, [Move(x, "over", "cool")], W, arriving={0: v.arriving})
    assert p["brokers"]["cool"]["after"]["usage"] == pytest.approx(0.7)
    # a destination whose own cost is the source's gets no discount: mid at 40 % + 150 points stays cut
    reps["mid"] = report(40.0, {"t/o/0x00000000_0xffffffff": 400.0 / 7.5})  # 0.75 points per message
    assert guard(reps, [Move(x, "over", "mid")], W, LIMITS).kept == ()


def test_a_hot_bundle_that_lands_above_the_threshold_everywhere_goes_where_it_lands_lowest():
    """One hot topic no split can spread (90 % of a 300 % broker's traffic): at every destination's own cost
    (at least the median's, 0.1 points per message) it is 90 points, above the threshold on every broker.
    Refusing it everywhere left such a broker at 2,000 % for a whole run (unseen random-104, a convex CPU and
    a half-size broker) where ThresholdShedder's unload reached 93 %. Relief takes it where it lands lowest,
    and only there; the other relief checks still hold."""
    x, y = "t/n/0x00000000_0x80000000", "t/n/0x80000000_0xffffffff"
    reps = {
        "over": report(300.0, {x: 900.0, y: 100.0}),
        "cool": report(20.0, {"t/m/0x00000000_0xffffffff": 400.0}),  # 20 -> 110 %
        "mid": report(40.0, {"t/o/0x00000000_0xffffffff": 400.0}),  # 40 -> 130 %
    }
    r = guard(reps, [Move(x, "over", "cool")], W, LIMITS)
    assert r.kept == (0,) and r.failed == ()
    (v,) = r.relieved
    assert "cool ends at 110.0%" in v.relief and "at most 200.0% were the prediction off by 100 %" in v.relief
    assert "lands above the threshold on every broker (at least 110.0%), and cool is where it lands lowest" in v.relief
    assert r.max_after == pytest.approx(1.1)  # over 300 -> 30 %, cool the busiest at 110 %
    # not where it lands higher: mid is cut, and re-placement puts it on cool
    (v,) = guard(reps, [Move(x, "over", "mid")], W, LIMITS).failed
    assert "overload-threshold" in v.rules and not v.relief
    (v,) = guard_plan(reps, [Move(x, "over", "mid")], W, LIMITS).verdicts
    assert v.passed and v.destination == "cool" and v.planned_destination == "mid"
    # not when twice the predicted arrival would reach the source: cool 20 + 2 x 90 = 200 % >= 190 %
    reps["over"] = report(190.0, {x: 900.0, y: 100.0})
    assert guard(reps, [Move(x, "over", "cool")], W, LIMITS).kept == ()


def test_a_move_that_cannot_be_predicted_is_dropped():
    moves = [Move("t/n/0xdead0000_0xdead0001", "hot", "cool1"), Move(A, "hot", "gone")]
    r = guard(REPORTS, moves, W, LIMITS)
    assert r.kept == () and [v.rules for v in r.failed] == [("prediction",), ("prediction",)]
    assert "has no load sample in hot's report" in r.failed[0].reason
    assert "gone sent no load report" in r.failed[1].reason


def test_cut_back_is_greedy_in_plan_order_and_later_moves_see_only_the_kept_ones():
    big_to_cool1 = Move(C, "hot", "cool1")  # 56 points: fails every load rule
    b_to_cool1 = Move(B, "hot", "cool1")  # 16 points: passes, since c's move was not kept
    a_to_cool1 = Move(A, "hot", "cool1")  # 8 more: cool1 46 %, 24 of its 27.5 allowed: passes
    r = guard(REPORTS, [big_to_cool1, b_to_cool1, a_to_cool1], W, LIMITS)
    assert r.kept == (1, 2)
    assert set(r.failed[0].rules) == {"worst-broker", "overload-threshold", "target-band", "free-capacity"}
    # the order decides: a first, then b, then c - same verdicts per move, the first two kept
    r2 = guard(REPORTS, [a_to_cool1, b_to_cool1, big_to_cool1], W, LIMITS)
    assert r2.kept == (0, 1) and r2.failed[0].index == 2
    # and b after a is too much for cool2 (64 % > the 60 % band; 24 points > half its 45 free) -> b cut, a kept
    r3 = guard(REPORTS, [Move(A, "hot", "cool2"), Move(B, "hot", "cool2")], W, LIMITS)
    assert r3.kept == (0,) and r3.failed[0].rules == ("target-band", "free-capacity")


def test_the_guard_uses_the_predictions_numbers():
    moves = [Move(A, "hot", "cool1"), Move(B, "hot", "cool2")]
    r = guard(REPORTS, moves, W, LIMITS)
    p = predict(REPORTS, moves, W)
    assert r.kept == (0, 1)
    assert r.max_before == pytest.approx(p["maxUsageBefore"]) and r.max_after == pytest.approx(
        p["maxUsageAfter"], abs=1e-6
    )


CHILD_STATS = {
    "t/n/0x20000000_0x30000000": NamespaceBundleStats(100.0, 50_000.0, 100.0, 50_000.0, 0, 0, 1, 0),  # 10 % of hot
    "t/n/0x30000000_0x40000000": NamespaceBundleStats(250.0, 250_000.0, 250.0, 250_000.0, 0, 0, 1, 0),  # 50 %
}
SPLIT_C = GuardSplit(C, "hot", tuple(CHILD_STATS), standalone=False)


def test_a_split_only_for_moves_is_kept_when_a_kept_move_needs_it():
    r = guard(REPORTS, [SPLIT_C, Move("t/n/0x20000000_0x30000000", "hot", "cool1")], W, LIMITS, extra_stats=CHILD_STATS)
    assert r.kept == (0, 1) and r.failed == ()


def test_a_split_only_for_moves_is_dropped_with_its_dropped_children_and_the_result_can_be_empty():
    heavy = Move("t/n/0x30000000_0x40000000", "hot", "cool1")  # 40 points of hot onto cool1: cut
    r = guard(REPORTS, [SPLIT_C, heavy], W, LIMITS, extra_stats=CHILD_STATS)
    assert r.kept == ()
    split, move = r.failed
    assert (split.kind, split.rules) == (
        "split",
        ("split-unneeded",),
    ) and "planned only so that its children" in split.reason
    assert move.kind == "unload" and "free-capacity" in move.rules
    summary = {"decision": {"label": "Success", "reason": "Overloaded"}, "guard": r.to_json(), "notes": []}
    why = why_nothing_planned(summary)
    assert why[0].startswith("the do-no-harm guard removed every planned action (2)")
    assert any(line.startswith("guard dropped unload t/n/0x30000000_0x40000000 hot -> cool1: ") for line in why)
    assert why[-1] == "the strategy proposed them: Success (Overloaded)"


def test_a_standalone_split_stays_when_its_child_move_is_cut():
    """Pulsar's split trigger splits a bundle for its own sake: only the move of its heavy child is cut."""
    standalone = GuardSplit(C, "hot", tuple(CHILD_STATS), standalone=True)
    heavy = Move("t/n/0x30000000_0x40000000", "hot", "cool1")
    r = guard(REPORTS, [standalone, heavy], W, LIMITS, extra_stats=CHILD_STATS)
    assert r.kept == (0,) and [v.index for v in r.failed] == [1]


def test_a_child_move_without_its_split_cannot_stand_alone():
    r = guard(REPORTS, [Move("t/n/0x20000000_0x30000000", "hot", "cool1")], W, LIMITS)  # no child stats
    (v,) = r.failed
    assert (
        v.rules == ("prediction",) and "a child of a split that is not in the plan cannot move on its own" in v.reason
    )


def test_warn_mode_keeps_everything_flags_the_failures_and_applies_every_move():
    moves = [Move(C, "hot", "cool1"), Move(A, "hot", "cool1")]
    r = guard(REPORTS, moves, W, LIMITS, cut=False)
    assert r.kept == (0, 1)
    # c's move happened: a's move now lands on a cool1 at 86 %, so it fails too
    assert [v.index for v in r.failed] == [0, 1] and "overload-threshold" in r.failed[1].rules
    j = r.to_json()
    assert (j["mode"], j["kept"], j["dropped"], len(j["failed"])) == ("warn", 2, 0, 2)
    assert r.max_after == pytest.approx(predict(REPORTS, moves, W)["maxUsageAfter"], abs=1e-6)


def test_a_move_refused_for_its_destination_is_re_placed_on_one_that_passes():
    # a (8 points) to cool2 breaks a 45 % threshold; cool1 (30 -> 38 %) takes it instead
    limits = GuardLimits(overload=0.45, band=10.0, free_share=10.0)
    r = guard_plan(REPORTS, [Move(A, "hot", "cool2")], W, limits)
    assert r.failed == () and r.kept == (0,)
    (v,) = r.replaced
    assert (v.destination, v.planned_destination, v.rules) == ("cool1", "cool2", ("overload-threshold",))
    assert r.destination_of(0) == "cool1"
    assert r.to_json()["replaced"][0]["plannedDestination"] == "cool2"
    # the numbers are the prediction's for the new destination
    assert r.max_after == pytest.approx(predict(REPORTS, [Move(A, "hot", "cool1")], W)["maxUsageAfter"], abs=1e-6)


def test_two_moves_piled_on_one_light_broker_the_second_goes_elsewhere():
    # a 2-point band (target 52 %): b (16 points) to cool1 ends at 46 %, fine; a (8) on top would end at 54 %,
    # so a goes to cool2 instead (40 -> 48 %), the way Pulsar's placement would spread two lookups
    r = guard_plan(REPORTS, [Move(B, "hot", "cool1"), Move(A, "hot", "cool1")], W, GuardLimits(0.85, 0.02))
    assert r.failed == () and r.kept == (0, 1)
    assert [v.destination for v in r.verdicts] == ["cool1", "cool2"]
    assert [v.planned_destination for v in r.verdicts] == [None, "cool1"]
    assert r.verdicts[1].rules == ("target-band",)
    assert r.max_after == pytest.approx(0.56)  # hot 80 - 16 - 8


def test_no_destination_passes_the_move_is_cut_with_the_planned_destination_named():
    # c (56 points) fits nowhere: cut, and the verdict names the destination the strategy chose
    r = guard_plan(REPORTS, [Move(C, "hot", "cool1")], W, LIMITS)
    (v,) = r.failed
    assert v.destination == "cool1" and not v.replaced and r.kept == ()


def test_warn_mode_never_re_places():
    r = guard_plan(
        REPORTS, [Move(A, "hot", "cool2")], W, GuardLimits(overload=0.45, band=10.0, free_share=10.0), cut=False
    )
    (v,) = r.failed
    assert v.destination == "cool2" and r.replaced == ()


def test_destination_room_answers_as_the_guard_does_for_a_move_of_that_traffic():
    # what a strategy asks before planning (core.guard.DestinationRoom) is the guard's destination rules
    from pulsar_rebalance.core.guard import DestinationRoom

    parsed = {b: local_broker_data_from_json(r, b) for b, r in REPORTS.items()}
    room = DestinationRoom(parsed, W, LIMITS)
    traffic = {A: (100.0, 50_000.0, 50_000.0), B: (200.0, 100_000.0, 100_000.0), C: (700.0, 350_000.0, 350_000.0)}
    for bundle in (A, B, C):
        for dest in ("cool1", "cool2"):
            verdict = guard(REPORTS, [Move(bundle, "hot", dest)], W, LIMITS).verdicts[0]
            assert room.fits("hot", dest, traffic[bundle]) == verdict.passed, (bundle, dest, verdict.reason)
    # cool1 30 %, its cap min(85, 50 + 10, 30 + 27.5) = 57.5 %: 27.5 points; A (8 points) taken leaves 19.5
    assert room.room("cool1") == pytest.approx(0.275)
    room.take("hot", "cool1", traffic[A])
    assert room.room("cool1") == pytest.approx(0.195)
    room.take("hot", "cool1", traffic[B])  # 16 points more: 3.5 left, too little for A's 8
    assert room.room("cool1") == pytest.approx(0.035)
    assert not room.fits("hot", "cool1", traffic[A]) and room.fits("hot", "cool2", traffic[A])
    assert room.room("nobody") == 0.0 and not room.fits("hot", "nobody", traffic[A])
