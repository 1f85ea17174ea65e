"""The third held-out set (simulator/held_out_scenarios_3.py), kept in reserve until its first run: each scenario does what its description
says at both cadences and declares its criteria; ``bench_held_out_scenarios.py --set 3`` writes its own report with
them. (Building under every default load model at the stated load, determinism and unknown names: the shared tests of
test_held_out_scenario_sets.py.) No test here runs the GlobalPlanner on this set (doing nothing and Pulsar's
strategies only): its first run is the measure of the planner change that follows."""

from __future__ import annotations

from pathlib import Path

import pytest

from pulsar_rebalance.simulator import held_out_scenarios_3 as hs
from pulsar_rebalance.simulator.dynamics import ClusterModel
from pulsar_rebalance.simulator.scenarios import _bundle_loads
from tests.simulator.scenario_profiles import ROOT, at, check_tiny_set_run, factors, held_out_bench

bench = held_out_bench()

DAG_STEPS = (15, 60)
"""Where the closed loop's dag cadence puts the model around its second decision: the first plan applied at minute 15
(the approval delay), the second decision at minute 60."""


def test_the_sets_own_criteria() -> None:
    """(Every set's names, sizes and criteria keys: test_held_out_scenario_sets.py.)"""
    assert "steady" in hs.EXPECTATIONS_3["over-split-namespace"].criteria
    assert "jitter" in hs.EXPECTATIONS_3["perf-test-namespace"].criteria
    assert hs.EXPECTATIONS_3["namespace-onboarding"].criteria == hs.ALWAYS  # permanent: a good balancer moves
    assert hs.EXPECTATIONS_3["new-subscription"].criteria == hs.ALWAYS


def _rates_by_broker(m: ClusterModel, but: str) -> dict[str, float]:
    """Each live broker's message rate (in + out), namespace ``but``'s bundles left out."""
    rate = dict.fromkeys(m.live_brokers(), 0.0)
    for bundle, s in m.bundle_stats().items():
        if not bundle.startswith(f"{but}/"):
            rate[m.owners[bundle]] += s["msgRateIn"] + s["msgRateOut"]
    return rate


def _of(m: ClusterModel, ns: str) -> list[str]:
    return [b for b in m.owners if b.startswith(f"{ns}/")]


def _arrives(m: hs.ArrivingClusterModel, ns: str, minute: int, steps: tuple[int, ...]) -> dict[str, str]:
    """Advance ``m`` through ``steps`` (minutes, the last at or after ``minute``) and check that ``ns`` appears at the
    first step at or after ``minute``, its default 4 bundles placed one a broker on the brokers with the least message
    rate then (the other namespaces' traffic at that minute); where they were placed."""
    for step in steps:
        if step >= minute and ns not in m.namespaces:
            at(m, step)
            before = _rates_by_broker(m, ns)
            placed = m.created[ns]
            assert sorted(placed) == sorted(_of(m, ns)) and len(placed) == hs.DEFAULT_BUNDLES
            assert len(set(placed.values())) == hs.DEFAULT_BUNDLES  # one a broker (removeMostServicingBrokers...)
            least = sorted(before, key=lambda b: before[b])[: hs.DEFAULT_BUNDLES]
            assert set(placed.values()) == set(least)  # the least message rate (blind to bytes and to sizes)
            assert m.bundle_stats().keys() >= set(placed)
        else:
            at(m, step)
            assert (ns in m.namespaces) == (step >= minute)
    return m.created[ns]


