"""Pulsar's placement constraints (core.pulsar.policies) through the ``decide`` contract: namespace isolation
policies, anti-affinity groups and failure domains at placement (``selectBroker``), at the executed level
of ``doLoadShedding`` (``shouldNamespacePoliciesUnload`` / ``shouldAntiAffinityNamespaceUnload``), in
TransferShedder, in the do-no-harm guard and in the GlobalPlanner. Each ported test names the Pulsar
test it comes from (apache/pulsar, newest stored versions)."""

from __future__ import annotations

from typing import Any

import pytest

from pulsar_rebalance.core.contract.decide import decide_scenario
from pulsar_rebalance.core.contract.policies_json import parse_policies
from pulsar_rebalance.core.guard import GuardLimits, guard_plan
from pulsar_rebalance.core.prediction import Move
from pulsar_rebalance.core.pulsar.config import LoadBalancerConfig
from pulsar_rebalance.core.pulsar.policies import PlacementPolicies
from pulsar_rebalance.core.pulsar.shedders.transfer_shedder import ExtensibleInput, TransferShedder
from pulsar_rebalance.core.pulsar.state import StrategyState
from pulsar_rebalance.errors import ScenarioError
from tests.core.test_guard import W
from tests.core.test_guard import report as guard_report
from tests.core.test_load_manager_level import stats
from tests.core.test_shedders_transfer import NOW, conf, setup_context

MB = 1024 * 1024
FULL = "0x00000000_0xffffffff"


def broker(
    bundles: list[str] = (),  # type: ignore[assignment]
    *,
    cpu: float = 10.0,
    last: dict[str, dict[str, Any]] | None = None,
    persistent: bool = True,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "cpu": {"usage": cpu, "limit": 100.0},
        "memory": {"usage": 1.0, "limit": 100.0},
        "directMemory": {"usage": 1.0, "limit": 100.0},
        "bandwidthIn": {"usage": 1.0, "limit": 100.0},
        "bandwidthOut": {"usage": 1.0, "limit": 100.0},
        "lastUpdate": NOW,
        "bundles": list(bundles),
        "lastStats": last or {},
    }
    if not persistent:
        out["persistentTopicsEnabled"] = False
    return out


def isolation(namespaces: list[str], primary: list[str], secondary: list[str], min_limit: int = 1) -> dict[str, Any]:
    """One NamespaceIsolationData as ``GET .../namespaceIsolationPolicies`` returns it."""
    return {
        "namespaces": namespaces,
        "primary": primary,
        "secondary": secondary,
        "auto_failover_policy": {
            "policy_type": "min_available",
            "parameters": {"min_limit": str(min_limit), "usage_threshold": "80"},
        },
    }


def lookup(
    brokers: dict[str, dict[str, Any]], bundle: str, *, config: dict[str, Any] | None = None, **top
) -> list[str]:
    """The candidates ``selectBrokerForAssignment`` ends with: AvgShedder's placement draws among all of
    them and reports them as ``tied`` (sorted)."""
    doc: dict[str, Any] = {
        "shedding": "AvgShedder",
        "config": config or {},
        "cycles": [{"nowMs": NOW, "brokers": brokers, "place": [bundle]}],
        **top,
    }
    placement = decide_scenario(doc)["cycles"][0]["placements"][bundle]
    if placement["broker"] is None:
        return []
    assert placement["broker"] in placement["tied"]
    return placement["tied"]


# ---------------------------------------------------------------------------------------------
# Contract: the admin endpoints' JSON, validated with JSON paths
# ---------------------------------------------------------------------------------------------
def test_policies_are_read_in_the_admin_endpoints_shapes() -> None:
    doc = {
        "namespaceIsolationPolicies": {"iso": isolation(["t/iso.*"], ["broker-[12]"], ["broker-3"], 2)},
        "failureDomains": {"rack-a": {"brokers": ["broker-1:8080"]}, "rack-b": {"brokers": ["broker-2:8080"]}},
        "antiAffinityGroups": {"t/a": "g", "t/b": "G", "t/c": "  "},
    }
    p = parse_policies(doc, "")
    assert [x.name for x in p.isolation] == ["iso"]
    assert p.policy_for("t/iso-1") is p.isolation[0] and p.policy_for("t/other") is None
    assert p.isolation[0].auto_failover_policy.min_limit == 2
    assert p.broker_to_domain == {"broker-1:8080": "rack-a", "broker-2:8080": "rack-b"}
    # a blank group is no group (StringUtils.isBlank); groups compare ignoring case
    assert p.anti_affinity_groups == {"t/a": "g", "t/b": "G"}
    assert p.group_namespaces("g") == ["t/a", "t/b"]
    assert parse_policies(p.to_json(), "").to_json() == p.to_json()


