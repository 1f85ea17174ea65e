"""The scenario the pipeline builds from a real (simulated) cluster is valid for every Pulsar shedder,
and each decision carries a label and a reason; strategy state round-trips between runs."""

from __future__ import annotations

import pytest

from pulsar_rebalance.pipeline.collect import collect_snapshot
from pulsar_rebalance.pipeline.detect import build_scenario, decide
from pulsar_rebalance.pipeline.params import SHEDDERS, RunParams
from pulsar_rebalance.pipeline.usage import latest, update_time_averages
from pulsar_rebalance.pulsar_admin import PulsarAdminClient
from pulsar_rebalance.simulator.generator import generate_cluster
from pulsar_rebalance.simulator.server import SimulatedPulsar


@pytest.fixture(scope="module")
def snapshot():
    with SimulatedPulsar(generate_cluster(seed=7), ephemeral=True) as sim:
        yield collect_snapshot(PulsarAdminClient.from_url(sim.admin_url))


def _scenario(snapshot, params, state=None, placement_policies=None, recently_unloaded=None):
    averages = update_time_averages(snapshot.parsed, {}, "r1")
    return build_scenario(
        params=params,
        reports=snapshot.load_reports,
        bundle_data={b: latest(e) for b, e in averages.items()},
        namespace_boundaries=snapshot.namespaces,
        recently_unloaded=recently_unloaded or {},
        state=state,
        now_ms=snapshot.collected_at_ms,
        placement_policies=placement_policies,
    )


@pytest.mark.parametrize("shedder", SHEDDERS)
def test_every_shedder_decides_on_the_collected_snapshot(snapshot, shedder):
    params = RunParams.from_json({"shedding_strategy": shedder})
    out = decide(_scenario(snapshot, params))
    cycle = out["cycle"]
    assert cycle["label"] in ("Success", "Skip") and cycle["reason"]
    children = {
        f"{s['bundle'].rsplit('/', 1)[0]}/{c.rsplit('/', 1)[1]}": s["bundle"]
        for s in cycle["splits"]
        for c in s.get("children", [])
    }  # GlobalPlanner names split children
    for u in cycle["unloads"]:
        assert u["broker"] in snapshot.load_reports and u["reason"]
        owned = u["bundle"] if u["bundle"] in snapshot.ownership else children[u["bundle"]]
        assert snapshot.ownership[owned] == u["broker"]
        assert u.get("destination") is None or u["destination"] != u["broker"]
    # state carries over: a second cycle from the returned state is accepted
    again = decide(_scenario(snapshot, params, state=out["state"]))
    assert again["cycle"]["label"] in ("Success", "Skip")


def test_threshold_shedder_sheds_the_hot_broker_with_destinations(snapshot):
    out = decide(_scenario(snapshot, RunParams.from_json({"shedding_strategy": "ThresholdShedder"})))
    cycle = out["cycle"]
    assert (cycle["label"], cycle["reason"]) == ("Success", "Overloaded")
    hot = max(cycle["stats"]["brokers"], key=lambda b: cycle["stats"]["brokers"][b]["usage"])
    assert {u["broker"] for u in cycle["unloads"]} == {hot}
    assert all(u["destination"] and u["destinationReason"] for u in cycle["unloads"])


def test_an_unload_holds_its_bundle_for_the_grace_period_only_once_it_completed(snapshot):
    """Pulsar records recentlyUnloadedBundles after an unload happened; the carried state records the
    decision's unloads when the plan is decided. The next run takes them from the database's completed
    unloads (``recently_unloaded``) instead: a cut, rejected or never executed move holds nothing."""
    params = RunParams.from_json({"shedding_strategy": "ThresholdShedder"})
    out = decide(_scenario(snapshot, params))
    decided = {u["bundle"] for u in out["cycle"]["unloads"]}
    assert decided and set(out["state"]["recentlyUnloadedBundles"]) == decided
    # next run, nothing completed: the shedder may choose the same bundles again
    again = _scenario(snapshot, params, state=out["state"])
    assert again["state"]["recentlyUnloadedBundles"] == {} and again["cycles"][0]["recentlyUnloadedBundles"] == {}
    assert {u["bundle"] for u in decide(again)["cycle"]["unloads"]} == decided
    # one of them completed: that one is held (loadBalancerSheddingGracePeriodMinutes), the others are not
    done = sorted(decided)[0]
    held = _scenario(snapshot, params, state=out["state"], recently_unloaded={done: snapshot.collected_at_ms})
    assert done not in {u["bundle"] for u in decide(held)["cycle"]["unloads"]}