@pytest.mark.parametrize(("cadence", "steps"), [("minute", (14, 15, 16)), ("dag", DAG_STEPS)])
def test_namespace_onboarding_places_the_new_namespace_by_lookup_and_its_traffic_stays(
    cadence: str, steps: tuple[int, ...]
) -> None:
    run = hs.build("namespace-onboarding", 1, cadence=cadence)
    m = run.model
    assert isinstance(m, hs.ArrivingClusterModel)
    assert hs.ONBOARD_NS not in m.namespaces and not _of(m, hs.ONBOARD_NS)
    assert not [t for t in m.topics if t.namespace == hs.ONBOARD_NS]
    assert len([t for t in m.all_topics if t.namespace == hs.ONBOARD_NS]) == hs.ONBOARD_TOPICS
    ideal = m.ideal_usage()
    placed = _arrives(m, hs.ONBOARD_NS, hs.ONBOARD_MIN, steps)
    if cadence == "minute":  # the ramp: half way at 15 minutes in, then all of it
        at(m, hs.ONBOARD_MIN + hs.ONBOARD_RAMP_MIN // 2)
        assert factors(m)[hs.ONBOARD_NS] == pytest.approx(0.5)
    at(m, 90)
    assert factors(m)[hs.ONBOARD_NS] == 1.0
    assert {v for ns, v in factors(m).items() if ns != hs.ONBOARD_NS} == {1.0}
    loads = _bundle_loads(m)
    new = sum(loads[b] for b in placed)
    assert new / (sum(loads.values()) - new) == pytest.approx(hs.ONBOARD_SHARE, rel=0.15)  # drift, daily cycle
    assert m.ideal_usage() == pytest.approx(ideal * (1 + hs.ONBOARD_SHARE), rel=0.1)
    usage = m.true_usage()
    hottest = max(usage, key=lambda b: usage[b])
    assert hottest in placed.values() and usage[hottest] > m.ideal_usage() + 0.1  # those 4 carry it
    at(m, 2880)
    assert m.owners.items() >= placed.items() and factors(m)[hs.ONBOARD_NS] == 1.0  # it stays


@pytest.mark.parametrize("cadence", hs.CADENCES)
def test_new_subscription_adds_dispatch_on_one_namespace_from_minute_20(cadence: str) -> None:
    m = hs.build("new-subscription", 1, cadence=cadence).model
    assert isinstance(m, hs.SubscribedClusterModel)
    assert len(m.namespaces[hs.SUB_NS].ranges) == hs.DEFAULT_BUNDLES
    assert {len(nb.ranges) for ns, nb in m.namespaces.items() if ns != hs.SUB_NS} == {16}
    ideal = m.ideal_usage()

    def consumers() -> int:
        return sum(s["consumerCount"] for b, s in m.bundle_stats().items() if b.startswith(f"{hs.SUB_NS}/"))

    def check(added: float) -> None:
        for t in m.topics:
            base = m.base_fanout.get(t.name, t.fanout) if t.namespace == hs.SUB_NS else t.fanout
            extra = added if t.namespace == hs.SUB_NS else 0.0
            assert t.rate_out == pytest.approx(t.rate_in * (base + extra + (t.toggle_fanout if t.toggle_period else 0)))
        assert set(factors(m, "rate_in").values()) == {1.0}  # publishing never changes

    at(m, hs.SUB_MIN - 1)
    check(0.0)
    before = consumers()
    at(m, hs.SUB_MIN if cadence == "minute" else 60)
    check(hs.NEW_SUBSCRIPTIONS)
    n_topics = sum(1 for t in m.topics if t.namespace == hs.SUB_NS)
    assert consumers() == before + hs.NEW_SUBSCRIPTIONS * n_topics
    usage = m.true_usage()
    hottest = max(usage, key=lambda b: usage[b])
    assert m.ideal_usage() > ideal * 1.1
    assert usage[hottest] > m.ideal_usage() + 0.1
    assert hottest in {m.owners[b] for b in _of(m, hs.SUB_NS)}  # a broker holding one of its 4 bundles
    at(m, 2880)
    check(hs.NEW_SUBSCRIPTIONS)  # they stay


@pytest.mark.parametrize("cadence", hs.CADENCES)
@pytest.mark.parametrize("seed", [1, 2])
def test_over_split_namespace_is_idle_bundles_on_two_brokers_in_a_balanced_cluster(cadence: str, seed: int) -> None:
    m = hs.build("over-split-namespace", seed, cadence=cadence).model
    legacy = _of(m, hs.SPLIT_NS)
    assert len(legacy) == hs.SPLIT_BUNDLES == len(m.namespaces[hs.SPLIT_NS].ranges)
    owners = [m.owners[b] for b in legacy]
    assert {o: owners.count(o) for o in set(owners)} == dict.fromkeys(hs.SPLIT_OWNERS, hs.SPLIT_BUNDLES // 2)
    counts = {b: sum(1 for o in m.owners.values() if o == b) for b in m.brokers}
    others = [c for b, c in counts.items() if b not in hs.SPLIT_OWNERS]
    assert min(counts[b] for b in hs.SPLIT_OWNERS) > 5 * max(others)  # bundle counts 6x uneven
    loads = _bundle_loads(m)
    assert sum(loads[b] for b in legacy) / sum(loads.values()) == pytest.approx(hs.SPLIT_SHARE, rel=0.05)
    assert 0 < sum(1 for b in legacy if b in m.bundle_stats()) <= hs.SPLIT_BUNDLES  # a trickle, in some of them
    for minute in (0, 30, 60, 600):  # the load stays even: nothing a move can fix
        at(m, minute)
        usage = m.true_usage()
        assert max(usage.values()) < m.ideal_usage() * 1.04, minute
        assert max(usage[b] for b in hs.SPLIT_OWNERS) < m.ideal_usage() * 1.04


@pytest.mark.parametrize(("cadence", "steps"), [("minute", (29, 30, 31, 74, 75, 76)), ("dag", (*DAG_STEPS, 75, 120))])
def test_perf_test_namespace_comes_once_placed_by_lookup_and_goes(cadence: str, steps: tuple[int, ...]) -> None:
    m = hs.build("perf-test-namespace", 1, cadence=cadence).model
    assert isinstance(m, hs.ArrivingClusterModel)
    perf = [t for t in m.all_topics if t.namespace == hs.PERF_NS]
    assert len(perf) == hs.PERF_TOPICS
    assert {(t.base_rate, t.msg_size, t.fanout, t.producers) for t in perf} == {
        (perf[0].base_rate, hs.PERF_MSG_SIZE, 1.0, 1)
    }  # one rate, one size, one subscription
    start = max(m.true_usage().values())
    running = [s for s in steps if hs.PERF_START_MIN <= s < hs.PERF_END_MIN]
    placed = _arrives(m, hs.PERF_NS, hs.PERF_START_MIN, tuple(running))
    usage = m.true_usage()
    assert max(usage[b] for b in placed.values()) > start + 0.1  # the test's load, on the brokers lookup chose
    assert max(usage.values()) < 0.85
    loads = _bundle_loads(m)
    test = sum(loads[b] for b in placed)
    assert test / (sum(loads.values()) - test) == pytest.approx(hs.PERF_SHARE, rel=0.15)
    for step in steps:
        if step >= hs.PERF_END_MIN:
            at(m, step)
            assert not [t for t in m.topics if t.namespace == hs.PERF_NS]  # its topics deleted
            assert not set(placed) & set(m.bundle_stats())  # its bundles empty: in no report
            assert max(m.true_usage().values()) < start + 0.03
    at(m, 2880)
    assert not [t for t in m.topics if t.namespace == hs.PERF_NS]  # once


def test_a_tiny_set_3_run_writes_its_own_report_with_the_criteria(tmp_path: Path) -> None:
    check_tiny_set_run(
        bench, 3, "third", hs.EXPECTATIONS_3, ["perf-test-namespace", "over-split-namespace"], tmp_path
    )  # never the planner


def test_set_3_writes_its_report_and_both_headlines_since_its_first_run() -> None:
    chosen = bench.SETS[3]
    assert dict(chosen.written) == {
        "held-out-scenarios-3-report": [ROOT / "docs/benchmarks/held-out-scenarios-3.md"],
        "held-out-scenarios-3-headline": [ROOT / "docs/benchmarks/README.md"],
        "held-out-scenarios-3-readme": [ROOT / "README.md"],
    }
    assert chosen.scenarios is hs.HELD_OUT_SCENARIOS_3 and chosen.expectations is hs.EXPECTATIONS_3
    assert {"held-out-scenarios-3-report", "held-out-scenarios-3-headline", "held-out-scenarios-3-readme"} <= set(
        bench.BLOCKS
    )
    assert chosen.json.exists()  # its first full run is committed: every block renders from it (test_docs_figures)
    assert "First run on: (" not in (ROOT / "docs/benchmarks/held-out-scenarios-3.md").read_text(encoding="utf-8")
