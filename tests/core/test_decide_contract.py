"""The ``decide`` JSON contract: output shape, state carried between cycles and runs, the extensions
(state, assignDestinations, splits, derived extensible data, stats), input validation with field
paths, and the real ``pulsar-rebalance decide`` command (stdin in, JSON out, exit codes)."""

from __future__ import annotations

import copy
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pulsar_rebalance.core.contract.decide import decide_scenario
from pulsar_rebalance.core.contract.state_json import strategy_state_from_json
from pulsar_rebalance.errors import ScenarioError

MB = 1024 * 1024
NOW = 1_700_000_000_000


def rng(i: int, n: int = 16) -> str:
    step = (1 << 32) // n
    return f"0x{i * step:08x}_0x{((i + 1) * step if i < n - 1 else 0xFFFFFFFF):08x}"


def stats(thr: float, *, rate: float = 100.0, topics: int = 3) -> dict[str, Any]:
    return {
        "msgRateIn": rate,
        "msgThroughputIn": thr,
        "msgRateOut": rate,
        "msgThroughputOut": 0.0,
        "consumerCount": 1,
        "producerCount": 1,
        "topics": topics,
        "cacheSize": 0,
    }


def report(cpu: float, bundles: dict[str, float], *, last_update: int = NOW, topics: int = 3) -> dict[str, Any]:
    """A LocalBrokerData as GET /admin/v2/broker-stats/load-report returns it (rates derived from lastStats)."""
    return {
        "cpu": {"usage": cpu, "limit": 100.0},
        "memory": {"usage": 1024.0, "limit": 4096.0},
        "bandwidthIn": {"usage": 0.0, "limit": 100.0},
        "bandwidthOut": {"usage": 0.0, "limit": 100.0},
        "lastUpdate": last_update,
        "lastStats": {b: stats(t, topics=topics) for b, t in bundles.items()},
    }


def bundle_data(thr: float, *, rate: float = 100.0) -> dict[str, Any]:
    avg = {
        "maxSamples": 10,
        "numSamples": 10,
        "msgThroughputIn": thr,
        "msgThroughputOut": 0.0,
        "msgRateIn": rate,
        "msgRateOut": rate,
    }
    return {"shortTermData": avg, "longTermData": {**avg, "maxSamples": 1000}, "topics": 3}


def cluster() -> dict[str, Any]:
    """broker-1 at 40% cpu with 4 big bundles, broker-2 and broker-3 at 10% with small ones."""
    b1 = {f"t/ns/{rng(i)}": (i + 1) * 10 * MB for i in range(4)}
    b2 = {f"t/ns/{rng(i)}": 5 * MB for i in range(4, 8)}
    b3 = {f"t/ns/{rng(i)}": 5 * MB for i in range(8, 12)}
    return {
        "brokers": {"broker-1": report(40, b1), "broker-2": report(10, b2), "broker-3": report(10, b3)},
        "bundleData": {b: bundle_data(t) for b, t in {**b1, **b2, **b3}.items()},
        "nowMs": NOW,
    }


def scenario(**extra: Any) -> dict[str, Any]:
    return {"shedding": "ThresholdShedder", "cycles": [cluster()], **extra}


def test_output_shape_and_state_round_trip() -> None:
    out = decide_scenario(scenario())
    assert set(out) >= {"cycles", "state", "shedding", "placement", "seed"}
    assert (out["shedding"], out["placement"], out["seed"]) == ("ThresholdShedder", "LeastLongTermMessageRate", 0)
    cycle = out["cycles"][0]
    assert set(cycle) >= {"label", "reason", "detail", "unloads", "splits", "placements", "stats"}
    assert (cycle["label"], cycle["reason"]) == ("Success", "Overloaded")
    assert cycle["unloads"] == [
        {
            "broker": "broker-1",
            "bundle": f"t/ns/{rng(3)}",
            "destination": None,
            "reason": cycle["unloads"][0]["reason"],
        }
    ]
    assert cycle["unloads"][0]["reason"].startswith(
        "Overloaded: broker-1 usage 0.4000 >= avg 0.2000 + threshold 0.1000"
    )
    broker_stats = cycle["stats"]["brokers"]
    assert broker_stats["broker-2"] == {"usage": 0.1, "avgUsage": 0.1, "status": "not overloaded"}
    assert cycle["stats"]["nowMs"] == NOW
    json.dumps(out, allow_nan=False)  # plain JSON
    assert strategy_state_from_json(out["state"]).to_json() == out["state"]
    assert out["state"]["recentlyUnloadedBundles"] == {f"t/ns/{rng(3)}": NOW}


