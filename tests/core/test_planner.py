"""GlobalPlanner through the ``decide`` contract, on named scenario fixtures, with its invariants:
no bundle lost or duplicated, ranges cover the hash space, never a move to an excluded or overloaded
broker, never worse than before, deterministic, hysteresis from the state."""

from __future__ import annotations

import copy
import dataclasses
import statistics
from typing import Any

import pytest

from pulsar_rebalance.core.contract.decide import decide_scenario
from pulsar_rebalance.core.contract.load_json import namespace_bundle_stats_from_json
from pulsar_rebalance.core.contract.state_json import planner_memory_from_json, strategy_state_from_json
from pulsar_rebalance.core.planner import PlannerSettings, split_candidates
from pulsar_rebalance.core.pulsar.load import BundleData
from pulsar_rebalance.core.pulsar.shedders import get_shedder
from pulsar_rebalance.core.pulsar.shedders.base import namespace_of
from pulsar_rebalance.core.pulsar.state import StrategyState
from pulsar_rebalance.errors import ScenarioError
from pulsar_rebalance.simulator import closed_loop
from pulsar_rebalance.simulator.closed_loop import run_closed_loop
from pulsar_rebalance.simulator.dynamics import ClusterModel
from pulsar_rebalance.simulator.random_models import random_model
from pulsar_rebalance.simulator.scenarios import build

pytestmark = pytest.mark.timeout(300)

PLANNED = [
    "one-hot-broker",
    "scale-up",
    "heterogeneous",
    "hot-bundle-needs-split",
    "hot-single-topic-unsplittable",
    "large-ish",
]


def _cycle(model: ClusterModel, *, topics: bool = True) -> dict[str, Any]:
    stats = model.bundle_stats()
    reports = model.load_reports(stats)
    bundle_data = {}
    for b, s in stats.items():
        bd = BundleData.new_default()
        bd.update(namespace_bundle_stats_from_json(s, b))
        bundle_data[b] = bd.to_json()
    cycle: dict[str, Any] = {
        "brokers": reports,
        "bundleData": bundle_data,
        "nowMs": model.now_ms,
        "namespaceBundleCounts": {ns: len(nb) for ns, nb in model.namespaces.items()},
    }
    if topics:
        cycle["bundleTopics"] = {b: model.topic_rates(b) for b in split_candidates(reports)}
    return cycle


def _model(name: str, seed: int = 1) -> ClusterModel:
    if name == "large-ish":  # many small brokers, bundles spread by count: a Zipf imbalance
        from pulsar_rebalance.simulator import scenarios as sc

        m, rng = sc._new_model(seed, n_brokers=30, n_namespaces=10, bundles_per_ns=32, n_topics=20_000, zipf_s=0.7)
        sc._calibrate(m, 0.5)
        sc._place_by_count(m, list(m.brokers), rng)
        return m
    return build(name, seed).model


def _decide(
    cycle: dict[str, Any], state: dict[str, Any] | None = None, config: dict[str, Any] | None = None
) -> dict[str, Any]:
    doc: dict[str, Any] = {"shedding": "GlobalPlanner", "cycles": [copy.deepcopy(cycle)]}
    if state is not None:
        doc["state"] = state
    if config:
        doc["config"] = config
    return decide_scenario(doc)


CONFIRM_GAP_MS = PlannerSettings().confirm_ms // (PlannerSettings().confirm_reports - 1)
"""Reports this far apart confirm a broker in ``confirm_reports`` (three reports spanning ``confirm_ms``)."""


def _decide_confirmed(cycle: dict[str, Any]) -> dict[str, Any]:
    """The plan once the busiest broker's imbalance is confirmed: the same reports ``CONFIRM_GAP_MS`` apart until
    the planner stops waiting for consecutive reports (a broker above the trigger but not far above it)."""
    out = _decide(cycle)
    for i in range(1, PlannerSettings().confirm_reports):
        if out["cycles"][0]["reason"] != "HitCount":
            break
        again = copy.deepcopy(cycle)
        again["nowMs"] = cycle["nowMs"] + i * CONFIRM_GAP_MS
        out = _decide(again, out["state"])
    return out