@pytest.mark.parametrize(
    ("patch", "field", "fragment"),
    [
        ({"primary": ["broker-("]}, "namespaceIsolationPolicies.iso.primary[0]", "invalid policy regex"),
        ({"primary": []}, "namespaceIsolationPolicies.iso.primary", "at least one primary"),
        ({"namespaces": "t/ns"}, "namespaceIsolationPolicies.iso.namespaces", "expected an array"),
        ({"secondary": None}, "namespaceIsolationPolicies.iso.secondary", "required"),
        (
            {"auto_failover_policy": {"policy_type": "max_available", "parameters": {}}},
            "namespaceIsolationPolicies.iso.auto_failover_policy.policy_type",
            "unrecognized auto_failover_policy",
        ),
        (
            {"auto_failover_policy": {"policy_type": "min_available", "parameters": {"min_limit": "1 "}}},
            "namespaceIsolationPolicies.iso.auto_failover_policy.parameters.min_limit",
            "expected an integer",
        ),
        (
            {"auto_failover_policy": {"policy_type": "min_available", "parameters": {"min_limit": 1}}},
            "namespaceIsolationPolicies.iso.auto_failover_policy.parameters.usage_threshold",
            "required",
        ),
        (
            {
                "auto_failover_policy": {
                    "policy_type": "min_available",
                    "parameters": {"min_limit": "-1", "usage_threshold": "80"},
                }
            },
            "namespaceIsolationPolicies.iso.auto_failover_policy.parameters.min_limit",
            "-1 is negative",
        ),
        ({"unload_scope": "some"}, "namespaceIsolationPolicies.iso.unload_scope", "expected one of"),
        ({"primaries": ["b"]}, "namespaceIsolationPolicies.iso.primaries", "unknown field"),
    ],
)
def test_bad_isolation_policy_names_its_json_path(patch: dict[str, Any], field: str, fragment: str) -> None:
    policy = {**isolation(["t/ns"], ["b1"], []), **patch}
    doc = {"shedding": "AvgShedder", "namespaceIsolationPolicies": {"iso": policy}, "cycles": [{"brokers": {}}]}
    with pytest.raises(ScenarioError) as err:
        decide_scenario(doc)
    assert err.value.field == field
    assert fragment in str(err.value)


@pytest.mark.parametrize(
    ("cycle_patch", "field", "fragment"),
    [
        ({"failureDomains": {"d": {"brokers": "b1"}}}, "cycles[0].failureDomains.d.brokers", "expected an array"),
        ({"failureDomains": {"d": {"brokers": [""]}}}, "cycles[0].failureDomains.d.brokers[0]", "non-empty"),
        ({"antiAffinityGroups": {"t": "g"}}, "cycles[0].antiAffinityGroups.t", "tenant/namespace"),
        ({"antiAffinityGroups": {"t/ns": 3}}, "cycles[0].antiAffinityGroups.t/ns", "group name string"),
    ],
)
def test_bad_domains_and_groups_name_their_json_path(cycle_patch: dict[str, Any], field: str, fragment: str) -> None:
    doc = {"shedding": "AvgShedder", "cycles": [{"brokers": {}, **cycle_patch}]}
    with pytest.raises(ScenarioError) as err:
        decide_scenario(doc)
    assert err.value.field == field
    assert fragment in str(err.value)


def test_a_cycle_field_overrides_the_documents() -> None:
    ns = "t/iso"
    brokers = {"b1:8080": broker(), "b2:8080": broker(), "b3:8080": broker()}
    top = {"namespaceIsolationPolicies": {"iso": isolation([ns], ["b1"], [])}}
    assert lookup(brokers, f"{ns}/{FULL}", **top) == ["b1:8080"]
    doc = {
        "shedding": "AvgShedder",
        **top,
        "cycles": [
            {"nowMs": NOW, "brokers": brokers, "place": [f"{ns}/{FULL}"]},
            {
                "nowMs": NOW,
                "brokers": brokers,
                "place": [f"{ns}/{FULL}"],
                "namespaceIsolationPolicies": {"iso": isolation([ns], ["b2"], [])},
            },
        ],
    }
    first, second = decide_scenario(doc)["cycles"]
    assert first["placements"][f"{ns}/{FULL}"]["tied"] == ["b1:8080"]
    assert second["placements"][f"{ns}/{FULL}"]["tied"] == ["b2:8080"]


