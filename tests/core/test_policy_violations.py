"""``core.pulsar.policies.violations``: which bundles' owners break the placement constraints now, and why."""

from __future__ import annotations

from pulsar_rebalance.core.contract.policies_json import parse_policies
from pulsar_rebalance.core.pulsar.policies import NO_POLICIES, VIOLATION_RULES, violations
from pulsar_rebalance.simulator.scenarios import isolation_policy as _iso

BROKERS = [f"b{i}:8080" for i in range(6)]


def test_no_constraints_no_violations() -> None:
    assert violations({"t/a/0x00000000_0xffffffff": "b0:8080"}, NO_POLICIES, BROKERS) == []


def test_isolation_primary_secondary_and_shared_brokers() -> None:
    pol = parse_policies({"namespaceIsolationPolicies": {"iso": _iso("iso/.*", "b[01]", "b2", 2)}}, "")
    owners = {
        "iso/a/0x00000000_0x80000000": "b0:8080",  # primary: fine
        "iso/a/0x80000000_0xffffffff": "b2:8080",  # secondary while 2 primaries are up
        "iso/b/0x00000000_0xffffffff": "b3:8080",  # neither
        "s/x/0x00000000_0xffffffff": "b1:8080",  # a shared namespace on a primary
        "s/y/0x00000000_0xffffffff": "b4:8080",  # fine
        "s/z/0x00000000_0xffffffff": "gone:8080",  # not an available broker: not judged
    }
    found = {v.bundle: v for v in violations(owners, pol, BROKERS)}
    assert {b: v.rule for b, v in found.items()} == {
        "iso/a/0x80000000_0xffffffff": "isolation-secondary",
        "iso/b/0x00000000_0xffffffff": "isolation-policy",
        "s/x/0x00000000_0xffffffff": "isolation-policy",
    }
    assert "min_limit=2" in found["iso/a/0x80000000_0xffffffff"].why
    assert "neither primary nor secondary in policy 'iso'" in found["iso/b/0x00000000_0xffffffff"].why
    assert "not a shared broker" in found["s/x/0x00000000_0xffffffff"].why
    # b1 gone: one primary < min_limit 2 -> failover, the secondary is allowed
    failover = violations(owners, pol, [b for b in BROKERS if b != "b1:8080"])
    assert "iso/a/0x80000000_0xffffffff" not in {v.bundle for v in failover}
    assert {v.rule for v in failover} <= set(VIOLATION_RULES)


def test_anti_affinity_sharing_is_a_violation_only_while_an_alternative_exists() -> None:
    pol = parse_policies({"antiAffinityGroups": {"g/x": "grp", "g/y": "GRP", "g/z": "grp"}}, "")  # ignoring case
    owners = {
        "g/x/0x00000000_0x80000000": "b0:8080",
        "g/x/0x80000000_0xffffffff": "b0:8080",  # the namespace itself twice: fine
        "g/y/0x00000000_0xffffffff": "b0:8080",  # shares b0 with g/x
        "g/z/0x00000000_0xffffffff": "b1:8080",
    }
    found = violations(owners, pol, BROKERS)
    assert sorted(v.bundle for v in found) == sorted(b for b in owners if b.startswith(("g/x", "g/y")))
    assert all(v.rule == "anti-affinity-group" and "'grp'" in v.why.lower() for v in found)
    # every broker owns a namespace of the group: sharing cannot be avoided, nothing is reported
    assert violations(owners, pol, ["b0:8080", "b1:8080"]) == []
    # the alternative must be one the isolation policy allows
    iso = parse_policies(
        {
            "namespaceIsolationPolicies": {"iso": _iso("g/.*", "b[01]", "b9", 1)},
            "antiAffinityGroups": {"g/x": "grp", "g/y": "grp", "g/z": "grp"},
        },
        "",
    )
    assert violations(owners, iso, BROKERS) == []


def test_anti_affinity_with_failure_domains_counts_domains() -> None:
    pol = parse_policies(
        {
            "failureDomains": {"rack-a": {"brokers": ["b0:8080", "b1:8080"]}, "rack-b": {"brokers": ["b2:8080"]}},
            "antiAffinityGroups": {"g/x": "grp", "g/y": "grp"},
        },
        "",
    )
    owners = {"g/x/0x00000000_0xffffffff": "b0:8080", "g/y/0x00000000_0xffffffff": "b1:8080"}
    assert violations(owners, pol, BROKERS) == []  # different brokers: fine without failureDomainsEnabled
    found = violations(owners, pol, BROKERS, failure_domains_enabled=True)
    assert [v.rule for v in found] == ["anti-affinity-group", "anti-affinity-group"]
    assert "failure domain 'rack-a'" in found[0].why
    # b3-b5 are in the default domain; with only rack-a and rack-b available, rack-b is the alternative
    only_racks = ["b0:8080", "b1:8080", "b2:8080"]
    assert len(violations(owners, pol, only_racks, failure_domains_enabled=True)) == 2
    spread = {**owners, "g/y/0x00000000_0xffffffff": "b2:8080"}
    assert violations(spread, pol, only_racks, failure_domains_enabled=True) == []


def test_the_key_survives_a_split() -> None:
    pol = parse_policies({"namespaceIsolationPolicies": {"iso": _iso("iso/.*", "b0", "b1", 1)}}, "")
    parent = violations({"iso/a/0x00000000_0xffffffff": "b3:8080"}, pol, BROKERS)
    children = violations(
        {"iso/a/0x00000000_0x80000000": "b3:8080", "iso/a/0x80000000_0xffffffff": "b3:8080"}, pol, BROKERS
    )
    assert {v.key for v in children} == {v.key for v in parent} == {("iso/a", "b3:8080", "isolation-policy")}