def _reports(cycle: dict[str, Any], state: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The planner's outputs for ``confirm_reports`` copies of ``cycle``, a minute apart (the state carried)."""
    outs: list[dict[str, Any]] = []
    for i in range(PlannerSettings().confirm_reports):
        again = copy.deepcopy(cycle)
        again["nowMs"] = NOW + (i + 1) * 60_000
        outs.append(_decide(again, outs[-1]["state"] if outs else state))
    return outs


def _band(ideal: float) -> float:
    """How far above the ideal the planner's target is (without noise)."""
    st = PlannerSettings()
    return max(st.target_abs, st.target_rel * ideal)


def _trigger_band(ideal: float) -> float:
    """How far above the ideal the planner's trigger is (without noise): a broker below it is no source."""
    st = PlannerSettings()
    return max(st.trigger_abs, st.trigger_rel * ideal)


def _check_invariants(
    model: ClusterModel, cycle_in: dict[str, Any], out: dict[str, Any], overload: float = 0.85
) -> None:
    cyc = out["cycles"][0]
    brokers = set(cycle_in["brokers"])
    owners_before = dict(model.owners)
    before = model.true_usage()
    children: dict[str, str] = {}
    for s in cyc["splits"]:
        assert owners_before[s["bundle"]] == s["broker"]
        assert s["boundaries"] and len(s["children"]) == len(s["boundaries"]) + 1
        for c in s["children"]:
            children[c] = s["broker"]
    for u in cyc["unloads"]:
        assert owners_before.get(u["bundle"], children.get(u["bundle"])) == u["broker"]
        assert u["destination"] in brokers and u["destination"] != u["broker"]
        p = u["predicted"]
        assert p["destinationAfter"] < p["sourceBefore"]  # never moves the problem
        # worth a disconnect: a move lowers its source by min_gain (predictions are rounded to 4 decimals), except
        # the ones that give a hot topic its broker to itself (the cluster's worst broker: everything else leaves)
        if "giving it the broker to itself" not in u["reason"]:
            assert p["sourceBefore"] - p["sourceAfter"] >= PlannerSettings().min_gain - 1e-4, u
        assert p["destinationBefore"] < overload and p["destinationAfter"] <= max(overload, cyc["stats"]["target"])
        # a broker above the band is shed ("Overloaded"); one confirmed far below it is filled ("Underloaded")
        assert u["reason"].startswith(("Overloaded: GlobalPlanner", "Underloaded: GlobalPlanner"))
    assert len({u["bundle"] for u in cyc["unloads"]}) == len(cyc["unloads"])  # a bundle moves at most once
    stats = cyc["stats"]
    if "maxUsageAfter" in stats:
        assert stats["maxUsageAfter"] <= stats["maxUsageBefore"] + 1e-9
    topics_before = sorted(t.name for t in model.topics)
    res = model.apply(cyc)
    assert not res.rejected, res.rejected
    # no bundle lost or duplicated, ranges tile the hash space, every topic in exactly one bundle
    for nb in model.namespaces.values():
        r = nb.ranges
        assert r[0].lower == 0 and r[-1].upper == 0xFFFFFFFF and all(a.upper == b.lower for a, b in zip(r, r[1:]))
    assert set(model.owners) == set(model.bundles())
    assert sum(len(model.topics_of(b)) for b in model.bundles()) == len(topics_before)
    # never worse than before (noise-free truth, not only the prediction)
    after = model.true_usage()
    assert max(after.values()) <= max(before.values()) + 0.005


@pytest.mark.parametrize("name", PLANNED)
def test_one_plan_keeps_every_invariant_and_improves_the_worst_broker(name: str) -> None:
    model = _model(name)
    if name == "scale-up":
        model.advance(), model.advance()  # the two empty brokers have joined
    cycle = _cycle(model)
    before = max(model.true_usage().values())
    out = _decide_confirmed(cycle)
    cyc = out["cycles"][0]
    assert cyc["label"] == "Success", cyc["detail"]
    _check_invariants(model, cycle, out)
    assert max(model.true_usage().values()) < before - 0.02
    # deterministic: the same input gives the same plan, byte for byte
    assert _decide_confirmed(cycle) == out


def test_zero_moves_when_the_cluster_is_within_the_target() -> None:
    model = _model("steady-with-noise")
    cyc = _decide(_cycle(model))["cycles"][0]
    assert cyc["label"] == "Skip" and cyc["reason"] == "Balanced" and not cyc["unloads"] and not cyc["splits"]
    assert "within the band" in cyc["detail"]


def test_heterogeneous_capacity_comes_from_reported_limits() -> None:
    model = _model("heterogeneous")
    cyc = _decide_confirmed(_cycle(model))["cycles"][0]
    big = "broker-0:8080"  # twice the cores and NIC: it must take load, never give it
    assert any(u["destination"] == big for u in cyc["unloads"])
    assert all(u["broker"] != big for u in cyc["unloads"])


def test_split_isolates_the_hot_topic_and_places_children_in_the_same_plan() -> None:
    model = _model("hot-bundle-needs-split")
    cyc = _decide(_cycle(model))["cycles"][0]
    assert len(cyc["splits"]) == 1
    split = cyc["splits"][0]
    assert set(split["children"]) & {u["bundle"] for u in cyc["unloads"]}  # a child moves in the same plan
    assert "GlobalPlanner" in split["reason"]


def test_unsplittable_hot_topic_gets_a_warning_not_endless_moves() -> None:
    run = build("hot-single-topic-unsplittable", 1)
    result = run_closed_loop(run, "GlobalPlanner")
    assert any("single hot topic" in w or "one topic carries" in w for w in result.warnings)
    assert result.ping_pong == 0
    assert sum(result.moves_per_cycle[len(result.moves_per_cycle) // 3 :]) == 0  # settles, no churn


def test_namespace_at_its_bundle_limit_is_a_warning_not_a_split() -> None:
    model = _model("hot-bundle-needs-split")
    cycle = _cycle(model)
    out = _decide(cycle, config={"loadBalancerNamespaceMaximumBundles": 16})
    cyc = out["cycles"][0]
    assert not cyc["splits"]
    assert any("loadBalancerNamespaceMaximumBundles=16" in w for w in cyc["stats"]["warnings"])


def test_excluded_namespaces_are_never_moved() -> None:
    model = _model("one-hot-broker")
    cycle = _cycle(model)
    hot_ns = sorted({namespace_of(b) for b in cycle["brokers"]["broker-0:8080"]["lastStats"]})
    out = _decide(cycle, config={"loadBalancerSheddingExcludedNamespaces": hot_ns[:4]})
    moved_ns = {namespace_of(u["bundle"]) for u in out["cycles"][0]["unloads"]}
    assert moved_ns and not moved_ns & set(hot_ns[:4])


MIB = 1024 * 1024
NOW = 1_700_000_000_000


def _nic_cluster(owned: dict[str, dict[str, float]]) -> dict[str, Any]:
    """Brokers bound by NIC in: ``owned`` = broker -> {bundle: MiB/s in}; 1 Gbit/s NICs, idle CPU."""
    brokers = {}
    for broker, bundles in owned.items():
        stats = {
            b: {"msgRateIn": 1.0, "msgRateOut": 0.0, "msgThroughputIn": mib * MIB, "msgThroughputOut": 0.0, "topics": 5}
            for b, mib in bundles.items()
        }
        thr = sum(mib * MIB for mib in bundles.values())
        brokers[broker] = {
            "cpu": {"usage": 1.0, "limit": 800.0},
            "bandwidthIn": {"usage": thr * 8 / 1024, "limit": 1024000.0},
            "bandwidthOut": {"usage": 0.0, "limit": 1024000.0},
            "lastStats": stats,
        }
    return {"brokers": brokers, "nowMs": NOW}


def test_hysteresis_never_undoes_its_own_recent_moves() -> None:
    x, b2, c1 = "t/ns/0x00000000_0x40000000", "t/ns/0x40000000_0x80000000", "t/ns/0x80000000_0xffffffff"
    # B is hot; moving X (or b2) to the empty A is the obvious fix
    cycle = _nic_cluster({"A:8080": {}, "B:8080": {x: 45, b2: 45}, "C:8080": {c1: 40}})
    cycle["recentlyUnloadedBundles"] = {b2: NOW - 60 * 60_000}  # old: b2 is free to move
    fresh = _decide(cycle)["cycles"][0]
    assert fresh["label"] == "Success" and fresh["unloads"][0]["destination"] == "A:8080"

    cycle["recentlyUnloadedBundles"] = {b2: NOW - 60_000}  # b2 was just unloaded (Pulsar's grace period)
    mem = {"moves": {x: {"from": "D:8080", "to": "B:8080", "atMs": NOW - 5 * 60_000}}}
    cooling = _decide(cycle, {"globalPlanner": mem})["cycles"][0]
    assert cooling["label"] == "Skip" and not cooling["unloads"]  # X is in the planner's cool-down
    mem = {"moves": {x: {"from": "A:8080", "to": "B:8080", "atMs": NOW - 40 * 60_000}}}
    back = _decide(cycle, {"globalPlanner": mem})["cycles"][0]
    # after the cool-down X may move again, but never straight back to A; C would end beyond the do-no-harm
    # guard's band, which would put X on A itself (the least-used broker), so nothing moves
    assert not back["unloads"] and "no bundle can move" in " ".join(back["stats"]["warnings"]), back
    mem = {"moves": {x: {"from": "D:8080", "to": "B:8080", "atMs": NOW - 40 * 60_000}}}
    later = _decide(cycle, {"globalPlanner": mem})["cycles"][0]
    assert [(u["bundle"], u["destination"]) for u in later["unloads"]] == [(x, "A:8080")]
    assert (
        strategy_state_from_json(_decide(cycle, {"globalPlanner": mem})["state"]).planner["moves"][x]["from"]
        == "B:8080"
    )


def _tiles(ns: str, mibs: list[float]) -> dict[str, float]:
    """``len(mibs)`` bundles tiling namespace ``ns``, each with that many MiB/s in."""
    step = 0x100000000 // len(mibs)
    bounds = [i * step for i in range(len(mibs))] + [0xFFFFFFFF]
    return {f"{ns}/0x{lo:08x}_0x{hi:08x}": m for lo, hi, m in zip(bounds, bounds[1:], mibs)}


def test_only_brokers_above_the_trigger_in_enough_reports_are_shed() -> None:
    # ThresholdShedder's geometry: a broker above the trigger is shed down to the target; one between the
    # target and the trigger is left alone, as is one above the trigger for fewer reports than confirm it
    # (unless far above). Before, one confirmed broker made every broker above the target a source. C and D
    # are not nearly empty (a broker that is, reached by the relief, is filled from B and F: step 8).
    cycle = _nic_cluster(
        {
            "A:8080": _tiles("t/a", [10.0] * 10),  # 0.80 of its NIC: far above the trigger
            "B:8080": _tiles("t/b", [15.0] * 5),  # 0.60: above the trigger, first report
            "F:8080": _tiles("t/f", [13.75] * 5),  # 0.55: above the target, below the trigger
            "C:8080": _tiles("t/c", [12.5, 12.5, 6.25]),  # 0.25
            "D:8080": _tiles("t/d", [12.5, 12.5, 6.25]),
        }
    )
    cyc = _decide(cycle)["cycles"][0]
    st = cyc["stats"]
    assert st["target"] + 0.005 < st["brokers"]["F:8080"]["usage"] < st["trigger"] < st["brokers"]["B:8080"]["usage"]
    assert cyc["unloads"] and {u["broker"] for u in cyc["unloads"]} == {"A:8080"}, cyc["unloads"]
    assert st["brokers"]["A:8080"]["predictedUsage"] <= st["target"]
    # B seen above the trigger twice before: confirmed now, shed too; F still not
    confirmed = _decide(cycle, {"globalPlanner": {"above": {"B:8080": 2}}})["cycles"][0]
    assert {u["broker"] for u in confirmed["unloads"]} == {"A:8080", "B:8080"}, confirmed["unloads"]
    assert confirmed["stats"]["brokers"]["F:8080"]["predictedUsage"] == confirmed["stats"]["brokers"]["F:8080"]["usage"]


def test_state_of_the_planner_is_validated() -> None:
    bad = {"globalPlanner": {"moves": {"t/ns/0x00000000_0xffffffff": {"from": "a", "to": "", "atMs": 1}}}}
    with pytest.raises(ScenarioError) as err:
        strategy_state_from_json(bad)
    assert err.value.field == "state.globalPlanner.moves.t/ns/0x00000000_0xffffffff.to"
    with pytest.raises(ScenarioError):
        strategy_state_from_json({"globalPlanner": {"typo": {}}})
    # Pulsar strategies' state keeps its shape (no globalPlanner member)
    assert "globalPlanner" not in StrategyState().to_json()


def test_bundle_topics_is_read_only_by_the_planner_and_validated_for_every_strategy() -> None:
    model = _model("one-hot-broker")
    cycle = _cycle(model)
    # every strategy may be given the same information; ThresholdShedder decides the same with or without it
    without = {k: v for k, v in cycle.items() if k != "bundleTopics"}
    a = decide_scenario({"shedding": "ThresholdShedder", "cycles": [copy.deepcopy(cycle)]})["cycles"][0]
    b = decide_scenario({"shedding": "ThresholdShedder", "cycles": [without]})["cycles"][0]
    assert a["unloads"] == b["unloads"] and a["splits"] == b["splits"]
    cycle["bundleTopics"] = {next(iter(cycle["bundleTopics"])): {"persistent://t/n/x": {"msgRateIn": -1}}}
    with pytest.raises(ScenarioError):
        _decide(cycle)


def test_closed_loop_reaches_the_target_without_ping_pong_and_then_stays_put() -> None:
    result = run_closed_loop(build("one-hot-broker", 2), "GlobalPlanner")
    s = result.summary()
    assert s["final_max"] <= s["ideal"] + _band(s["ideal"]) + 0.005  # within the target (+ the reports' noise)
    assert s["ping_pong"] == 0 and s["churn"] == 0
    steady = run_closed_loop(build("steady-with-noise", 2), "GlobalPlanner").summary()
    assert steady["moves"] == 0 and steady["splits"] == 0


def test_a_change_of_brokers_is_waited_for_then_planned_once_unless_a_broker_is_overloaded() -> None:
    x, b2, c1 = "t/ns/0x00000000_0x40000000", "t/ns/0x40000000_0x80000000", "t/ns/0x80000000_0xffffffff"
    cycle = _nic_cluster({"A:8080": {}, "B:8080": {x: 45, b2: 45}, "C:8080": {c1: 40}})
    # the last cycle, a minute ago, also had D: D has just left (or is restarting)
    last = {
        "globalPlanner": {"membership": {"brokers": ["A:8080", "B:8080", "C:8080", "D:8080"], "atMs": NOW - 60_000}}
    }
    out = _decide(cycle, last)
    cyc = out["cycles"][0]
    assert (cyc["label"], cyc["reason"]) == ("Skip", "CoolDown") and not cyc["unloads"]
    assert "left: D:8080" in cyc["detail"]
    waiting = copy.deepcopy(cycle)
    waiting["nowMs"] = NOW + 8 * 60_000  # 9 min after the change: still settling
    out = _decide(waiting, out["state"])
    assert out["cycles"][0]["reason"] == "CoolDown"
    settled = copy.deepcopy(cycle)
    settled["nowMs"] = NOW + 10 * 60_000  # stable for 10 min: one plan
    assert _decide(settled, out["state"])["cycles"][0]["label"] == "Success"
    # a broker above the overload threshold (85 %) is not kept waiting
    hot = _nic_cluster({"A:8080": {}, "B:8080": {x: 60, b2: 50}, "C:8080": {c1: 40}})
    assert _decide(hot, last)["cycles"][0]["label"] == "Success"


def test_a_rolling_restart_gets_one_corrective_plan_at_its_end() -> None:
    run = build("rolling-restart", 1)  # brokers 0-3 restart at cycles 2, 8, 14, 20, each back 2 cycles later
    result = run_closed_loop(run, "GlobalPlanner")
    moving = [i for i, n in enumerate(result.moves_per_cycle) if n]
    assert len(moving) == 1 and moving[0] > 22, result.moves_per_cycle
    s = result.summary()
    # the same plan sheds the brokers above the trigger and fills the broker that came back empty (before the
    # fill it ended at 0.585, 8 points above the ideal, the restarted broker at 0.16)
    assert s["final_max"] <= s["ideal"] + _band(s["ideal"]) and s["ping_pong"] == 0, s


def test_a_broker_far_below_the_ideal_is_filled_once_its_reports_confirm_it_even_within_the_band() -> None:
    # ThresholdShedder's lowerBoundarySheddingEnabled, mirrored: no broker is above the trigger, but A is empty
    # (joined, or back from a restart). Before, the planner left it empty for good (within the band).
    cycle = _nic_cluster({"A:8080": {}, **{f"{b}:8080": _tiles(f"t/{b}", [6.0] * 10) for b in "BCDE"}})
    outs = _reports(cycle)
    for out in outs:
        assert out["cycles"][0]["stats"]["maxUsageBefore"] <= out["cycles"][0]["stats"]["trigger"]  # within the band
    for out in outs[:-1]:  # one or two reports are samples: wait
        assert out["cycles"][0]["label"] == "Skip" and not out["cycles"][0]["unloads"], out["cycles"][0]
    out = outs[-1]
    cyc = out["cycles"][0]
    st = cyc["stats"]
    assert (cyc["label"], cyc["reason"]) == ("Success", "Underloaded"), cyc["detail"]
    assert cyc["unloads"] and {u["destination"] for u in cyc["unloads"]} == {"A:8080"}
    assert all(u["reason"].startswith("Underloaded: GlobalPlanner: A:8080") for u in cyc["unloads"])
    after = {b: v["predictedUsage"] for b, v in st["brokers"].items()}
    assert after["A:8080"] <= st["target"] and st["maxUsageAfter"] < st["maxUsageBefore"] - 0.04
    # every broker above the target is lowered to it, each into A (one 6 MiB/s bundle each): A takes 4
    assert all(v <= st["target"] for v in after.values()) and len(cyc["unloads"]) == 4, after
    assert after["A:8080"] > 0.15, after
    assert strategy_state_from_json(out["state"]).planner["below"] == {"A:8080": PlannerSettings().confirm_reports}
    # the do-no-harm guard put each of those bundles on the next broker instead (A is cordoned: an operator drained
    # it): A is not filled again for the history window, or every run would plan the same fill and the guard move
    # load between the other brokers again
    moved = {u["bundle"]: u["broker"] for u in cyc["unloads"]}
    landed = {n: "CDEB"["BCDE".index(src[0])] for n, src in moved.items()}
    later = _nic_cluster(
        {
            "A:8080": {},
            **{
                f"{b}:8080": {n: 6.0 for n in _tiles(f"t/{b}", [6.0] * 10) if n not in moved}
                | {n: 6.0 for n, to in landed.items() if to == b}
                for b in "BCDE"
            },
        }
    )
    for i in range(3):
        later["nowMs"] = NOW + (5 + i * 60) * 60_000
        out = _decide(later, out["state"])
        cyc = out["cycles"][0]
        assert cyc["label"] == "Skip" and not cyc["unloads"] and cyc["stats"]["fillRefused"] == ["A:8080"], cyc
    assert set(strategy_state_from_json(out["state"]).planner["refused"]) == {"A:8080"}


def test_a_plan_leaves_its_destinations_room_for_the_moves_own_cost() -> None:
    # four brokers above the trigger (0.72, ten bundles of 0.072 each) and an empty one: every broker's relief
    # lands on A. After its first bundle A takes more only while all that arrives stays within 1 / (1 + 1.5) of
    # its room below the overload threshold (0.34): four bundles (0.288). Without the reserve the guard's
    # free-capacity share (0.425) let a fifth in, and a move's own cost on A - its topics loaded, its clients
    # reconnected, its subscriptions reading from the bookies - would be paid for all five in one minute
    cycle = _nic_cluster({"A:8080": {}, **{f"{b}:8080": _tiles(f"t/{b}", [9.0] * 10) for b in "BCDE"}})
    cyc = _reports(cycle)[-1]["cycles"][0]
    st = cyc["stats"]
    assert cyc["label"] == "Success" and {u["destination"] for u in cyc["unloads"]} == {"A:8080"}, cyc["detail"]
    overload = 0.85
    reserve = PlannerSettings().arrival_reserve
    assert len(cyc["unloads"]) == 4 and st["brokers"]["A:8080"]["predictedUsage"] <= overload / (1 + reserve), st
    # the first bundle of a plan is judged by the guard's room alone: one bigger than the reserve's share still
    # goes to an empty broker (0.36 > 0.34; test_hysteresis_never_undoes_its_own_recent_moves moves it)
    x, b2, c1 = "t/ns/0x00000000_0x40000000", "t/ns/0x40000000_0x80000000", "t/ns/0x80000000_0xffffffff"
    big = _decide(_nic_cluster({"A:8080": {}, "B:8080": {x: 45, b2: 45}, "C:8080": {c1: 40}}))["cycles"][0]
    [(bundle, dest, after)] = [
        (u["bundle"], u["destination"], u["predicted"]["destinationAfter"]) for u in big["unloads"]
    ]
    assert dest == "A:8080" and after > overload / (1 + reserve), big["unloads"]


def test_split_parts_are_sized_for_the_room_of_their_destinations() -> None:
    model = _model("hot-bundle-needs-split", 2)
    cyc = _decide(_cycle(model))["cycles"][0]
    (split,) = cyc["splits"]
    moved = [u for u in cyc["unloads"] if u["bundle"] in split["children"]]
    assert moved and len({u["destination"] for u in moved}) == len(moved)  # one part per destination
    assert all(u["predicted"]["destinationAfter"] <= cyc["stats"]["target"] for u in moved)
    assert len(split["children"]) <= 2 * 7 + 1  # at most max_split_parts - 1 parts move, the rest stays between them
    assert cyc["stats"]["maxUsageAfter"] <= cyc["stats"]["target"] + 0.005


def test_split_parts_are_sized_for_the_room_the_do_no_harm_guard_allows() -> None:
    # per-topic cost: the fitted model puts much of the hot bundle's CPU on its topics, the guard predicts a
    # part by its share of the source's messages (larger). Parts sized for the model's room alone went over
    # the guard's band on every destination, were cut with their split, and the broker stayed hot.
    run = build("hot-bundle-needs-split", 1, load_model="per-topic-cost", rate_noise=0.03)
    result = run_closed_loop(run, "GlobalPlanner", decisions=6)
    assert result.splits >= 1 and result.moves >= 2, (result.splits, result.moves, result.guard_cut)
    assert result.max_usage[-1] < result.max_usage[0] - 0.1, result.max_usage


def test_a_big_broker_left_with_split_halves_too_big_for_any_other_broker_splits_them_again() -> None:
    # random-95 (unseen when found): the hot bundle sits on a broker with 1.5x the capacity; after its first
    # split the broker held two halves, each too big for every smaller broker. Split-to-fit declined because
    # the other half alone covered the excess - by moves none could make - and the broker stayed at 0.90
    # for the whole run (no-action 1.06, ThresholdShedder 0.66 with 43 moves).
    run = build("hot-bundle-needs-split", 2, load_model=random_model("random-95"), rate_noise=0.03)
    result = run_closed_loop(run, "GlobalPlanner", decisions=8)
    assert result.splits >= 2, (result.splits, result.warnings)
    assert max(result.max_usage[-2:]) < 0.72, result.max_usage  # was 0.90: stuck after one split


def test_brokers_the_model_puts_above_their_reports_still_receive_bundles_planned_as_busy_as_modelled() -> None:
    # random-97 (unseen when found: convex CPU, capacities x0.5/1/2): the fit put every light broker above what
    # its own reports showed, so each was clipped to its reports, and a clipped broker was no destination at
    # all: the only candidates left were brokers above 1.4, and broker-5 stayed at 3.9 for the whole run with
    # 0 moves (doing nothing 4.05, ThresholdShedder 0.71 with 46 moves). A clipped broker now receives, planned
    # as busy as the model put it (the safe way for a destination), until a bundle leaves it in that plan.
    run = build("heterogeneous", 2, load_model=random_model("random-97"), rate_noise=0.03)
    result = run_closed_loop(run, "GlobalPlanner", decisions=4)
    assert result.max_usage[0] > 3.5, result.max_usage
    assert max(result.max_usage[-2:]) < 0.8, (result.max_usage, result.warnings[:3])
    assert result.moves <= 40, result.moves_per_cycle


def _hot_topic_loop(load_model: str | None, decisions: int, seed: int = 1) -> tuple[Any, str, str, Any]:
    """hot-single-topic-unsplittable, ``seed``, under ``load_model``, for ``decisions`` minute cycles of the
    planner: (the model, the hot topic's broker before, after, the loop's result)."""
    run = build(
        "hot-single-topic-unsplittable", seed, load_model=load_model and random_model(load_model), rate_noise=0.03
    )
    model = run.model
    hot = max(model.topics, key=lambda t: t.burst)
    start = model.owners[model.bundle_of_topic(hot.name)]
    result = run_closed_loop(run, "GlobalPlanner", cadence="minute", decisions=decisions)
    return model, start, model.owners[model.bundle_of_topic(hot.name)], result


def test_a_hot_topic_that_lands_lower_elsewhere_than_alone_where_it_is_moves_whole() -> None:
    # random-112 (unseen when found: convex CPU K=0.5, capacities x1/x1.5): the hot topic sat on a x1 broker at
    # 1.72. The planner moved its 14 neighbours off (isolation), then proposed the topic itself, which the guard
    # cut: after the neighbours' moves its source was at 0.93, below twice the topic's predicted arrival. The
    # broker stayed at 0.79 with the topic alone for the whole run, where AvgShedder ended at 0.58. A topic that
    # lands lower on another broker than its source would keep with it alone now moves whole, before the moves
    # that would isolate it.
    _, start, end, result = _hot_topic_loop("random-112", 4)
    assert end != start
    assert result.max_usage[0] > 1.5 and max(result.max_usage[-2:]) < 0.65, result.max_usage  # was 0.76
    assert result.summary()["guard_cut"] == 0, result.summary()


def test_a_hot_topic_overloading_even_its_own_broker_gets_a_bigger_broker_emptied_for_it() -> None:
    # random-135 (unseen when found: capacities x0.5/1/2, convex CPU K=1.5): the hot topic sits on a small
    # broker, at 1.68 even alone there, and would land above 0.85 on every other broker as they are. The planner
    # gave it its broker to itself and stopped (1.50 at the end), where ThresholdShedder, unloading it again and
    # again, ended at 0.67. Now a broker where it lands lowest alone is emptied for it in the same plan.
    model, start, end, result = _hot_topic_loop("random-135", 6)
    assert end != start and model.brokers[end].cores > model.brokers[start].cores
    assert result.max_usage[0] > 1.5 and max(result.max_usage[-2:]) < 0.7, result.max_usage  # was 1.45
    assert result.summary()["guard_cut"] == 0, result.summary()


def test_a_hot_topic_above_the_threshold_on_every_broker_moves_to_the_emptied_broker_where_it_lands_lowest() -> None:
    # random-153 (unseen when found: capacities x1/x1.5, convex CPU K=3, hidden speeds): alone, the hot topic
    # keeps its small broker at 2.1; alone on an emptied bigger broker it would be at 1.1, still above 0.85.
    # MakeRoom emptied a broker only where the topic would land at most at the threshold, so the planner gave
    # the topic its broker to itself and left it at 2.1 for the whole run (ThresholdShedder ended at 1.09).
    # Now it empties the bigger broker where the topic lands lowest, as the guard's own rule allows (above
    # the threshold on every broker, lowest there, twice the predicted arrival still below the source).
    model, start, end, result = _hot_topic_loop("random-153", 4)
    assert end != start and model.brokers[end].cores > model.brokers[start].cores
    assert result.max_usage[0] > 2.0 and max(result.max_usage[-2:]) < 1.3, result.max_usage  # was 2.04 to 2.09
    assert result.summary()["guard_cut"] == 0, result.summary()


def test_a_hot_topic_move_the_guard_would_refuse_is_not_planned_and_its_broker_is_lowered_instead() -> None:
    # random-157 (unseen when found: linear CPU, capacities x1/x1.5): the hot topic's broker sat at 1.07. The
    # planner planned the topic whole onto the broker where it would land lowest (0.69), every minute, and the
    # guard cut it every time (twice the arrival the guard predicts would not stay below the source): the broker
    # stayed at 1.07 for the whole run, where AvgShedder ended at 0.68. Now a whole move the guard would refuse
    # is not planned, and the moves the guard keeps are: isolated, the topic kept its broker at 0.70 (its other
    # bundles off); since a hot topic above the target alone gets a bigger broker emptied for it where that
    # halves its excess (the test below), it goes there, in a move the guard keeps as overload relief (0.53).
    model, start, end, result = _hot_topic_loop("random-157", 4)
    assert end != start and model.brokers[end].cores > model.brokers[start].cores
    assert result.max_usage[0] > 1.0 and max(result.max_usage[-2:]) < 0.6, result.max_usage  # was 1.07, then 0.70
    assert result.summary()["guard_cut"] == 0, result.summary()


def test_a_hot_topic_above_the_target_alone_gets_a_bigger_broker_emptied_where_that_halves_its_excess() -> None:
    # random-253 (unseen when found: capacities x1/x1.5, hidden speeds up to +30 %, idle 24 %): alone, the hot
    # topic keeps its small broker at 0.80, below the overload threshold, so a bigger broker was emptied for it
    # only above the threshold: the planner isolated it there and the run ended at 0.80, where AvgShedder ended
    # at 0.56. Between the target and the threshold a bigger broker is now emptied for it where it lands at
    # most halfway back to the target (the guard keeps the move as overload relief in the first plan).
    model, start, end, result = _hot_topic_loop("random-253", 4)
    assert end != start and model.brokers[end].cores > model.brokers[start].cores
    assert result.max_usage[0] > 1.1 and max(result.max_usage[-2:]) < 0.6, result.max_usage  # was 0.80
    assert result.summary()["guard_cut"] == 0, result.summary()


def test_a_hot_topic_on_a_slower_broker_moves_whole_to_where_it_lands_lowest_even_above_the_threshold() -> None:
    # random-212 (unseen when found: equal brokers, hidden speeds up to +60 %): the hot topic's broker is a slow
    # one, at 3.5 with its neighbours and 1.9 with the topic alone; on a typical broker the topic lands at about
    # 1.3, above 0.85 like everywhere else. The planner isolated it where it was (2.11 at the end) where
    # AvgShedder, which moved it, ended at 1.69. Now it moves whole to the broker where the guard predicts it
    # lands lowest (the guard keeps it there as overload relief), before its neighbours are moved anywhere.
    _, start, end, result = _hot_topic_loop("random-212", 4, seed=2)
    assert end != start
    assert result.max_usage[0] > 3.0 and max(result.max_usage[-2:]) < 1.5, result.max_usage  # was 1.94 to 2.11
    assert result.summary()["guard_cut"] == 0, result.summary()


def test_a_hot_topic_that_lands_lower_elsewhere_only_by_its_sources_queue_stays_and_is_isolated() -> None:
    # random-207 (unseen when found: a convex cost): the source reports 1.5 times a typical broker's cost per
    # message, so by that cost the topic alone would keep it at 0.94 and it would land at 0.87 elsewhere. It
    # landed at 1.24 there (moved whole), where isolated on its own broker it runs at 0.70: its source's cost
    # was a queue near saturation that leaves with the neighbours. A whole move is made only where it wins
    # were half of that excess cost queueing.
    _, start, end, result = _hot_topic_loop("random-207", 4, seed=2)
    assert end == start
    assert max(result.max_usage[1:]) < 0.75, result.max_usage  # was 1.24 one cycle after the move


def test_a_hot_topic_move_the_guard_would_cut_by_a_hair_is_not_planned() -> None:
    # random-5 / seed 2: the planner's copy of the guard's relief rule (twice the predicted arrival below the
    # source) passed at 1.576 against the source's 1.577; the guard, predicting the split's child from its
    # topics' rates, found 1.588 and cut the move (and the split): the cycle was lost, the broker at 1.60 for a
    # minute. The copy keeps a margin of the minimum gain, and the topic is isolated at once.
    _, start, end, result = _hot_topic_loop("random-5", 2, seed=2)
    assert end == start
    assert result.summary()["guard_cut"] == 0, result.summary()
    assert result.max_usage[1] < 1.0, result.max_usage  # was 1.60


def test_no_broker_is_emptied_for_a_hot_topic_its_broker_carries_below_the_overload_threshold() -> None:
    # the same scenario on equal brokers: alone, the topic keeps its broker below 85 %, and emptying another
    # one would lower nothing (it lands as high anywhere): the planner isolates it where it is, as before
    _, start, end, _ = _hot_topic_loop(None, 6)
    assert end == start


def test_a_broker_held_up_by_one_hot_topic_is_left_to_that_topic_alone() -> None:
    run = build("hot-single-topic-unsplittable", 2)
    model = run.model
    result = run_closed_loop(run, "GlobalPlanner")
    hot = max(model.topics, key=lambda t: t.burst)
    bundle = model.bundle_of_topic(hot.name)
    owner = model.owners[bundle]
    assert [b for b, o in model.owners.items() if o == owner and model.topics_of(b)] == [bundle]
    assert any("one hot topic" in w or "single hot topic" in w for w in result.warnings)
    assert result.summary()["final_max"] <= result.summary()["floor"] + 0.002


def test_a_hot_topics_broker_is_left_to_it_even_by_bundles_the_model_puts_below_min_gain() -> None:
    # giving a hot topic its broker to itself moves every neighbour off, even one the model puts at a quarter
    # of a point (below min_gain): it is the cluster's worst broker, and the model's estimate of a small bundle
    # can be far off (keeping them to min_gain left it 3 to 8 points higher under the per-topic-cost model)
    hot, mid, tiny = "t/hot/0x00000000_0xffffffff", "t/mid/0x00000000_0xffffffff", "t/tiny/0x00000000_0xffffffff"
    owned = {"H:8080": {hot: 80, mid: 6, tiny: 0.3}}
    owned.update({f"B{i}:8080": _tiles(f"t/ns{i}", [10, 10, 10, 10]) for i in range(4)})
    cycle = _nic_cluster(owned)
    cycle["brokers"]["H:8080"]["lastStats"][hot]["topics"] = 1  # one topic: neither split nor moved
    cyc = _decide_confirmed(cycle)["cycles"][0]
    moved = {u["bundle"] for u in cyc["unloads"]}
    assert mid in moved and tiny in moved and hot not in moved, cyc["unloads"]
    assert any("single hot topic" in w for w in cyc["stats"]["warnings"])
    # what stays above the target says why, and what an operator who knows a faster broker can do
    [why] = [w for w in cyc["stats"]["warnings"] if "stays above target" in w]
    assert "a faster broker is not credited" in why and "namespaces unload <namespace> -b <range> -d <broker>" in why


def test_a_swinging_bundle_is_planned_at_its_peak_and_nothing_chases_the_swing() -> None:
    # an on/off consumer: no move at all, in either phase. Its first report (on) is far above the trigger, which
    # acts at once, but a plan (isolate its topic: a split and two moves) would take the broker from 0.72 only to
    # 0.70: not worth acting on one report. It waits for 3 reports to confirm it, which the off phase never gives.
    result = run_closed_loop(build("periodic-jitter", 2), "GlobalPlanner")
    assert sum(result.moves_per_cycle) == 0 and result.splits == 0, result.moves_per_cycle
    assert any("not acted on until 3 consecutive load reports confirm it" in w for w in result.warnings)


def test_a_destination_the_guard_would_refuse_is_not_chosen_so_the_guard_never_picks_a_swinging_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # random-39 (unseen models 33-40): a broker with a slower CPU (hidden speed) is the busiest; the guard
    # predicts its bundles by their share of its usage, so it refused the planner's destinations and put two
    # bundles itself on the least-used broker by that one report: the on/off consumer's broker, in its off
    # phase. In the on phase that broker reached 0.75, and the plan ended 6 points above doing nothing.
    # The planner now picks only destinations the guard's prediction accepts (below the overload threshold).
    # The on/off consumer comes and goes within the hour, so one decision a minute no longer acts on it (confirm_ms);
    # with three reports alone confirming a broker, as when this was found, the planner moves and the guard
    # replaces none of its destinations.
    def run(strategy: str) -> dict[str, Any]:
        scenario = build("periodic-jitter", 2, load_model=random_model("random-39"), rate_noise=0.03)
        return run_closed_loop(scenario, strategy).summary()

    idle = run("no-action")
    patient = run("GlobalPlanner")
    assert patient["moves"] == 0 and patient["final_max"] == idle["final_max"], (patient, idle)
    planner = get_shedder("GlobalPlanner")  # the registered instance decide_scenario runs
    monkeypatch.setattr(planner, "settings", dataclasses.replace(planner.settings, confirm_ms=0))
    planned = run("GlobalPlanner")
    assert planned["guard_replaced"] == 0, planned
    assert planned["moves"] >= 1 and planned["final_max"] < idle["final_max"] - 0.02, (planned, idle)


def test_a_move_that_would_swap_its_pair_for_a_small_gain_is_not_made(monkeypatch: pytest.MonkeyPatch) -> None:
    # random-185 (robustness, 10 % noise, scale-up, one decision a minute, seed 1): filling the new brokers, a move
    # predicted to take broker-9 from 0.42 to 0.61 for a source at 0.63 (2 points gained) took it to 0.70 (a
    # speed the reports do not explain), above all doing nothing left (0.65), and below the trigger nothing
    # moved it back. A move's destination must now stay below its source had the bundle cost 1.5x the
    # predicted increase (arrival_doubt); the fill is made of other bundles and ends below doing nothing.
    def run(strategy: str) -> dict[str, Any]:
        scenario = build("scale-up", 1, load_model=random_model("random-185"), noise=0.1, rate_noise=0.1)
        return run_closed_loop(scenario, strategy).summary()

    idle = run("no-action")
    doubting = run("GlobalPlanner")
    assert doubting["moves"] >= 1 and doubting["final_max"] < idle["final_max"] - 0.02, (doubting, idle)
    planner = get_shedder("GlobalPlanner")
    monkeypatch.setattr(planner, "settings", dataclasses.replace(planner.settings, arrival_doubt=1.0))
    believing = run("GlobalPlanner")  # as before: the prediction taken as it is
    assert believing["final_max"] > idle["final_max"] + 0.02, (believing, idle)


def test_a_broker_far_above_the_trigger_is_acted_on_at_once_when_the_plan_relieves_it() -> None:
    # the same rule does not hold back a plan worth it: a broker far above (below the overload threshold) whose
    # hot bundle a split can spread is relieved on the first report
    model = _model("hot-bundle-needs-split")
    cycle = _cycle(model)
    cyc = _decide(cycle)["cycles"][0]
    st = cyc["stats"]
    assert cyc["reason"] == "Overloaded" and st["maxUsageBefore"] < 0.85 and cyc["unloads"], cyc["reason"]
    assert st["maxUsageAfter"] <= st["trigger"]


def test_a_broker_its_reports_contradict_is_relieved_in_proportion_and_receives_nothing(monkeypatch) -> None:
    # with the band of then (trigger 5 points) and a target of 3 points or 6 %, periodic jitter once went
    # wrong: the model put broker-0 at 0.82 (its on/off consumer's remembered peak), its reports at 0.57,
    # so it was clipped; moving a big
    # bundle off it was then predicted to take it to 0.32, and the same plan moved four bundles onto it.
    # Its consumer came back on and took it to 0.79. A clipped broker is relieved in proportion and is no
    # destination in that plan (core.planner.load_model.ClusterView.clip)
    planner = get_shedder("GlobalPlanner")
    monkeypatch.setattr(
        planner,
        "settings",
        dataclasses.replace(planner.settings, target_abs=0.03, target_rel=0.06, trigger_abs=0.05, trigger_rel=0.10),
    )
    result = run_closed_loop(build("periodic-jitter", 1, rate_noise=0.03), "GlobalPlanner")
    assert max(result.max_usage) < 0.6, [round(u, 3) for u in result.max_usage]


def test_a_bundle_planned_at_a_peak_its_topics_do_not_show_now_is_not_split_until_they_do() -> None:
    # an on/off consumer in its off phase: the bundle is planned at its remembered peak, but its topics'
    # rates now do not say which topic carries that peak. Cut by today's rates, the part holding the
    # consumer's topic looked small, moved, and took its destination to 1.36 when the consumer came back
    # (a simulated day of periodic jitter under convex CPU, seed 2). Split when the peak shows.
    model = _model("hot-bundle-needs-split", 2)
    cycle = _cycle(model)
    split = _decide(cycle)["cycles"][0]["splits"][0]  # as it is: split at once
    bundle, broker = split["bundle"], split["broker"]
    s = cycle["bundleData"][bundle]["shortTermData"]
    peak = {
        "msgRate": 2 * (s["msgRateIn"] + s["msgRateOut"]),
        "msgThroughputIn": 2 * s["msgThroughputIn"],
        "msgThroughputOut": 2 * s["msgThroughputOut"],
        "atMs": cycle["nowMs"] - 60_000,
    }
    # the broker's reports showed its usage at that peak 5 minutes ago: believed hot, not clipped
    state = {
        "globalPlanner": {"peaks": {bundle: peak}, "highs": {broker: {"usage": 5.0, "atMs": cycle["nowMs"] - 300_000}}}
    }
    out = _decide(cycle, state=state)["cycles"][0]
    assert all(sp["bundle"] != bundle for sp in out["splits"]), out["splits"]
    assert any(w.startswith(f"{bundle}: its traffic swings") for w in out["stats"]["warnings"]), out["stats"][
        "warnings"
    ]


def test_a_broker_is_hot_only_as_far_as_its_own_reports_showed_it() -> None:
    # the planner remembers a peak of a bundle's traffic; how much CPU that peak costs is the load model's
    # guess. Where the broker's own reports never showed the usage the guess predicts (a CPU spent on
    # topics and connections, not messages), the planner believes the reports: no move. Where the reports
    # did show it, within the peak window, it acts on it.
    model = _model("steady-with-noise")
    cycle = _cycle(model)
    now = cycle["nowMs"]
    broker = "broker-0:8080"
    bundle = max(
        cycle["brokers"][broker]["lastStats"], key=lambda b: cycle["brokers"][broker]["lastStats"][b]["msgRateOut"]
    )
    s = cycle["brokers"][broker]["lastStats"][bundle]
    peak = {
        "msgRate": 12 * (s["msgRateIn"] + s["msgRateOut"]),
        "msgThroughputIn": 12 * s["msgThroughputIn"],
        "msgThroughputOut": 12 * s["msgThroughputOut"],
        "atMs": now - 60_000,
    }
    state = {"globalPlanner": {"peaks": {bundle: peak}}}
    doubted = _decide(cycle, state=copy.deepcopy(state))["cycles"][0]
    assert doubted["unloads"] == [] and doubted["reason"] == "Balanced", doubted["detail"]
    modelled, clipped = doubted["stats"]["clippedToReports"][broker]
    assert modelled > doubted["stats"]["trigger"] > clipped, doubted["stats"]
    # the same peak, and the broker's reports showed that usage 5 minutes ago: believed, acted on at once
    state["globalPlanner"]["highs"] = {broker: {"usage": modelled, "atMs": now - 5 * 60_000}}
    believed = _decide(cycle, state=copy.deepcopy(state))["cycles"][0]
    assert believed["unloads"] and {u["broker"] for u in believed["unloads"]} == {broker}, believed["detail"]
    assert broker not in believed["stats"].get("clippedToReports", {})
    # ... but not 2 hours ago: the peak window (1 h) has passed, the reports no longer vouch for it
    state["globalPlanner"]["highs"] = {broker: {"usage": modelled, "atMs": now - 2 * 60 * 60_000}}
    assert _decide(cycle, state=copy.deepcopy(state))["cycles"][0]["unloads"] == []


def test_the_planner_memory_of_membership_and_model_is_validated() -> None:
    with pytest.raises(ScenarioError) as err:
        strategy_state_from_json({"globalPlanner": {"coefficients": {"cpu": [1.0, 2.0]}}})
    assert err.value.field == "state.globalPlanner.coefficients.cpu"
    with pytest.raises(ScenarioError) as err:
        strategy_state_from_json({"globalPlanner": {"coefficients": {"cpu": [1.0, -2.0, 0, 0, 0]}}})
    assert err.value.field == "state.globalPlanner.coefficients.cpu[1]"
    with pytest.raises(ScenarioError) as err:
        strategy_state_from_json({"globalPlanner": {"membership": {"brokers": "A:8080"}}})
    assert err.value.field == "state.globalPlanner.membership.brokers"
    model = _model("one-hot-broker")
    state = _decide(_cycle(model))["state"]
    mem = state["globalPlanner"]
    assert mem["membership"]["brokers"] == sorted(model.live_brokers()) and set(mem["coefficients"]) >= {
        "cpu",
        "bandwidthOut",
    }
    assert strategy_state_from_json(state).to_json() == state  # round trip


def _steady_band() -> tuple[ClusterModel, dict[str, Any], float, float, float]:
    """A balanced cluster's model and first cycle, its ideal and trigger, and broker-0's planned usage."""
    model = _model("steady-with-noise")
    cycle = _cycle(model)
    stats = _decide(cycle)["cycles"][0]["stats"]
    return model, cycle, stats["ideal"], stats["trigger"], stats["brokers"]["broker-0:8080"]["usage"]


def test_a_broker_just_above_the_trigger_waits_for_three_reports_one_far_above_does_not() -> None:
    # a load report is one sample, two can be the peak of a load that comes and goes: just above the
    # trigger, the planner acts only when three consecutive reports see it there (Pulsar's AvgShedder
    # counts hits the same way), spanning confirm_ms (here 45 minutes apart); twice the band above, at once
    model, cycle, ideal, trigger, usage = _steady_band()
    gap = CONFIRM_GAP_MS

    def bumped(to: float, at_ms: int) -> dict[str, Any]:
        return _bumped(cycle, "broker-0:8080", to / usage, at_ms)

    marginal = ideal + 1.4 * (trigger - ideal)
    first = _decide(bumped(marginal, cycle["nowMs"]))
    c0 = first["cycles"][0]
    assert c0["unloads"] == [] and c0["stats"]["maxUsageBefore"] > trigger
    assert c0["reason"] == "HitCount" and "1 consecutive load report(s): waiting for 3" in c0["detail"], c0
    second = _decide(bumped(marginal, cycle["nowMs"] + gap), state=first["state"])
    c1 = second["cycles"][0]
    assert c1["unloads"] == [] and "2 consecutive load report(s): waiting for 3, spanning" in c1["detail"], c1
    # a report back within the band starts the count again
    calm = _decide(bumped(ideal, cycle["nowMs"] + 2 * gap), state=second["state"])
    again = _decide(bumped(marginal, cycle["nowMs"] + 3 * gap), state=calm["state"])
    assert again["cycles"][0]["unloads"] == []
    assert again["state"]["globalPlanner"]["above"].get("broker-0:8080", 0) <= 1
    third = _decide(bumped(marginal, cycle["nowMs"] + 2 * gap), state=second["state"])
    assert third["cycles"][0]["unloads"], third["cycles"][0]["stats"]
    # far above the band: the first report is enough
    far = _decide(bumped(ideal + 2.5 * (trigger - ideal), cycle["nowMs"]))
    assert far["cycles"][0]["unloads"]


def test_one_decision_a_minute_a_broker_above_the_trigger_waits_until_its_reports_span_ninety_minutes() -> None:
    # flash-crowd, backlog-drain, perf-test-namespace and bookie-recovery (held-out scenario sets 1 to 4, one decision
    # a minute): a load that came and went within the hour was confirmed by three reports in three minutes, and the
    # one to three moves made for it stayed once it was gone, 3 to 9 points above doing nothing. The reports that
    # confirm a broker also span confirm_ms: one a minute, 91 of them; far above the band, at once as before
    model, cycle, ideal, trigger, usage = _steady_band()
    need = 1 + PlannerSettings().confirm_ms // 60_000
    assert need == 91

    def bumped(to: float, minute: int) -> dict[str, Any]:
        return _bumped(cycle, "broker-0:8080", to / usage, cycle["nowMs"] + minute * 60_000)

    marginal = ideal + 1.4 * (trigger - ideal)
    state: dict[str, Any] | None = None
    for minute in range(need - 1):
        out = _decide(bumped(marginal, minute), state=state)
        state, c = out["state"], out["cycles"][0]
        assert c["unloads"] == [] and c["reason"] == "HitCount", (minute, c["detail"])
    assert f"in {need - 1} consecutive load report(s): waiting for {need}, spanning at least 90 min" in c["detail"], c
    assert _decide(bumped(marginal, need - 1), state=state)["cycles"][0]["unloads"]
    # a report back within the band starts the count again
    calm = _decide(bumped(ideal, need - 1), state=state)
    assert _decide(bumped(marginal, need), state=calm["state"])["cycles"][0]["unloads"] == []
    # twice the band above, on its first report
    assert _decide(bumped(ideal + 2.5 * (trigger - ideal), 0))["cycles"][0]["unloads"]


def test_a_broker_this_planner_loaded_is_relieved_from_its_first_report_above_the_trigger() -> None:
    # the planner put a bundle on broker-0 an hour ago, predicted within the target: a report above the trigger
    # there is its own prediction proved wrong (a destination chosen at its daily low that rose with the day,
    # robustness run periodic-jitter / random-188 / load x1.3 / dag: 0.863 between the three hourly reports
    # that confirmed it, where doing nothing peaked at 0.815), so it is not left to two more reports
    model, cycle, ideal, trigger, usage = _steady_band()
    now = cycle["nowMs"] + 60_000
    marginal = _bumped(cycle, "broker-0:8080", (ideal + 1.4 * (trigger - ideal)) / usage, now)
    moved_in = next(b for b, o in model.owners.items() if o == "broker-0:8080")

    def loaded(ago_ms: int, cycle_ms: int = 60 * 60_000) -> dict[str, Any]:
        move = {"from": "broker-1:8080", "to": "broker-0:8080", "atMs": now - ago_ms}
        # the last cycle ran cycle_ms ago (the DAG's hourly cadence by default), with these brokers
        membership = {"brokers": sorted(cycle["brokers"]), "atMs": now - cycle_ms, "changedMs": None}
        return {"globalPlanner": {"moves": {moved_in: move}, "membership": membership}}

    acted = _decide(marginal, state=loaded(60 * 60_000))["cycles"][0]
    assert acted["unloads"] and {u["broker"] for u in acted["unloads"]} == {"broker-0:8080"}, acted["detail"]
    assert "broker-0:8080 acted on from 1 load report(s) above the trigger, not 3" in acted["detail"]
    assert "moved bundles onto it 60 min ago" in acted["detail"], acted["detail"]
    # a move older than the history window (6 h) no longer counts: three reports, like any other broker
    waits = _decide(marginal, state=loaded(7 * 60 * 60_000))["cycles"][0]
    assert waits["unloads"] == [] and waits["reason"] == "HitCount", waits["detail"]
    # one decision a minute: two more reports take two minutes, less than a cool-down; they are waited for
    minute = _decide(marginal, state=loaded(60 * 60_000, cycle_ms=60_000))["cycles"][0]
    assert minute["unloads"] == [] and minute["reason"] == "HitCount", minute["detail"]


def test_the_planner_memory_reads_an_older_state_and_refuses_a_bad_hit_count() -> None:
    from pulsar_rebalance.errors import ScenarioError

    assert planner_memory_from_json({"above": ["b1", "b2"]}, "state.globalPlanner").above == {"b1": 1, "b2": 1}
    assert planner_memory_from_json({"above": {"b1": 2}}, "state.globalPlanner").to_json()["above"] == {"b1": 2}
    with pytest.raises(ScenarioError, match="state.globalPlanner.above"):
        planner_memory_from_json({"above": {"b1": 0}}, "state.globalPlanner")
    assert planner_memory_from_json({"below": {"b1": 3}}, "state.globalPlanner").to_json()["below"] == {"b1": 3}
    with pytest.raises(ScenarioError, match="state.globalPlanner.below"):
        planner_memory_from_json({"below": {"b1": True}}, "state.globalPlanner")


def test_a_move_the_reports_show_undone_does_not_freeze_its_bundle() -> None:
    """A planned move that did not happen (the do-no-harm guard cut it, the operator rejected the plan, the
    executor dropped it) leaves its bundle on its source: the next cycle may plan it again, instead of
    treating it as moved (cool-down, Pulsar's grace period for the same decision's unload)."""
    x, b2, c1 = "t/ns/0x00000000_0x40000000", "t/ns/0x40000000_0x80000000", "t/ns/0x80000000_0xffffffff"
    owned = {"A:8080": {}, "B:8080": {x: 60, b2: 30}, "C:8080": {c1: 40}}
    first = _decide(_nic_cluster(owned))
    planned = [(u["bundle"], u["broker"], u["destination"]) for u in first["cycles"][0]["unloads"]]
    assert planned == [(b2, "B:8080", "A:8080")]  # the smallest bundle that alone brings B to the target
    assert first["state"]["recentlyUnloadedBundles"] == {b2: NOW}

    later = _nic_cluster(owned)  # a minute later the reports still show it on B: the move never happened
    later["nowMs"] = NOW + 60_000
    again = _decide(later, first["state"])["cycles"][0]
    assert [(u["bundle"], u["broker"], u["destination"]) for u in again["unloads"]] == planned

    moved = _nic_cluster({"A:8080": {b2: 30}, "B:8080": {x: 60}, "C:8080": {c1: 40}})  # the move happened
    moved["nowMs"] = NOW + 60_000
    after = _decide(moved, first["state"])
    assert not after["cycles"][0]["unloads"]
    assert strategy_state_from_json(after["state"]).planner["moves"][b2]["from"] == "B:8080"  # still remembered


def test_a_report_counts_towards_confirmation_only_when_the_report_itself_is_above_the_trigger() -> None:
    # an on/off consumer's bundle is planned at its remembered peak, so its broker's planned usage stays above
    # the trigger while the consumer is off; counting that as a report confirmed a peak lasting two reports
    # with a third taken in the off phase, and the planner moved the consumer's load onto another broker (a
    # simulated day of periodic jitter under in-out-fanout, both seeds: 2 moves, ending above doing nothing)
    model = _model("steady-with-noise")
    cycle = _cycle(model)
    now, broker = cycle["nowMs"], "broker-0:8080"
    stats = cycle["brokers"][broker]["lastStats"]
    bundle = max(stats, key=lambda b: stats[b]["msgRateOut"])
    s = stats[bundle]
    peak = {
        "msgRate": 2 * (s["msgRateIn"] + s["msgRateOut"]),
        "msgThroughputIn": 2 * s["msgThroughputIn"],
        "msgThroughputOut": 2 * s["msgThroughputOut"],
        "atMs": now - 60_000,
    }
    # two reports above the trigger before this one, which shows the broker in the band: the count restarts
    state = {
        "globalPlanner": {
            "peaks": {bundle: peak},
            "highs": {broker: {"usage": 5.0, "atMs": now - 120_000}},
            "above": {broker: 2},
        }
    }
    out = _decide(cycle, state=copy.deepcopy(state))
    cyc = out["cycles"][0]
    st = cyc["stats"]
    assert st["trigger"] + st["noise"] < st["maxUsageBefore"] < st["ideal"] + 2 * (st["trigger"] - st["ideal"]), st
    assert cyc["unloads"] == [] and cyc["reason"] == "HitCount", cyc["detail"]
    assert "in 0 consecutive load report(s)" in cyc["detail"] and "its load reports show" in cyc["detail"]
    assert broker not in out["state"]["globalPlanner"]["above"]
    # no remembered peak, the report itself above the trigger (30 % more usage): the third report confirms it
    hot = copy.deepcopy(cycle)
    for key in ("cpu", "bandwidthIn", "bandwidthOut"):
        hot["brokers"][broker][key]["usage"] *= 1.3
    confirmed = _decide(hot, state={"globalPlanner": {"above": {broker: 2}}})
    assert confirmed["state"]["globalPlanner"]["above"][broker] == 3
    assert {u["broker"] for u in confirmed["cycles"][0]["unloads"]} == {broker}, confirmed["cycles"][0]["detail"]


def test_a_fill_that_cannot_lower_the_busiest_broker_is_not_planned() -> None:
    # A is empty, so it is filled, but the busiest broker C holds two big bundles: moving either would leave C far
    # below the ideal itself. Filling A from B alone would leave C where it is: a move for nothing, so no fill.
    big = _tiles("t/c", [37.5, 18.75])  # 0.30 + 0.15 of C's NIC
    cycle = _nic_cluster(
        {
            "A:8080": {},
            "B:8080": _tiles("t/b", [6.25] * 9),  # 0.45 in small bundles
            "C:8080": big,
            **{f"{b}:8080": _tiles(f"t/{b}", [7.5] * 7) for b in "DEF"},  # 0.42
        }
    )
    cyc = _reports(cycle)[-1]["cycles"][0]
    st = cyc["stats"]
    assert st["maxUsageBefore"] <= st["trigger"] and st["brokers"]["A:8080"]["usage"] < st["ideal"] / 2, st
    assert cyc["label"] == "Skip" and not cyc["unloads"], cyc
    assert "would take the busiest broker only from 0.4500 to 0.4500" in st["fillNotWorthIt"], st
    assert "filling A:8080 would take the busiest broker only" in cyc["detail"], cyc["detail"]


def _bumped(cycle: dict[str, Any], broker: str, factor: float, at_ms: int) -> dict[str, Any]:
    """``cycle`` at ``at_ms`` with ``broker``'s reported usage of every resource times ``factor``."""
    c = copy.deepcopy(cycle)
    c["nowMs"] = at_ms
    rep = c["brokers"][broker]
    for key in ("cpu", "bandwidthIn", "bandwidthOut", "memory", "directMemory"):
        if isinstance(rep.get(key), dict):
            rep[key]["usage"] *= factor
    return c


def test_a_load_that_comes_and_goes_is_not_acted_on_from_one_report_far_above_the_trigger() -> None:
    # a broker whose reports were above the trigger and fell back below it within the window (an on/off
    # consumer) is acted on only when three consecutive reports confirm it, or above the overload threshold:
    # one report of its peak read far above the trigger, by noise, and 6 bundles left a broker whose reports
    # read 0.10 every other pair of minutes (periodic-jitter under random-5)
    model = _model("steady-with-noise")
    cycle = _cycle(model)
    broker, t0 = "broker-0:8080", cycle["nowMs"]
    stats = _decide(cycle)["cycles"][0]["stats"]
    ideal, trigger, usage = stats["ideal"], stats["trigger"], stats["brokers"][broker]["usage"]
    far, calm = (ideal + 2.5 * (trigger - ideal)) / usage, ideal / usage
    assert ideal + 2.5 * (trigger - ideal) < 0.85  # below Pulsar's overload threshold

    up = _decide(_bumped(cycle, broker, 1.4 * (trigger - ideal) / usage + ideal / usage, t0))
    assert up["cycles"][0]["reason"] == "HitCount"  # above the trigger, not far: one hit
    down = _decide(_bumped(cycle, broker, calm, t0 + 60_000), state=up["state"])
    assert down["state"]["globalPlanner"]["fell"] == {broker: t0 + 60_000}
    # a report far above the trigger within the hour: not acted on from that one report (the state carries
    # only the broken run here, so the report is read as is, not smoothed against the calm one)
    fell = {"globalPlanner": {"fell": {broker: t0 + 60_000}}}
    peak = _decide(_bumped(cycle, broker, far, t0 + 120_000), state=copy.deepcopy(fell))
    c = peak["cycles"][0]
    assert c["stats"]["maxUsageBefore"] > ideal + 2 * (trigger - ideal), c["stats"]
    assert c["unloads"] == [] and c["reason"] == "HitCount", c
    assert "fell back below that level 1 min ago" in c["detail"] and "only when 3 confirm it" in c["detail"], c
    # the same report with no broken run behind it: acted on at once (the fast path is unchanged)
    assert _decide(_bumped(cycle, broker, far, t0 + 120_000))["cycles"][0]["unloads"]
    # its reports confirm it: acted on
    state = peak["state"]
    for i in (1, 2):
        out = _decide(_bumped(cycle, broker, far, t0 + 120_000 + i * CONFIRM_GAP_MS), state=state)
        state = out["state"]
    assert out["cycles"][0]["unloads"] and state["globalPlanner"]["above"][broker] == 3
    # above Pulsar's overload threshold: at once, broken run or not
    hot = _decide(_bumped(cycle, broker, 0.9 / usage, t0 + 120_000), state=copy.deepcopy(fell))
    assert hot["cycles"][0]["unloads"], hot["cycles"][0]["detail"]
    # forgotten after the window (an hour): the fast path again
    later = _decide(_bumped(cycle, broker, calm, t0 + 62 * 60_000), state=copy.deepcopy(fell))
    assert broker not in later["state"]["globalPlanner"]["fell"]
    assert _decide(_bumped(cycle, broker, far, t0 + 62 * 60_000), state=copy.deepcopy(fell))["cycles"][0]["unloads"]


def test_periodic_jitter_under_a_convex_random_model_gets_no_move_at_the_minute_cadence() -> None:
    # the run that found the rule above: random-5 (a convex CPU curve, K=1.5) makes the on/off consumer's
    # broker swing between 0.66 and 0.10; doing nothing is the right answer at one decision a minute
    run = build("periodic-jitter", 1, load_model=random_model("random-5"), rate_noise=0.03)
    result = run_closed_loop(run, "GlobalPlanner", cadence="minute")
    assert result.moves == 0, result.summary()


def test_the_planner_memory_of_broken_runs_is_validated() -> None:
    assert planner_memory_from_json({"fell": {"b1": 5}}, "state.globalPlanner").to_json()["fell"] == {"b1": 5}
    with pytest.raises(ScenarioError, match=r"state\.globalPlanner\.fell"):
        planner_memory_from_json({"fell": {"b1": "soon"}}, "state.globalPlanner")
    with pytest.raises(ScenarioError, match=r"state\.globalPlanner\.fell"):
        planner_memory_from_json({"fell": [1]}, "state.globalPlanner")


def test_a_swing_first_seen_in_its_quiet_phase_is_remembered_at_its_recent_average() -> None:
    # an on/off consumer seen busy for two reports (not yet a swing: the sample equals its average), then
    # quiet: the quiet sample alone made the bundle look small and its broker nearly empty, and a plan moved
    # 3 bundles onto it that the next busy phase overloaded (periodic-jitter, random-64, seed 2)
    model = _model("steady-with-noise")
    cycle = _cycle(model)
    broker = "broker-0:8080"
    stats = cycle["brokers"][broker]["lastStats"]
    bundle = max(stats, key=lambda b: stats[b]["msgRateOut"])
    s = stats[bundle]
    short = cycle["bundleData"][bundle]["shortTermData"]
    busy = {k: 4 * s[k] for k in ("msgRateIn", "msgRateOut", "msgThroughputIn", "msgThroughputOut")}
    short.update(busy, numSamples=3)  # the recent average holds the busy phase
    peak = _decide(cycle)["state"]["globalPlanner"]["peaks"][bundle]
    assert peak["msgRate"] >= busy["msgRateIn"] + busy["msgRateOut"] - 1e-6
    assert peak["msgThroughputOut"] >= busy["msgThroughputOut"] - 1e-6
    # the quiet sample itself is far below it: the peak is not just the last sample
    assert peak["msgRate"] > 2 * (s["msgRateIn"] + s["msgRateOut"])


def test_a_destination_whose_load_swings_is_taken_as_busy_as_its_reports_showed_it(monkeypatch) -> None:
    # random-68 (unseen models 65-72): the on/off consumer's broker has a slower CPU (hidden speed) and a convex
    # curve; with its bundle's remembered peak the model planned it at 0.41 where its busy phase had read 0.55,
    # and in its off phase it received 3 bundles: the next busy phase took it to 0.75, 4 points above doing
    # nothing. As a destination it is now at least what its own reports showed.
    def run() -> Any:
        return build("periodic-jitter", 2, load_model=random_model("random-68"), rate_noise=0.03)

    seen: list[dict[str, Any]] = []
    real = closed_loop.decide_scenario

    def spy(doc: dict[str, Any]) -> dict[str, Any]:
        out = real(doc)
        seen.append(out["cycles"][0])
        return out

    monkeypatch.setattr(closed_loop, "decide_scenario", spy)
    planned = run_closed_loop(run(), "GlobalPlanner", cadence="minute").summary()
    monkeypatch.undo()
    idle = run_closed_loop(run(), "no-action", cadence="minute").summary()
    assert planned["final_max"] <= idle["final_max"] + 0.005, (planned, idle)
    lifted = [c for c in seen if c["stats"].get("liftedToReports")]
    assert lifted, "the swinging broker was never lifted"
    for c in lifted:
        for b, (modelled, high) in c["stats"]["liftedToReports"].items():
            assert high > modelled
            for u in c["unloads"]:
                if u["destination"] == b:
                    assert u["predicted"]["destinationBefore"] >= round(high, 4) - 1e-4, u


def test_a_daily_peak_relieved_is_not_packed_onto_destinations_filled_to_the_target() -> None:
    # random-146 (unseen when found: convex CPU K=3, capacities x1/x1.5), periodic jitter for two simulated days
    # at the DAG's cadence: one broker's topics peak together; relieved at its peak, its bundles went to the
    # tightest fits below the target, two brokers filled to it, which then rose with the moved bundles'
    # own swing and sat above doing nothing's worst broker in every quiet hour (0.614 against 0.523 at the
    # end, 0.605 against 0.574 on average). Each bundle now goes to the tightest fit below the ideal (0.542 at
    # the end, the quietest hour of doing nothing's day; 0.550 on average).
    def run() -> Any:
        return build("periodic-jitter", 1, load_model=random_model("random-146"), rate_noise=0.03)

    planned = run_closed_loop(run(), "GlobalPlanner", cadence="dag")
    idle = run_closed_loop(run(), "no-action", cadence="dag")
    assert planned.moves > 0
    assert planned.summary()["final_max"] < idle.summary()["final_max"] + 0.03, (planned.max_usage, idle.max_usage)
    day2 = slice(len(idle.max_usage) // 2, None)
    assert max(planned.max_usage[day2]) < max(idle.max_usage[day2]), (planned.max_usage, idle.max_usage)
    assert statistics.mean(planned.max_usage[1:]) < statistics.mean(idle.max_usage[1:]), (
        planned.max_usage,
        idle.max_usage,
    )


def test_a_fill_goes_on_to_its_level_after_relief_lands_on_the_emptied_broker(monkeypatch: pytest.MonkeyPatch) -> None:
    # Rolling restarts at the DAG's cadence (random-7, random-4): the first hourly plan relieves an overloaded
    # broker onto the broker the restart emptied (the tightest fit below the ideal), which lifts it above the
    # level a fill starts at: the brokers sitting between the target and the trigger were never drained into
    # it, and it stayed 25 points below the ideal (random-7: 0.597 at the end, random-4: 0.562). The fill now
    # starts with that relief (random-7) and, once begun, goes on up to its level (random-4): 0.543 and 0.525.
    reasons: list[str] = []
    real = closed_loop.decide_scenario

    def decide(doc: dict[str, Any]) -> dict[str, Any]:
        out = real(doc)
        reasons.extend(u["reason"] for u in out["cycles"][0]["unloads"])
        return out

    monkeypatch.setattr(closed_loop, "decide_scenario", decide)
    for model, below in (("random-7", 0.56), ("random-4", 0.545)):
        reasons.clear()
        run = build("rolling-restart", 1, load_model=random_model(model), rate_noise=0.03)
        result = run_closed_loop(run, "GlobalPlanner", cadence="dag").summary()
        assert result["final_max"] < below and result["moves"] <= 8, (model, result)
        fills = [r for r in reasons if r.startswith("Underloaded: GlobalPlanner:")]
        assert fills, (model, reasons)
        started = "this plan's relief already moves bundles to it" if model == "random-7" else "a fill reached it"
        assert any(started in r for r in fills), (model, fills)


def test_a_hot_topic_the_model_misplaces_is_still_proposed_so_the_guard_can_re_place_it() -> None:
    # random-65: a hot single topic at 12 times a broker's CPU. The model's destinations for it are refused by
    # the guard's overload relief (above the overload threshold at both its estimates) for three minutes; the
    # fourth time the guard re-places it on a broker whose cost per message its reports now show lower, and the
    # cluster ends near the ideal. A planner that stopped proposing what the guard refuses (tried: it applied
    # the relief rule itself) left the topic there and ended at 5.27.
    run = build("hot-single-topic-unsplittable", 1, load_model=random_model("random-65"), rate_noise=0.03)
    result = run_closed_loop(run, "GlobalPlanner", cadence="minute", decisions=12).summary()
    assert result["guard_replaced"] >= 1 and result["final_max"] < 1.0, result


def test_a_hot_broker_left_for_the_next_run_says_its_bundles_gain_less_than_the_noise() -> None:
    # tls-crypto's two CPU generations spread the first reports around the fitted model by 2.9 points, more than
    # any of the hot broker's bundles would take off it: the first hourly plan waits, and says so (not "no
    # destination"); the next run, with a report to compare, measures the noise sample to sample and acts
    from pulsar_rebalance.simulator.cluster import resolve_load_model

    run = build("one-hot-broker", 2, load_model=resolve_load_model("tls-crypto"), noise=0.0)
    first = run_closed_loop(run, "GlobalPlanner", cadence="dag", decisions=1)
    [why] = [w for w in first.warnings if "stays above target" in w]
    assert first.moves == 0 and "movable bundle(s) would lower it by less than" in why, first.warnings
    assert "overloading its destination" not in why
    run = build("one-hot-broker", 2, load_model=resolve_load_model("tls-crypto"), noise=0.0)
    assert run_closed_loop(run, "GlobalPlanner", cadence="dag", decisions=2).moves > 0


def test_a_swing_is_told_from_the_short_term_average_only_while_its_ten_samples_span_an_hour() -> None:
    # Pulsar's short-term average is 10 samples, one a cycle: 10 minutes of one decision a minute, ten hours at the
    # DAG's hourly cadence, where a last sample off it is the day's level changing. Taken for a swing there
    # (follow-the-sun / dag), every bundle's busiest hour was remembered and refreshed, every broker planned far
    # above its own reports as a destination, and no move fitted while one broker sat at 0.62, 7 points above
    # doing nothing's worst
    model, cycle, *_ = _steady_band()
    now = cycle["nowMs"] + 60_000
    busy = copy.deepcopy(cycle)
    busy["nowMs"] = now
    on_0 = sorted(name for name, b in model.owners.items() if b == "broker-0:8080")
    for name in on_0:  # its average three times its last sample: busier in the last 10 samples
        st = busy["bundleData"][name]["shortTermData"]
        st.update(
            numSamples=10, **{k: 3 * st[k] for k in ("msgRateIn", "msgRateOut", "msgThroughputIn", "msgThroughputOut")}
        )

    def peaks(cycle_ms: int) -> set[str]:
        membership = {"brokers": sorted(cycle["brokers"]), "atMs": now - cycle_ms, "changedMs": None}
        out = _decide(busy, state={"globalPlanner": {"membership": membership}})
        return set(out["state"]["globalPlanner"]["peaks"])

    assert peaks(60_000) == set(on_0)  # one decision a minute: 10 minutes, a swing; its busy phase remembered
    assert peaks(60 * 60_000) == set()  # hourly: ten hours, the day's level, no swing