def test_skip_decisions_carry_a_reason_and_an_explanation() -> None:
    calm = cluster()
    calm["brokers"]["broker-1"]["cpu"]["usage"] = 12
    cycle = decide_scenario({"shedding": "ThresholdShedder", "cycles": [calm]})["cycles"][0]
    assert (cycle["label"], cycle["reason"]) == ("Skip", "Balanced")
    assert "no broker above avg" in cycle["detail"]
    assert cycle["unloads"] == []


def test_state_from_a_previous_output_equals_running_both_cycles_in_one_document() -> None:
    c1, c2 = cluster(), cluster()
    c2["nowMs"] = NOW + 60_000
    c2["brokers"]["broker-1"]["cpu"]["usage"] = 30
    both = decide_scenario({"shedding": "ThresholdShedder", "cycles": [c1, c2]})
    first = decide_scenario({"shedding": "ThresholdShedder", "cycles": [copy.deepcopy(c1)]})
    second = decide_scenario({"shedding": "ThresholdShedder", "cycles": [copy.deepcopy(c2)], "state": first["state"]})
    assert second["cycles"][0] == both["cycles"][1]
    assert second["state"] == both["state"]
    # the EMA moved: 0.4 then 0.4*0.9 + 0.1*0.3
    assert both["state"]["thresholdShedder"]["brokerAvgResourceUsage"]["broker-1"] == pytest.approx(0.39)


def test_recently_unloaded_bundles_are_not_shed_again_until_the_grace_period_ends() -> None:
    c1, c2, c3 = cluster(), cluster(), cluster()
    c2["nowMs"] = NOW + 60_000
    c3["nowMs"] = NOW + 31 * 60_000
    out = decide_scenario({"shedding": "ThresholdShedder", "cycles": [c1, c2, c3]})
    shed = [[u["bundle"] for u in c["unloads"]] for c in out["cycles"]]
    assert shed[0] == [f"t/ns/{rng(3)}"]
    assert f"t/ns/{rng(3)}" not in shed[1] and shed[1]  # the next largest instead
    assert f"t/ns/{rng(3)}" in shed[2]  # 31 minutes later: out of the 30-minute grace period


def test_assign_destinations_shows_the_executed_destination_and_reports_ties() -> None:
    out = decide_scenario(scenario(assignDestinations=True, seed=11))
    cycle = out["cycles"][0]
    unload = cycle["unloads"][0]
    # selectBroker runs over all brokers, the source included: the three tie at 800 msg/s long-term
    executed = cycle["executed"]["unloads"]
    dropped = cycle["executed"]["dropped"]
    assert len(executed) + len(dropped) == 1
    if executed:
        assert unload == executed[0] and unload["destination"] in ("broker-2", "broker-3")
        assert unload["tied"] == ["broker-1", "broker-2", "broker-3"]
        assert "least long-term msg rate" in unload["destinationReason"]
    else:
        assert dropped[0]["dropped"] == "DestinationIsSource" and unload["destination"] is None
    again = decide_scenario(scenario(assignDestinations=True, seed=11))
    assert again == out  # seeded: reproducible


def test_place_uses_preallocations_of_the_same_cycle() -> None:
    doc = scenario()
    doc["cycles"][0]["place"] = ["t/other/0x00000000_0xffffffff", "t/other2/0x00000000_0xffffffff"]
    cycle = decide_scenario(doc)["cycles"][0]
    first = cycle["placements"]["t/other/0x00000000_0xffffffff"]
    second = cycle["placements"]["t/other2/0x00000000_0xffffffff"]
    # the first lookup is preallocated (default BundleData: 100 msg/s long-term), so the second
    # lookup no longer sees its broker among the least loaded
    assert len(first["tied"]) == 3 and first["broker"] not in second["tied"] and len(second["tied"]) == 2