# ---------------------------------------------------------------------------------------------
# Placement (selectBroker): applyNamespacePolicies, removeMostServicingBrokersForNamespace
# ---------------------------------------------------------------------------------------------
def test_remove_most_servicing_brokers_for_namespace() -> None:
    """LoadManagerSharedTest.testRemoveMostServicingBrokersForNamespace, each step a lookup of the
    bundle with the ownership of that step (brokers without bundles of the namespace count 0)."""
    ns = "tenant1/ns1"
    assigned = f"{ns}/0x00000000_0x40000000"
    assert lookup({"broker1": broker()}, assigned) == ["broker1"]
    owned = {"broker1": [f"{ns}/0x40000000_0x80000000"]}
    assert lookup({"broker1": broker(owned["broker1"])}, assigned) == ["broker1"]
    assert lookup({"broker1": broker(owned["broker1"]), "broker2": broker()}, assigned) == ["broker2"]
    owned["broker2"] = [f"{ns}/0x80000000_0xc0000000"]
    two = {b: broker(v) for b, v in owned.items()}
    assert lookup(two, assigned) == ["broker1", "broker2"]
    owned["broker2"].append(f"{ns}/0xc0000000_0xd0000000")
    assert lookup({b: broker(v) for b, v in owned.items()}, assigned) == ["broker1"]
    owned["broker3"] = [f"{ns}/0xd0000000_0xffffffff"]
    assert lookup({b: broker(v) for b, v in owned.items()}, assigned) == ["broker1", "broker3"]


@pytest.mark.parametrize("ids", [False, True])
def test_filter_with_namespace_isolation_policies_for_primary_and_secondary_brokers(ids: bool) -> None:
    """BrokerIsolationPoliciesFilterTest.testFilterWithNamespaceIsolationPoliciesForPrimaryAndSecondaryBrokers
    (regexes on hosts) and ...UsingBrokerIds (regexes on broker ids host:port), through the modular
    lookup's applyNamespacePolicies: primary=broker1, secondary=broker2, broker3 shared."""
    ns = "my-tenant/my-ns"
    bundle = f"{ns}/{FULL}"
    port = ":8080" if ids else ""

    def candidates(min_limit: int, available: list[str]) -> list[str]:
        policy = isolation([ns], [f"broker1{port}"], [f"broker2{port}"], min_limit)
        brokers = {f"{b}:8080": broker() for b in available}
        return lookup(brokers, bundle, namespaceIsolationPolicies={"p": policy})

    assert candidates(1, ["broker1", "broker2", "broker3"]) == ["broker1:8080"]
    assert candidates(1, ["broker2", "broker3"]) == ["broker2:8080"]
    assert candidates(1, ["broker3"]) == []
    assert candidates(2, ["broker1", "broker2", "broker3"]) == ["broker1:8080", "broker2:8080"]
    assert candidates(2, ["broker2", "broker3"]) == ["broker2:8080"]
    assert candidates(2, ["broker3"]) == []
    # a namespace without a policy only sees the shared broker3 (broker1 is primary in a policy)
    other = lookup(
        {f"{b}:8080": broker() for b in ("broker1", "broker2", "broker3")},
        f"my-tenant/other/{FULL}",
        namespaceIsolationPolicies={"p": isolation([ns], [f"broker1{port}"], [f"broker2{port}"])},
    )
    assert other == ["broker2:8080", "broker3:8080"]


def test_filter_with_persistent_topics_disabled() -> None:
    """BrokerIsolationPoliciesFilterTest.testFilterWithPersistentOrNonPersistentDisabled, persistent half
    (a bundle looked up by name holds persistent topics): a broker with persistentTopicsEnabled=false
    is not a candidate."""
    brokers = {"broker1:8080": broker(persistent=False), "broker2:8080": broker(), "broker3:8080": broker()}
    assert lookup(brokers, f"my-tenant/my-ns/{FULL}") == ["broker2:8080", "broker3:8080"]