def test_the_default_is_the_global_planner_with_a_predicted_move_for_each_unload(snapshot):
    params = RunParams.from_json({})
    assert params.shedding_strategy == "GlobalPlanner" and params.effective_placement == "GlobalPlanner"
    cycle = decide(_scenario(snapshot, params))["cycle"]
    assert (cycle["label"], cycle["reason"]) == ("Success", "Overloaded"), cycle["detail"]
    for u in cycle["unloads"]:
        assert u["destination"] and u["predicted"]["destinationAfter"] < u["predicted"]["sourceBefore"]
    assert cycle["stats"]["maxUsageAfter"] < cycle["stats"]["maxUsageBefore"]


def test_avg_shedder_waits_for_its_hit_count_before_shedding(snapshot):
    params = RunParams.from_json({"shedding_strategy": "AvgShedder"})
    first = decide(_scenario(snapshot, params))
    assert first["cycle"]["unloads"] == []  # loadBalancerAvgShedderHitCountHighThreshold = 2: not on the 1st hit
    second = decide(_scenario(snapshot, params, state=first["state"]))
    assert second["cycle"]["unloads"], second["cycle"]["reason"]


def test_the_scenario_carries_the_collected_placement_policies_and_decide_applies_them():
    """collect_load's placement constraints go to the scenario's top level, as the admin API answered them,
    and decide applies them: with the hot namespace isolated on its (overloaded) broker, none of its bundles
    is moved and no other namespace's bundle is placed there."""
    state = generate_cluster(seed=7)
    with SimulatedPulsar(state, ephemeral=True) as sim:
        hot_broker = sim.broker_ids[0]
        policy = {
            "namespaces": ["tenant-b/events"],
            "primary": [hot_broker.replace(".", r"\.")],
            "secondary": [],
            "auto_failover_policy": {
                "policy_type": "min_available",
                "parameters": {"min_limit": "1", "usage_threshold": "80"},
            },
        }
        sim.state.set_namespace_isolation_policy("hot-on-0", policy, unload=False)
        sim.state.set_anti_affinity_group("tenant-a/orders", "spread")
        snap = collect_snapshot(PulsarAdminClient.from_url(sim.admin_url))
    assert snap.placement_policies == {
        "namespaceIsolationPolicies": {"hot-on-0": policy},
        "failureDomains": {},
        "antiAffinityGroups": {"tenant-a/orders": "spread"},
    }
    params = RunParams.from_json({"shedding_strategy": "ThresholdShedder"})
    scenario = _scenario(snap, params)
    assert "namespaceIsolationPolicies" not in scenario  # without them, as before
    scenario = _scenario(snap, params, placement_policies=snap.placement_policies)
    assert scenario["namespaceIsolationPolicies"] == {"hot-on-0": policy}
    assert scenario["antiAffinityGroups"] == {"tenant-a/orders": "spread"}
    assert "failureDomains" not in scenario  # empty fields are left out
    cycle = decide(scenario)["cycle"]
    executed = cycle["executed"]
    assert executed["unloads"], cycle
    for u in executed["unloads"]:
        assert not u["bundle"].startswith("tenant-b/events/")  # its only allowed broker is its owner
        assert u["destination"] != hot_broker  # primary of a policy: no longer a shared broker
        assert "4 of 5 broker(s) allowed by the namespace policies" in u["destinationReason"]
    tenant_a = [u for u in executed["unloads"] if u["bundle"].startswith("tenant-a/orders/")]
    assert all("anti-affinity group 'spread'" in u["destinationReason"] for u in tenant_a)