def test_splits_are_reported_with_broker_and_reason_and_respect_namespace_counts() -> None:
    doc = scenario()
    many = doc["cycles"][0]["brokers"]["broker-2"]["lastStats"][f"t/ns/{rng(4)}"]
    many["topics"] = 1500
    splits = decide_scenario(doc)["cycles"][0]["splits"]
    lo, hi = rng(4).split("_")
    mid = f"0x{(int(lo, 16) + (int(hi, 16) - int(lo, 16)) // 2):08x}"
    assert splits == [
        {
            "bundle": f"t/ns/{rng(4)}",
            "broker": "broker-2",
            "reason": splits[0]["reason"],
            "algorithm": "range_equally_divide",
            "boundaries": [mid],
            "children": [f"t/ns/{lo}_{mid}", f"t/ns/{mid}_{hi}"],
            "unloadChildren": True,
        }
    ]
    assert "1500" in splits[0]["reason"]
    doc["cycles"][0]["namespaceBundleCounts"] = {"t/ns": 128}  # already at loadBalancerNamespaceMaximumBundles
    assert decide_scenario(doc)["cycles"][0]["splits"] == []
    doc["config"] = {"loadBalancerAutoBundleSplitEnabled": False}
    doc["cycles"][0].pop("namespaceBundleCounts")
    assert decide_scenario(doc)["cycles"][0]["splits"] == []


def skewed() -> dict[str, Any]:
    """broker-1 at 95% cpu: load std 0.40 > loadBalancerBrokerLoadTargetStd 0.25."""
    c = cluster()
    c["brokers"]["broker-1"]["cpu"]["usage"] = 95
    return c


def test_transfer_shedder_derives_extensible_data_and_keeps_its_emas_in_state() -> None:
    doc = {
        "shedding": "TransferShedder",
        "config": {"loadBalancerSheddingConditionHitCountThreshold": 0},
        "cycles": [skewed()],
    }
    out = decide_scenario(doc)
    assert out["placement"] == "LeastResourceUsageWithWeight"
    cycle = out["cycles"][0]
    assert cycle["label"] == "Success"
    assert all(u["destination"] is not None and u["destination"] != u["broker"] for u in cycle["unloads"])
    saved = out["state"]["transferShedder"]["brokerLoadData"]
    assert saved["broker-1"]["weightedMaxEMA"] == 0.95
    assert out["state"]["recentlyUnloadedBrokers"] == {u["broker"]: NOW for u in cycle["unloads"]}
    # next run: EMA continues from the state (0.95 * 0.9 + 0.1 * 0.2)
    nxt = skewed()
    nxt["nowMs"] = NOW + 600_000
    for data in nxt["brokers"].values():
        data["lastUpdate"] = NOW + 600_000
    nxt["brokers"]["broker-1"]["cpu"]["usage"] = 20
    out2 = decide_scenario({**doc, "cycles": [nxt], "state": out["state"]})
    assert out2["state"]["transferShedder"]["brokerLoadData"]["broker-1"]["weightedMaxEMA"] == pytest.approx(0.875)


def test_transfer_shedder_hit_count_accumulates_across_runs() -> None:
    doc = {"shedding": "TransferShedder", "cycles": [skewed()]}
    state = None
    reasons = []
    for i in range(4):
        c = skewed()
        c["nowMs"] = NOW + i * 60_000
        run = decide_scenario({**doc, "cycles": [c], **({"state": state} if state else {})})
        reasons.append(run["cycles"][0]["reason"])
        state = run["state"]
    assert reasons[:3] == ["HitCount"] * 3 and reasons[3] != "HitCount"


def test_avg_shedder_executes_what_it_shed_where_it_planned() -> None:
    c = cluster()
    c["brokers"]["broker-1"]["cpu"]["usage"] = 90
    cycles = [c, copy.deepcopy(c)]
    cycles[1]["place"] = [f"t/ns/{rng(3)}"]
    out = decide_scenario(
        {
            "shedding": "AvgShedder",
            "config": {
                "minUnloadMessage": 10,
                "maxUnloadPercentage": 0.5,
                "loadBalancerDistributeBundlesEvenlyEnabled": False,
            },
            "cycles": cycles,
        }
    )
    assert out["placement"] == "AvgShedder"
    assert out["cycles"][0]["reason"] == "HitCount"
    shed = {u["bundle"]: u["destination"] for u in out["cycles"][1]["unloads"]}
    assert shed and set(shed.values()) <= {"broker-2", "broker-3"}
    executed = {u["bundle"]: u["destination"] for u in out["cycles"][1]["executed"]["unloads"]}
    assert executed == shed  # selectBroker returns the planned destination
    # the plans last one shedding attempt (PR #26246): a later lookup draws at random
    assert out["state"]["avgShedder"]["bundleBrokerMap"] == []
    placed = out["cycles"][1]["placements"][f"t/ns/{rng(3)}"]
    assert placed["tied"] == ["broker-1", "broker-2", "broker-3"] and "no planned broker" in placed["reason"]