def _anti_affinity_lookup(
    owners: dict[str, str], brokers: list[str], ns: str, domains: dict[str, list[str]] | None
) -> list[str]:
    namespace = "my-tenant/use/my-ns"
    owned: dict[str, list[str]] = {b: [] for b in brokers}
    for i, b in owners.items():
        owned[b].append(f"{namespace}{i}/{FULL}")
    top: dict[str, Any] = {"antiAffinityGroups": {f"{namespace}{i}": "my-antiaffinity" for i in range(5)}}
    config: dict[str, Any] = {}
    if domains is not None:
        top["failureDomains"] = {d: {"brokers": bs} for d, bs in domains.items()}
        config["failureDomainsEnabled"] = True
    return lookup({b: broker(v) for b, v in owned.items()}, f"{namespace}{ns}/{FULL}", config=config, **top)


def test_anti_affinity_namespace_filtering_with_domain() -> None:
    """AntiAffinityNamespaceGroupTest.testAntiAffinityNamespaceFilteringWithDomain: 4 brokers in 2 failure
    domains; each namespace of the group goes to the domain, then the broker, owning the fewest."""
    brokers = ["brokerName-0", "brokerName-1", "brokerName-2", "brokerName-3"]
    domains = {"domain-0": brokers[:2], "domain-1": brokers[2:]}
    assert _anti_affinity_lookup({}, brokers, "0", domains) == brokers
    assert _anti_affinity_lookup({"0": brokers[0]}, brokers, "1", domains) == ["brokerName-2", "brokerName-3"]
    state = {"0": brokers[0], "1": brokers[2]}
    assert _anti_affinity_lookup(state, brokers, "2", domains) == ["brokerName-1", "brokerName-3"]
    state["2"] = brokers[1]
    assert _anti_affinity_lookup(state, brokers, "3", domains) == ["brokerName-3"]
    state["3"] = brokers[3]
    assert _anti_affinity_lookup(state, brokers, "4", domains) == brokers
    # failureDomainsEnabled=false (Pulsar's default): the domains are not consulted
    assert _anti_affinity_lookup({"0": brokers[0]}, brokers, "1", None) == brokers[1:]


def test_anti_affinity_namespace_filtering_without_domain() -> None:
    """AntiAffinityNamespaceGroupTest.testAntiAffinityNamespaceFilteringWithoutDomain."""
    brokers = ["broker-0", "broker-1", "broker-2"]
    assert _anti_affinity_lookup({}, brokers, "0", None) == brokers
    assert _anti_affinity_lookup({"0": "broker-0"}, brokers, "1", None) == ["broker-1", "broker-2"]
    assert _anti_affinity_lookup({"0": "broker-0", "1": "broker-1"}, brokers, "2", None) == ["broker-2"]
    full = {"0": "broker-0", "1": "broker-1", "2": "broker-2"}
    assert _anti_affinity_lookup(full, brokers, "3", None) == brokers


# ---------------------------------------------------------------------------------------------
# doLoadShedding: the vetoes before selectBroker, and destinations within the policies
# ---------------------------------------------------------------------------------------------
# Every modular strategy with the placement it ships with, and bundle rates that make it select broker-0's
# bundle of my-tenant/use/my-ns0 (each strategy's own selection rule: ThresholdShedder and OverloadShedder
# take the highest throughput first; UniformLoadShedder and AvgShedder take bundles that fit the gap they
# move, by message rate and by throughput; AvgShedder needs its two consecutive hits).
MODULAR = {
    "ThresholdShedder": ("LeastLongTermMessageRate", (1000, 20 * MB), (5000, 10 * MB), 1),
    "OverloadShedder": ("LeastResourceUsageWithWeight", (1000, 20 * MB), (5000, 10 * MB), 1),
    "UniformLoadShedder": ("LeastLongTermMessageRate", (1000, 2 * MB), (5000, 10 * MB), 1),
    "AvgShedder": ("AvgShedder", (10, 2 * MB), (10, 10 * MB), 2),
}


