"""``core.compliance``: the constraints a move is checked against, and the fix plan for policy violations."""

from __future__ import annotations

from pulsar_rebalance.core.compliance import NOTHING_TO_FIX, describe_constraints, fix_plan
from pulsar_rebalance.core.contract.policies_json import parse_policies
from pulsar_rebalance.core.pulsar.policies import NO_POLICIES, DestinationFilter, violations
from pulsar_rebalance.simulator.scenarios import isolation_policy as _iso

BROKERS = [f"b{i}:8080" for i in range(6)]


def _owned(owners: dict[str, str]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {b: set() for b in BROKERS}
    for bundle, broker in owners.items():
        out.setdefault(broker, set()).add(bundle)
    return out


def _apply(owners: dict[str, str], plan) -> dict[str, str]:
    after = dict(owners)
    for m in plan.moves:
        assert after[m.bundle] == m.source
        after[m.bundle] = m.destination
    return after


def test_describe_constraints_names_the_policy_its_brokers_and_the_group() -> None:
    pol = parse_policies(
        {
            "namespaceIsolationPolicies": {"payments": _iso("pay/.*", "broker-[0-3]", "broker-9", 2)},
            "antiAffinityGroups": {"pay/a": "orders", "pay/b": "orders"},
            "failureDomains": {"rack-a": {"brokers": ["broker-0:8080"]}},
        },
        "",
    )
    texts = [(c.rule, c.text) for c in describe_constraints("pay/a/0x00000000_0xffffffff", pol)]
    assert texts == [
        (
            "isolation-policy",
            "isolation policy 'payments': primary broker-[0-3]; secondary broker-9 when fewer than "
            "min_limit=2 primaries are available",
        ),
        ("anti-affinity-group", "anti-affinity group 'orders' (with pay/b)"),
    ]
    spread = describe_constraints("pay/a/0x00000000_0xffffffff", pol, failure_domains_enabled=True)
    assert spread[1].text.endswith(", spread over failure domains")
    # a namespace without a policy, in a cluster with policies: shared brokers only
    (shared,) = describe_constraints("other/x/0x00000000_0xffffffff", pol)
    assert shared.rule == "isolation-policy" and "shared brokers only (not a primary of 'payments')" in shared.text
    assert describe_constraints("other/x/0x00000000_0xffffffff", NO_POLICIES) == []


def test_no_violation_no_move_and_the_empty_plan_says_why() -> None:
    pol = parse_policies({"namespaceIsolationPolicies": {"iso": _iso("iso/.*", "b[01]", "b2", 1)}}, "")
    owners = {"iso/a/0x00000000_0xffffffff": "b0:8080", "s/x/0x00000000_0xffffffff": "b4:8080"}
    plan = fix_plan(owners, pol, BROKERS)
    assert plan.empty and plan.violations == () and plan.why_empty() == NOTHING_TO_FIX
    assert fix_plan(owners, NO_POLICIES, BROKERS).empty


def test_each_violating_bundle_moves_once_to_the_least_used_allowed_broker_and_the_rest_stay() -> None:
    pol = parse_policies({"namespaceIsolationPolicies": {"iso": _iso("iso/.*", "b[012]", "b5", 2)}}, "")
    owners = {
        "iso/a/0x00000000_0x80000000": "b0:8080",  # fine
        "iso/a/0x80000000_0xffffffff": "b3:8080",  # neither primary nor secondary
        "iso/b/0x00000000_0xffffffff": "b5:8080",  # secondary while 3 primaries are up
        "iso/c/0x00000000_0xffffffff": "b4:8080",  # neither
        "s/x/0x00000000_0xffffffff": "b1:8080",  # shared namespace on a primary
        "s/y/0x00000000_0xffffffff": "b3:8080",  # fine
        "s/z/0x00000000_0xffffffff": "b3:8080",  # fine
    }
    plan = fix_plan(owners, pol, BROKERS)
    moved = {m.bundle: (m.source, m.destination) for m in plan.moves}
    # bundles owned by the primaries b0, b1, b2: 1, 1, 0 -> b2; then 1, 1, 1 -> b0 (first in order); then b1.
    # The shared s/x goes to b4 (emptied by the moves so far; b3 keeps two bundles)
    assert moved == {
        "iso/a/0x80000000_0xffffffff": ("b3:8080", "b2:8080"),
        "iso/b/0x00000000_0xffffffff": ("b5:8080", "b0:8080"),
        "iso/c/0x00000000_0xffffffff": ("b4:8080", "b1:8080"),
        "s/x/0x00000000_0xffffffff": ("b1:8080", "b4:8080"),
    }
    assert len(plan.moves) == len({v.bundle for v in plan.violations})  # one move per violating bundle
    for m in plan.moves:
        assert m.reason.startswith(f"policy violation: {m.violation.rule}: ") and m.destination in m.reason
    assert violations(_apply(owners, plan), pol, BROKERS) == []  # compliant afterwards


def test_least_used_follows_the_load_when_given() -> None:
    from pulsar_rebalance.core.prediction import LoadState
    from tests.core.test_guard import report

    pol = parse_policies({"namespaceIsolationPolicies": {"iso": _iso("iso/.*", "b[01]", "b9", 1)}}, "")
    owners = {"iso/a/0x00000000_0x80000000": "b2:8080", "iso/a/0x80000000_0xffffffff": "b2:8080"}
    reports = {
        "b0:8080": report(70.0, {}),  # no bundle but busy: by bundle count it would win
        "b1:8080": report(20.0, {"s/q/0x00000000_0xffffffff": 100.0}),
        "b2:8080": report(40.0, dict.fromkeys(owners, 100.0)),
    }
    load = LoadState(reports, (1.0, 1.0, 1.0, 1.0, 1.0))
    plan = fix_plan(owners, pol, list(reports), load=load)
    # b1 at 20 %; the first bundle's 20 points (half of b2's traffic) put it at 40 %, still below b0's 70 %
    assert [m.destination for m in plan.moves] == ["b1:8080", "b1:8080"]
    assert "least used (usage)" in plan.moves[0].chosen
    by_count = fix_plan(owners, pol, list(reports))
    assert [m.destination for m in by_count.moves] == ["b0:8080", "b1:8080"]
    assert load.usage("b1:8080") == 0.2  # the caller's state is not changed


def test_anti_affinity_moves_the_smaller_namespace_once_and_counts_as_moves_accumulate() -> None:
    pol = parse_policies({"antiAffinityGroups": {"g/x": "grp", "g/y": "grp", "g/z": "grp"}}, "")
    owners = {
        "g/x/0x00000000_0x40000000": "b0:8080",
        "g/x/0x40000000_0x80000000": "b0:8080",
        "g/x/0x80000000_0xffffffff": "b0:8080",
        "g/y/0x00000000_0xffffffff": "b0:8080",  # g/y shares b0 with g/x: it moves, g/x stays
        "g/z/0x00000000_0xffffffff": "b1:8080",
    }
    brokers = BROKERS[:3]
    plan = fix_plan(owners, pol, brokers)
    assert [(m.bundle, m.destination) for m in plan.moves] == [("g/y/0x00000000_0xffffffff", "b2:8080")]
    assert {v.bundle for v in plan.resolved} == {b for b in owners if b.startswith("g/x/")}
    assert violations(_apply(owners, plan), pol, brokers) == []
    # the destination is one Pulsar's anti-affinity filter itself would pick
    check = DestinationFilter(pol, _owned(owners))
    assert check.permits("g/y/0x00000000_0xffffffff", "b0:8080", "b2:8080")
    # two namespaces to move, one free broker each: the second move sees the first
    owners2 = {**owners, "g/z/0x00000000_0xffffffff": "b0:8080"}
    plan2 = fix_plan(owners2, pol, brokers)
    assert sorted(m.destination for m in plan2.moves) == ["b1:8080", "b2:8080"]
    assert violations(_apply(owners2, plan2), pol, brokers) == []


def test_a_bundle_no_allowed_broker_can_take_is_reported_not_moved() -> None:
    # isolated to b0 and b1, both gone: min_limit 1 fails over to the secondary b9, also absent
    pol = parse_policies({"namespaceIsolationPolicies": {"iso": _iso("iso/.*", "b[01]", "b9", 1)}}, "")
    owners = {"iso/a/0x00000000_0xffffffff": "b3:8080"}
    plan = fix_plan(owners, pol, ["b2:8080", "b3:8080"])
    assert plan.empty and len(plan.unfixable) == 1
    (u,) = plan.unfixable
    assert u.violation.rule == "isolation-policy" and "no other live broker" in u.why
    assert "iso/a/0x00000000_0xffffffff on b3:8080 breaks isolation-policy and is not moved" in u.message
    assert "none can move" in plan.why_empty()


def test_with_failure_domains_the_fix_leaves_the_shared_domain() -> None:
    pol = parse_policies(
        {
            "failureDomains": {"rack-a": {"brokers": ["b0:8080", "b1:8080"]}, "rack-b": {"brokers": ["b2:8080"]}},
            "antiAffinityGroups": {"g/x": "grp", "g/y": "grp"},
        },
        "",
    )
    owners = {"g/x/0x00000000_0xffffffff": "b0:8080", "g/y/0x00000000_0xffffffff": "b1:8080"}
    brokers = BROKERS[:3]
    plan = fix_plan(owners, pol, brokers, failure_domains_enabled=True)
    assert [m.destination for m in plan.moves] == ["b2:8080"] and len(plan.resolved) == 1
    assert violations(_apply(owners, plan), pol, brokers, failure_domains_enabled=True) == []