def test_disabled_shedding_and_single_broker_are_skips() -> None:
    out = decide_scenario(scenario(config={"loadBalancerSheddingEnabled": False}))
    assert (out["cycles"][0]["label"], out["cycles"][0]["reason"]) == ("Skip", "Disabled")
    one = cluster()
    one["brokers"] = {"broker-1": one["brokers"]["broker-1"]}
    out = decide_scenario({"shedding": "ThresholdShedder", "cycles": [one]})
    assert out["cycles"][0]["reason"] == "NoBrokers"


def test_opt_in_variant_is_selectable_and_reported() -> None:
    out = decide_scenario({"shedding": "OverloadShedderUnweighted", "cycles": [cluster()]})
    assert out["shedding"] == "OverloadShedderUnweighted"
    assert out["cycles"][0]["reason"] == "Balanced"


# ---- validation ---------------------------------------------------------------------------------
def _error(doc: Any) -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        decide_scenario(doc)
    return info.value


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d.update(shedding="RoundRobinShedder"), "shedding"),
        (lambda d: d.update(placement="Random"), "placement"),
        (lambda d: d.update(assignDestination=True), "assignDestination"),
        (lambda d: d.update(seed="7"), "seed"),
        (lambda d: d.update(cycles=[]), "cycles"),
        (
            lambda d: d.update(config={"loadBalancerBrokerThresholdShedderPercentage": "10"}),
            "config.loadBalancerBrokerThresholdShedderPercentage",
        ),
        (
            lambda d: d.update(config={"loadBalancerLoadSheddingStrategy": "OverloadShedder"}),
            "config.loadBalancerLoadSheddingStrategy",
        ),
        (lambda d: d["cycles"][0]["brokers"]["broker-1"].pop("cpu"), "cycles[0].brokers.broker-1.cpu"),
        (
            lambda d: d["cycles"][0]["brokers"]["broker-1"]["cpu"].update(usage=-1),
            "cycles[0].brokers.broker-1.cpu.usage",
        ),
        (
            lambda d: d["cycles"][0]["brokers"]["broker-1"]["cpu"].update(usage=math.nan),
            "cycles[0].brokers.broker-1.cpu.usage",
        ),
        (
            lambda d: d["cycles"][0]["bundleData"][f"t/ns/{rng(0)}"]["shortTermData"].update(msgRateIn=-5.0),
            f"cycles[0].bundleData.t/ns/{rng(0)}.shortTermData.msgRateIn",
        ),
        (
            lambda d: d["cycles"][0]["bundleData"].update({"t/ns/0x0000_zz": bundle_data(1)}),
            "cycles[0].bundleData.t/ns/0x0000_zz",
        ),
        (
            lambda d: d["cycles"][0]["bundleData"].update({"no-namespace": bundle_data(1)}),
            "cycles[0].bundleData.no-namespace",
        ),
        (lambda d: d["cycles"][0].update(place=["t/ns/0x80000000_0x10000000"]), "cycles[0].place[0]"),
        (
            lambda d: d["cycles"][0].update(recentlyUnloadedBundles={f"t/ns/{rng(0)}": -3}),
            f"cycles[0].recentlyUnloadedBundles.t/ns/{rng(0)}",
        ),
        (lambda d: d["cycles"][0].update(brokerz={}), "cycles[0].brokerz"),
        (lambda d: d["cycles"][0].pop("brokers"), "cycles[0].brokers"),
        (
            lambda d: d.update(state={"thresholdShedder": {"brokerAvgResourceUsage": {"b": "x"}}}),
            "state.thresholdShedder.brokerAvgResourceUsage.b",
        ),
    ],
)
def test_invalid_input_names_the_field(mutate, field) -> None:
    doc = scenario()
    mutate(doc)
    assert _error(doc).field == field