def _shed(shedding: str, owned_extra: dict[str, list[str]], **top: Any) -> dict[str, Any]:
    """``shedding`` selects broker-0's bundle of my-tenant/use/my-ns0 (cpu 90 % vs 20 %); broker-1 and
    broker-2 own a light bundle of their own plus ``owned_extra``. Returns the executed level of the
    last cycle."""
    placement, hot_rate, light_rate, cycles = MODULAR[shedding]
    hot = "my-tenant/use/my-ns0/0x00000000_0x80000000"
    light = "other/ns/0x00000000_0x80000000"
    brokers = {"broker-0": broker([hot, light], cpu=90, last={hot: stats(*hot_rate), light: stats(*light_rate)})}
    for name in ("broker-1", "broker-2"):
        filler = f"fill/{name}/0x00000000_0x80000000"
        brokers[name] = broker([filler, *owned_extra.get(name, [])], cpu=20, last={filler: stats(1, 1 * MB)})
    doc = {"shedding": shedding, "placement": placement, **top}
    doc["cycles"] = [{"nowMs": NOW + i * 60_000, "brokers": brokers} for i in range(cycles)]
    cycle = decide_scenario(doc)["cycles"][-1]
    assert [u["bundle"] for u in cycle["unloads"]] == [hot], cycle
    return cycle["executed"]


@pytest.mark.parametrize("shedding", list(MODULAR))
def test_load_shedding_util_with_anti_affinity_namespace(shedding: str) -> None:
    """AntiAffinityNamespaceGroupTest.testLoadSheddingUtilWithAntiAffinityNamespace at the executed level,
    for every modular strategy: broker-0 owns ns-0 -> it may unload; broker-1 owns ns-1 -> still, to
    broker-2; broker-2 owns ns-2 -> every broker owns one namespace of the group:
    shouldAntiAffinityNamespaceUnload refuses. (AvgShedder plans broker-1, the low broker of its pair;
    when broker-1 is no candidate its placement falls back to selectBroker, as PR #26246 merged it.)"""
    group = {"antiAffinityGroups": {f"my-tenant/use/my-ns{i}": "my-antiaffinity" for i in range(5)}}
    ns = "my-tenant/use/my-ns{}/0x80000000_0xffffffff"
    executed = _shed(shedding, {}, **group)
    [unload] = executed["unloads"]
    assert unload["destination"] in ("broker-1", "broker-2")
    executed = _shed(shedding, {"broker-1": [ns.format(1)]}, **group)
    assert [u["destination"] for u in executed["unloads"]] == ["broker-2"]
    executed = _shed(shedding, {"broker-1": [ns.format(1)], "broker-2": [ns.format(2)]}, **group)
    assert executed["unloads"] == []
    [dropped] = executed["dropped"]
    assert dropped["dropped"] == "AntiAffinityNamespace" and "my-antiaffinity" in dropped["detail"]


@pytest.mark.parametrize("shedding", list(MODULAR))
def test_should_namespace_policies_unload(shedding: str) -> None:
    """ModularLoadManagerImplTest's shouldNamespacePoliciesUnload test at the executed level, for every
    modular strategy: no policy -> unload; a policy whose only broker (primary and secondary) is the owner
    -> no unload; another secondary with min_available 2 -> unload, there."""
    ns = "my-tenant/use/my-ns0"
    executed = _shed(shedding, {})
    assert len(executed["unloads"]) == 1
    executed = _shed(shedding, {}, namespaceIsolationPolicies={"p": isolation([f"{ns}.*"], ["broker-0"], ["broker-0"])})
    assert executed["unloads"] == []
    [dropped] = executed["dropped"]
    assert dropped["dropped"] == "NamespacePolicies"
    executed = _shed(
        shedding, {}, namespaceIsolationPolicies={"p": isolation([f"{ns}.*"], ["broker-0"], ["broker-2"], 2)}
    )
    assert [u["destination"] for u in executed["unloads"]] == ["broker-2"]


# ---------------------------------------------------------------------------------------------
# TransferShedder (extensible): isTransferable with the policy filters
# ---------------------------------------------------------------------------------------------
def _transfer(config: LoadBalancerConfig, policies: PlacementPolicies) -> set[tuple[str, str, str | None]]:
    store, tops = setup_context(config)
    inp = ExtensibleInput(
        broker_load_data=store,
        top_bundles=tops,
        available_brokers=list(store),
        recently_unloaded_bundles={},
        recently_unloaded_brokers={},
        now_ms=NOW,
        policies=policies,
    )
    decision, _ = TransferShedder().find_bundles_for_unloading(inp, config, StrategyState())
    return {(u.broker, u.bundle, u.destination) for u in decision.unloads}


D1 = "my-tenant/my-namespaceD/0x00000000_0x0FFFFFFF"
E1 = "my-tenant/my-namespaceE/0x00000000_0x0FFFFFFF"


