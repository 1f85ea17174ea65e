"""Plan modes: drain and fill (core.modes), and the guard's cordon rule and drain average."""

from __future__ import annotations

from pulsar_rebalance.core.contract.policies_json import parse_policies
from pulsar_rebalance.core.guard import GuardLimits, guard_plan
from pulsar_rebalance.core.modes import drain_plan, fill_plan
from pulsar_rebalance.core.prediction import LoadState, Move
from tests.core.test_guard import W, report

LIMITS = GuardLimits(overload=0.85, band=0.10, free_share=0.5)


def _b(ns: str, i: int) -> str:
    return f"t/{ns}/0x{i:08x}_0x{i + 1:08x}"


def cluster() -> dict[str, dict]:
    """b1..b4 at 40 %, each with four bundles of 100 msg/s (10 % each); b5 empty at 5 %."""
    out = {f"b{n}": report(40.0, {_b(f"n{n}", i): 100.0 for i in range(4)}) for n in range(1, 5)}
    out["b5"] = report(5.0, {})
    return out


def owners(reports: dict[str, dict]) -> dict[str, str]:
    return {bundle: b for b, r in reports.items() for bundle in r["lastStats"]}


def test_drain_moves_every_bundle_off_once_to_the_least_used_allowed_broker_never_a_cordoned_one() -> None:
    reports = cluster()
    plan = drain_plan(owners(reports), LoadState(reports, W), ["b1"], cordoned=["b2"])
    assert sorted(m.bundle for m in plan.moves) == sorted(reports["b1"]["lastStats"])
    dests = [m.destination for m in plan.moves]
    assert "b1" not in dests and "b2" not in dests
    assert dests[0] == "b5"  # the emptiest first
    state = LoadState(reports, W)  # each destination is the least used after its move, among b3..b5
    for m in plan.moves:
        after = {d: state.usage_after(Move(m.bundle, "b1", d))[1] for d in ("b3", "b4", "b5")}
        assert after[m.destination] == min(after.values())
        state.apply(m.to_move())
    assert state.usage("b1") < 0.05 < state.usage("b5")
    assert plan.left == () and "drain b1: 4 bundle(s) owned, 4 move(s)" in plan.detail
    assert all("least used after the move" in m.reason for m in plan.moves)
    # draining a broker that owns nothing: an empty plan that says so
    empty = drain_plan(owners(reports), LoadState(reports, W), ["b5"])
    assert empty.empty and empty.detail == "drain b5: they own no bundle"


def test_drain_keeps_a_bundle_whose_isolation_policy_allows_no_other_broker() -> None:
    reports = cluster()
    policies = parse_policies(
        {
            "namespaceIsolationPolicies": {
                "n1": {
                    "namespaces": ["t/n1"],
                    "primary": ["b1"],
                    "secondary": [],
                    "auto_failover_policy": {
                        "policy_type": "min_available",
                        "parameters": {"min_limit": "1", "usage_threshold": "80"},
                    },
                }
            }
        },
        "",
    )
    plan = drain_plan(owners(reports), LoadState(reports, W), ["b1"], policies=policies)
    assert plan.moves == () and len(plan.left) == 4
    assert "allowed by its namespace's isolation policy" in plan.left[0].why
    assert plan.warnings[0].startswith(f"{plan.left[0].bundle} stays on b1: ")


def test_fill_loads_the_new_broker_to_the_average_and_moves_nothing_between_the_others() -> None:
    reports = cluster()
    before = LoadState(reports, W).usages()
    average = sum(before.values()) / len(before)  # 33 %
    plan = fill_plan(owners(reports), LoadState(reports, W), ["b5"])
    assert plan.moves and all(m.destination == "b5" for m in plan.moves)
    assert len({m.bundle for m in plan.moves}) == len(plan.moves)  # each bundle once
    state = LoadState(reports, W)
    for m in plan.moves:
        state.apply(m.to_move())
    assert abs(state.usage("b5") - average) <= 0.05
    assert all(state.usage(b) >= average - 0.05 for b in ("b1", "b2", "b3", "b4"))
    assert plan.warnings == ()


def test_fill_warns_when_no_bundle_fits() -> None:
    """One source bundle carries 30 points: moving it would put the new broker far above the average."""
    reports = {"big": report(60.0, {_b("x", 0): 100.0}), "new": report(0.0, {})}
    plan = fill_plan(owners(reports), LoadState(reports, W), ["new"])
    assert plan.empty
    assert "new is predicted at 1.0% after this plan, below the cluster average 30.5%" in plan.warnings[0]


def test_the_guard_refuses_a_cordoned_destination_and_replaces_it() -> None:
    reports = cluster()
    reports["b1"] = report(70.0, {_b("n1", i): 100.0 for i in range(7)})  # 10 points a bundle
    reports["b2"] = report(30.0, {_b("n2", 0): 100.0})
    move = Move(bundle=_b("n1", 0), source="b1", destination="b5")
    refused = guard_plan(reports, [move], W, LIMITS, replace=False, cordoned=["b5"])
    [verdict] = refused.verdicts
    assert not verdict.passed and verdict.rules == ("cordoned",)
    assert "b5 is cordoned (drained)" in verdict.reason
    replaced = guard_plan(reports, [move], W, LIMITS, cordoned=["b5"])
    [verdict] = replaced.verdicts
    assert verdict.passed and verdict.destination == "b2" and verdict.planned_destination == "b5"
    assert guard_plan(reports, [move], W, LIMITS).verdicts[0].passed  # not cordoned: no such rule


def test_the_guard_lets_a_drain_raise_the_others_to_the_average_of_the_brokers_that_stay() -> None:
    """Four brokers at 40 %, one drained: the others must end above today's busiest (40 %). Judged as a
    rebalance the guard cuts that (worst broker); judged as a drain (``leaving``) it keeps every move
    while each destination stays within the new average (50 %) plus the band."""
    reports = {f"b{n}": report(40.0, {_b(f"n{n}", i): 100.0 for i in range(4)}) for n in range(1, 5)}
    plan = drain_plan(owners(reports), LoadState(reports, W), ["b1"], cordoned=["b1"])
    moves = [m.to_move() for m in plan.moves]
    as_rebalance = guard_plan(reports, moves, W, LIMITS, cordoned=["b1"])
    assert any(not v.passed for v in as_rebalance.verdicts)
    as_drain = guard_plan(reports, moves, W, LIMITS, cordoned=["b1"], leaving=["b1"])
    assert all(v.passed for v in as_drain.verdicts), [v.reason for v in as_drain.verdicts if not v.passed]
    assert as_drain.max_before == 0.40  # the result still reports the busiest broker before