def test_the_whole_document_is_validated_before_anything_runs() -> None:
    bad = cluster()
    bad["brokers"]["broker-2"]["bandwidthIn"] = {"usage": 1.0}
    err = _error({"shedding": "ThresholdShedder", "cycles": [cluster(), bad]})
    assert err.field == "cycles[1].brokers.broker-2.bandwidthIn.limit"


def test_transfer_shedder_specific_validation() -> None:
    c = cluster()
    c.pop("nowMs")
    assert _error({"shedding": "TransferShedder", "cycles": [c]}).field == "cycles[0].nowMs"
    assert (
        _error({"shedding": "TransferShedder", "placement": "LeastLongTermMessageRate", "cycles": [cluster()]}).field
        == "placement"
    )


# ---- the real command ---------------------------------------------------------------------------
CLI = str(Path(sys.executable).with_name("pulsar-rebalance"))


def _cli(payload: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, "decide", "-"], input=payload, capture_output=True, text=True, timeout=120, check=False)


def test_cli_decide_reads_stdin_and_prints_the_decision() -> None:
    proc = _cli(json.dumps(scenario(assignDestinations=True)))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out == decide_scenario(scenario(assignDestinations=True))


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda d: d.update(shedding="NoSuchShedder"), "shedding"),
        (
            lambda d: d["cycles"][0]["brokers"]["broker-3"].pop("bandwidthOut"),
            "cycles[0].brokers.broker-3.bandwidthOut",
        ),
        (
            lambda d: d["cycles"][0]["bundleData"].update({"t/ns/garbage": bundle_data(1)}),
            "cycles[0].bundleData.t/ns/garbage",
        ),
        (
            lambda d: d["cycles"][0]["brokers"]["broker-1"]["lastStats"][f"t/ns/{rng(0)}"].update(msgRateIn=-1.0),
            f"cycles[0].brokers.broker-1.lastStats.t/ns/{rng(0)}.msgRateIn",
        ),
    ],
)
def test_cli_decide_bad_input_exits_2_names_the_field_and_prints_nothing(mutate, needle) -> None:
    doc = scenario()
    mutate(doc)
    proc = _cli(json.dumps(doc))
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert needle in proc.stderr


def test_cli_decide_rejects_nan_literals() -> None:
    text = json.dumps(scenario()).replace('"usage": 40', '"usage": NaN', 1)
    proc = _cli(text)
    assert proc.returncode == 2 and proc.stdout == "" and "NaN" in proc.stderr


def test_transfer_shedder_split_needs_consecutive_hits_kept_in_state() -> None:
    # the extensible trigger splits on the 4th consecutive hit (threshold 3), counting per broker
    doc = {"shedding": "TransferShedder", "config": {"loadBalancerSheddingEnabled": False}}
    state = None
    found = []
    for i in range(4):
        c = cluster()
        c["nowMs"] = NOW + i * 60_000
        c["brokers"]["broker-2"]["lastStats"][f"t/ns/{rng(4)}"]["topics"] = 1001
        run = decide_scenario({**doc, "cycles": [c], **({"state": state} if state else {})})
        found.append([s["bundle"] for s in run["cycles"][0]["splits"]])
        state = run["state"]
        if i < 3:
            assert state["splitConditionHitCounts"]["broker-2"] == {f"t/ns/{rng(4)}": i + 1}
    assert found == [[], [], [], [f"t/ns/{rng(4)}"]]
    assert state["splitConditionHitCounts"]["broker-2"] == {}  # reset after the split


def test_transfer_shedder_place_uses_the_extensible_placement() -> None:
    c = skewed()
    c["place"] = ["t/new/0x00000000_0xffffffff"]
    out = decide_scenario({"shedding": "TransferShedder", "cycles": [c]})
    placed = out["cycles"][0]["placements"]["t/new/0x00000000_0xffffffff"]
    assert set(placed["tied"]) == {"broker-2", "broker-3"}  # clearly below the average load


def test_state_is_validated_with_paths() -> None:
    assert _error(scenario(state={"thresholdShedder": {}, "bogus": 1})).field == "state.bogus"
    assert _error(scenario(state={"version": 2})).field == "state.version"
    assert _error(scenario(state={"avgShedder": {"bundleBrokerMap": [{"bundle": "x"}]}})).field == (
        "state.avgShedder.bundleBrokerMap[0].broker"
    )