def test_bundles_with_isolation_policies() -> None:
    """TransferShedderTest.testBundlesWithIsolationPolicies: namespace E isolated to broker5."""
    iso = parse_policies(
        {"namespaceIsolationPolicies": {"e": isolation(["my-tenant/my-namespaceE"], ["broker5"], [])}}, ""
    )
    with_policies = conf(loadBalancerSheddingBundlesWithPoliciesEnabled=True)
    assert _transfer(with_policies, PlacementPolicies()) == {
        ("broker5:8080", E1, "broker1:8080"),
        ("broker4:8080", D1, "broker2:8080"),
    }
    assert _transfer(with_policies, iso) == {("broker4:8080", D1, "broker1:8080")}
    no_transfer = conf(loadBalancerSheddingBundlesWithPoliciesEnabled=True, loadBalancerTransferEnabled=False)
    assert _transfer(no_transfer, iso) == {("broker4:8080", D1, None)}
    # every namespace has a policy and loadBalancerSheddingBundlesWithPoliciesEnabled=false: nothing moves
    everyone = parse_policies(
        {"namespaceIsolationPolicies": {"all": isolation(["my-tenant/.*"], ["broker.*"], [])}}, ""
    )
    assert _transfer(conf(), everyone) == set()
    assert _transfer(conf(loadBalancerTransferEnabled=False), everyone) == set()


def test_bundles_with_anti_affinity_group() -> None:
    """TransferShedderTest.testBundlesWithAntiAffinityGroup / testIsLoadBalancerSheddingBundlesWithPoliciesEnabled:
    a bundle with an anti-affinity group moves only with loadBalancerSheddingBundlesWithPoliciesEnabled
    and to a broker the group filter keeps."""
    groups = parse_policies(
        {"antiAffinityGroups": {"my-tenant/my-namespaceE": "g", "my-tenant/my-namespaceA": "g"}}, ""
    )
    assert (("broker5:8080", E1, "broker1:8080")) not in _transfer(conf(), groups)
    moved = _transfer(conf(loadBalancerSheddingBundlesWithPoliciesEnabled=True), groups)
    assert ("broker5:8080", E1, "broker1:8080") in moved  # no ownership known: the group filter counts none


# ---------------------------------------------------------------------------------------------
# Ours: the guard's destination rules and the GlobalPlanner's destinations
# ---------------------------------------------------------------------------------------------
def test_guard_refuses_and_replaces_a_destination_outside_the_isolation_policy() -> None:
    reports = {
        "hot": guard_report(80, {"iso/ns/0x00000000_0x80000000": 100, "t/x/0x00000000_0x80000000": 300}),
        "cool1": guard_report(20, {"t/y/0x00000000_0x80000000": 100}),
        "cool2": guard_report(30, {"t/z/0x00000000_0x80000000": 100}),
    }
    policies = parse_policies({"namespaceIsolationPolicies": {"iso": isolation(["iso/.*"], ["hot", "cool2"], [])}}, "")
    move = Move(bundle="iso/ns/0x00000000_0x80000000", source="hot", destination="cool1")
    limits = GuardLimits(overload=10.0, band=10.0, free_share=1.0)
    cut = guard_plan(reports, [move], W, limits, policies=policies, replace=False)
    [verdict] = cut.verdicts
    assert not verdict.passed and verdict.rules == ("isolation-policy",)
    replaced = guard_plan(reports, [move], W, limits, policies=policies)
    [verdict] = replaced.verdicts
    assert verdict.passed and verdict.destination == "cool2" and verdict.planned_destination == "cool1"
    assert guard_plan(reports, [move], W, limits).verdicts[0].passed  # no policies: no such rule


def test_guard_anti_affinity_rule_counts_kept_moves() -> None:
    """Two namespaces of one group must not meet on a broker while another owns none of the group."""
    a, b = "t/a/0x00000000_0x80000000", "t/b/0x00000000_0x80000000"
    reports = {
        "hot": guard_report(80, {a: 100, b: 100, "t/x/0x00000000_0x80000000": 100}),
        "cool1": guard_report(20, {"t/y/0x00000000_0x80000000": 100}),
        "cool2": guard_report(20, {"t/z/0x00000000_0x80000000": 100}),
    }
    policies = parse_policies({"antiAffinityGroups": {"t/a": "g", "t/b": "g"}}, "")
    limits = GuardLimits(overload=10.0, band=10.0, free_share=1.0)
    moves = [Move(bundle=a, source="hot", destination="cool1"), Move(bundle=b, source="hot", destination="cool1")]
    result = guard_plan(reports, moves, W, limits, policies=policies, replace=False)
    first, second = result.verdicts
    assert first.passed
    assert not second.passed and second.rules == ("anti-affinity-group",)
    result = guard_plan(reports, moves, W, limits, policies=policies)
    assert [v.destination for v in result.verdicts] == ["cool1", "cool2"]


def test_global_planner_moves_an_isolated_bundle_only_to_its_brokers() -> None:
    hot_iso = "iso/ns/0x00000000_0x40000000"
    last = {hot_iso: stats(300, 30 * MB), "iso/ns2/0x40000000_0x80000000": stats(100, 10 * MB)}
    brokers = {
        "hot": broker(list(last), cpu=90, last=last),
        "idle": broker(["t/y/0x00000000_0x80000000"], cpu=5, last={"t/y/0x00000000_0x80000000": stats(10, 1 * MB)}),
        "iso2": broker(["t/z/0x00000000_0x80000000"], cpu=40, last={"t/z/0x00000000_0x80000000": stats(50, 5 * MB)}),
    }
    policies = {"namespaceIsolationPolicies": {"iso": isolation(["iso/.*"], ["hot", "iso2"], [])}}

    def moves(**top: Any) -> dict[str, str]:
        doc = {"shedding": "GlobalPlanner", "cycles": [{"nowMs": NOW, "brokers": brokers}], **top}
        return {u["bundle"]: u["destination"] for u in decide_scenario(doc)["cycles"][0]["unloads"]}

    free = moves()
    assert "idle" in free.values()  # without the policy the idlest broker takes a bundle
    constrained = moves(**policies)
    assert constrained and set(constrained.values()) == {"iso2"}


@pytest.mark.parametrize(
    ("policy", "fragment"),
    [
        (isolation(["t/ns"], ["broker-("], []), "namespaceIsolationPolicies.iso.primary[0]: invalid policy regex"),
        (isolation([], ["b1"], []), "namespaceIsolationPolicies.iso.namespaces: at least one namespace regex"),
        (
            {
                **isolation(["t/ns"], ["b1"], []),
                "auto_failover_policy": {
                    "policy_type": "min_available",
                    "parameters": {"min_limit": "-2", "usage_threshold": "80"},
                },
            },
            "namespaceIsolationPolicies.iso.auto_failover_policy.parameters.min_limit: -2 is negative",
        ),
    ],
)
def test_the_decide_command_refuses_an_invalid_policy_with_exit_2_naming_it(
    tmp_path: Any, policy: dict[str, Any], fragment: str
) -> None:
    import json
    import subprocess
    import sys

    doc = {"shedding": "ThresholdShedder", "namespaceIsolationPolicies": {"iso": policy}, "cycles": [{"brokers": {}}]}
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "pulsar_rebalance.cli", "decide", str(path)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("pulsar-rebalance decide: error: ") and fragment in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    ("shedding", "placement"),
    [
        ("ThresholdShedder", "LeastLongTermMessageRate"),
        ("OverloadShedder", "LeastResourceUsageWithWeight"),
        ("UniformLoadShedder", "LeastLongTermMessageRate"),
        ("AvgShedder", "AvgShedder"),
        ("TransferShedder", "LeastResourceUsageWithWeight"),
    ],
)
def test_every_strategy_places_within_the_isolation_policy_and_the_anti_affinity_group(
    shedding: str, placement: str
) -> None:
    """LoadManagerSharedTest / BrokerIsolationPoliciesFilterTest / AntiAffinityNamespaceGroupTest's rules
    through ``decide``'s lookups (``place``) for every shedding strategy and its placement, modular and
    extensible: an isolated namespace lands on its primaries (its secondary when fewer than ``min_limit``
    primaries are up), a namespace without a policy keeps off them, and a namespace of an anti-affinity
    group keeps off the broker that owns another namespace of the group."""
    names = [f"broker-{i}:8080" for i in range(1, 6)]
    iso = f"iso/ns/{FULL}"
    free = f"other/ns/{FULL}"
    grouped = f"g/two/{FULL}"

    def place(available: list[str], min_limit: int = 1) -> dict[str, str | None]:
        brokers = {b: broker([f"g/one/{FULL}"] if b == "broker-5:8080" else []) for b in available}
        doc: dict[str, Any] = {
            "shedding": shedding,
            "placement": placement,
            "namespaceIsolationPolicies": {
                "p": isolation(["iso/.*"], ["broker-[12]:8080"], ["broker-3:8080"], min_limit)
            },
            "antiAffinityGroups": {"g/one": "grp", "g/two": "grp"},
            "cycles": [{"nowMs": NOW, "brokers": brokers, "place": [iso, free, grouped]}],
        }
        out = decide_scenario(doc)["cycles"][0]["placements"]
        return {b: out[b]["broker"] for b in (iso, free, grouped)}

    got = place(names)
    assert got[iso] in ("broker-1:8080", "broker-2:8080")
    # without a policy: the shared brokers (primary in no policy; a secondary is shared); the group's second
    # namespace also keeps off broker-5, which owns its first
    assert got[free] in ("broker-3:8080", "broker-4:8080", "broker-5:8080")
    assert got[grouped] in ("broker-3:8080", "broker-4:8080")
    got = place(names, min_limit=2)  # both primaries up: still the primaries
    assert got[iso] in ("broker-1:8080", "broker-2:8080")
    got = place([b for b in names if b != "broker-2:8080"], min_limit=2)  # one primary up < 2: secondary too
    assert got[iso] in ("broker-1:8080", "broker-3:8080")
    got = place(["broker-3:8080", "broker-4:8080", "broker-5:8080"])  # no primary: the secondary only
    assert got[iso] == "broker-3:8080"


def test_global_planner_warns_of_a_constraint_no_move_can_meet_and_moves_nothing_for_it() -> None:
    """Issue 18: an isolation policy whose primaries and secondaries are all down and an anti-affinity
    group with more namespaces than brokers are warned of on every plan (balanced or not); the planner
    neither moves the isolated bundles anywhere else nor puts two namespaces of the group together
    where a broker without one exists."""
    iso = "iso/ns/0x00000000_0x80000000"
    a, b, c, d = (f"g/{n}/0x00000000_0x80000000" for n in "abcd")
    last = {iso: stats(300, 30 * MB), a: stats(100, 10 * MB), "t/x/0x00000000_0x80000000": stats(200, 20 * MB)}
    brokers = {
        "hot": broker(list(last), cpu=90, last=last),
        "cool": broker([b], cpu=10, last={b: stats(10, 1 * MB)}),
        "warm": broker([c, d], cpu=30, last={c: stats(10, 1 * MB), d: stats(10, 1 * MB)}),
    }
    policies = {
        "namespaceIsolationPolicies": {"iso": isolation(["iso/.*"], ["gone-.*"], ["also-gone"])},
        "antiAffinityGroups": {"g/a": "grp", "g/b": "grp", "g/c": "grp", "g/d": "grp"},
    }
    doc = {"shedding": "GlobalPlanner", "cycles": [{"nowMs": NOW, "brokers": brokers}], **policies}
    cycle = decide_scenario(doc)["cycles"][0]
    warnings = cycle["stats"]["warnings"]
    assert any(
        "isolation policy 'iso'" in w and "0 primary broker(s) available" in w and "no allowed broker" in w
        for w in warnings
    ), warnings
    assert any("anti-affinity group 'grp' has 4 namespaces" in w and "only 3 available brokers" in w for w in warnings)
    moved = {u["bundle"] for u in cycle["unloads"]}
    assert iso not in moved and a not in moved and moved  # only the bundle without constraints moves
    # balanced: still warned of
    calm = {name: {**br, "cpu": {"usage": 40.0, "limit": 100.0}} for name, br in brokers.items()}
    doc["cycles"] = [{"nowMs": NOW, "brokers": calm}]
    cycle = decide_scenario(doc)["cycles"][0]
    assert cycle["reason"] == "Balanced" and len(cycle["stats"]["warnings"]) == 2
    # one primary back up: no isolation warning any more (min_limit 1 met)
    del policies["antiAffinityGroups"]
    doc = {
        "shedding": "GlobalPlanner",
        "cycles": [{"nowMs": NOW, "brokers": calm}],
        "namespaceIsolationPolicies": {"iso": isolation(["iso/.*"], ["cool"], [])},
    }
    assert not decide_scenario(doc)["cycles"][0]["stats"].get("warnings")
