"""The sixth held-out set (simulator/held_out_scenarios_6.py), kept in reserve until its first run: each scenario does what its description
says at both cadences and declares its criteria; ``bench_held_out_scenarios.py --set 6`` writes its own report with
them. (Building under every default load model at the stated load, determinism and unknown names: the shared tests of
test_held_out_scenario_sets.py.) No test here runs the GlobalPlanner on this set (doing nothing and Pulsar's
strategies only): its first run is the measure of the planner change that follows."""

from __future__ import annotations

from pathlib import Path

import pytest

from pulsar_rebalance.simulator import held_out_scenarios_6 as hs
from pulsar_rebalance.simulator.dynamics import ClusterModel
from pulsar_rebalance.simulator.scenarios import _load, _topic_stats
from tests.simulator.scenario_profiles import DAG_STEPS, ROOT, at, check_tiny_set_run, held_out_bench

bench = held_out_bench()


def test_the_sets_own_criteria() -> None:
    """(Every set's names, sizes and criteria keys: test_held_out_scenario_sets.py.)"""
    for name, e in hs.EXPECTATIONS_6.items():  # each one stays (or stays for hours): a good balancer moves
        assert e.criteria == hs.ALWAYS, name


def _held(m: ClusterModel, namespaces: tuple[str, ...]) -> set[str]:
    """The brokers owning a bundle of one of ``namespaces``."""
    return {o for b, o in m.owners.items() if b.split("/0x")[0] in namespaces}


@pytest.mark.parametrize(("cadence", "before", "after"), [("minute", 19, 20), ("dag", *DAG_STEPS)])
def test_tenant_offboarding_deletes_a_tenants_namespaces_for_good(cadence: str, before: int, after: int) -> None:
    m = hs.build("tenant-offboarding", 1, cadence=cadence).model
    tenant = hs.OFFBOARD_NAMESPACES
    assert all(len(m.namespaces[ns]) == hs.DEFAULT_BUNDLES for ns in tenant)
    stats = m.bundle_stats()
    mine = sum(s["msgRateIn"] for b, s in stats.items() if b.split("/0x")[0] in tenant)
    assert mine / sum(s["msgRateIn"] for s in stats.values()) == pytest.approx(hs.OFFBOARD_SHARE, rel=0.05)
    at(m, before)
    held = _held(m, tenant)
    assert 6 <= len(held) < len(m.brokers)  # its large bundles spread: most brokers hold one, some none
    usage = m.true_usage()
    at(m, after)
    assert not set(tenant) & set(m.namespaces) and not _held(m, tenant)  # namespaces, bundles and topics gone
    assert not [t for t in m.topics if t.namespace in tenant]
    assert m.ideal_usage() < hs.OFFBOARD_LOAD * 0.75
    now = m.true_usage()
    for b in m.brokers:
        if b in held:
            assert now[b] < usage[b] - 0.1, b  # lost the tenant's share
        else:
            assert now[b] == pytest.approx(usage[b], rel=0.05), b  # kept all of theirs
    assert max(now.values()) > m.ideal_usage() + 0.1
    owners = dict(m.owners)
    at(m, 2880)
    assert not set(tenant) & set(m.namespaces) and m.owners == owners  # for good, nothing moved
    assert max(m.true_usage().values()) > m.ideal_usage() + 0.1


@pytest.mark.parametrize(("cadence", "steps"), [("minute", (9, 10, 14, 15, 50, 82, 87)), ("dag", DAG_STEPS)])
def test_rolling_upgrade_restarts_every_broker_in_turn_each_back_empty(cadence: str, steps: tuple[int, ...]) -> None:
    m = hs.build("rolling-upgrade", 1, cadence=cadence).model
    assert max(m.true_usage().values()) < m.ideal_usage() * 1.05
    for step in steps:
        at(m, step)
        for i in range(hs.UPGRADE_BROKERS):
            broker = f"broker-{i}:8080"
            down = hs.UPGRADE_START_MIN + i * hs.UPGRADE_EVERY_MIN
            gone = down <= step < down + hs.UPGRADE_DOWN_MIN
            assert m.brokers[broker].alive is not gone, (step, broker)
            if gone:  # its bundles placed by lookup on the others
                assert broker not in m.owners.values(), (step, broker)
    at(m, 87)
    assert len(m.live_brokers()) == hs.UPGRADE_BROKERS
    assert f"broker-{hs.UPGRADE_BROKERS - 1}:8080" not in m.owners.values()  # the last one back is empty
    assert max(m.true_usage().values()) > m.ideal_usage() + 0.1  # where the load is is lookup's doing
    owners = dict(m.owners)
    at(m, 2880)
    assert m.owners == owners and max(m.true_usage().values()) > m.ideal_usage() + 0.1  # nothing else changes it


@pytest.mark.parametrize(("cadence", "before", "after"), [("minute", 19, 20), ("dag", *DAG_STEPS)])
def test_subscription_replay_adds_a_quarter_of_a_broker_of_dispatch_for_6_hours(
    cadence: str, before: int, after: int
) -> None:
    m = hs.build("subscription-replay", 1, cadence=cadence).model
    assert isinstance(m, hs.ReplayClusterModel)
    t = m._by_name[hs.REPLAY_TOPIC]
    at(m, before)
    assert not m.replay_on() and t.fanout == m.base_fanout
    base = _load(m, _topic_stats(t))
    assert base == pytest.approx(hs.REPLAY_SHARE, rel=0.2)
    rate_in = t.rate_in
    at(m, after)
    assert m.replay_on() and t.fanout > m.base_fanout
    assert t.rate_in == pytest.approx(rate_in, rel=0.05)  # its publishing unchanged
    assert _load(m, _topic_stats(t)) == pytest.approx(base + hs.REPLAY_EXTRA, rel=0.1)
    usage = m.true_usage()
    hottest = max(usage, key=lambda b: usage[b])
    assert hottest == m.owners[m.bundle_of_topic(t.name)]
    assert usage[hottest] > m.ideal_usage() + 0.2
    end = hs.REPLAY_MIN + hs.REPLAY_HOURS * 60
    at(m, end - 1)
    assert m.replay_on()
    at(m, end)
    assert not m.replay_on() and t.fanout == m.base_fanout  # over after 6 hours
    assert max(m.true_usage().values()) < m.ideal_usage() * 1.08


@pytest.mark.parametrize(("cadence", "before", "after"), [("minute", 19, 20), ("dag", *DAG_STEPS)])
def test_nic_link_down_halves_two_brokers_nic_limit_for_good(cadence: str, before: int, after: int) -> None:
    m = hs.build("nic-link-down", 1, cadence=cadence).model
    at(m, before)
    assert {m.brokers[b].nic_mbps for b in m.brokers} == {1000.0}
    owners = dict(m.owners)
    at(m, after)
    for b, spec in m.brokers.items():
        assert spec.nic_mbps == (1000.0 * hs.LINK_LEFT if b in hs.LINK_DOWN else 1000.0), b
        assert spec.cores == 8.0
        assert m.load_reports()[b]["bandwidthOut"]["limit"] == spec.nic_mbps * 1024.0  # the limit it reports
    usage = m.true_usage()
    hottest = max(usage, key=lambda b: usage[b])
    assert hottest in hs.LINK_DOWN and usage[hottest] > m.ideal_usage() + 0.25  # NIC out binds under linear
    assert max(usage.values()) < 0.85
    at(m, 2880)
    assert m.owners == owners and max(m.true_usage().values()) > m.ideal_usage() + 0.25  # it stays


def test_nic_link_down_leaves_a_cpu_bound_cluster_balanced() -> None:
    m = hs.build("nic-link-down", 1, load_model="convex-cpu").model
    at(m, 30)
    assert {m.brokers[b].nic_mbps for b in hs.LINK_DOWN} == {10_000.0 * hs.LINK_LEFT}  # 10 Gbit/s NICs, halved
    assert max(m.true_usage().values()) < m.ideal_usage() * 1.05  # half a NIC is still plenty


def test_a_tiny_set_6_run_writes_its_own_report_with_the_criteria(tmp_path: Path) -> None:
    check_tiny_set_run(
        bench, 6, "sixth", hs.EXPECTATIONS_6, ["tenant-offboarding", "nic-link-down"], tmp_path
    )  # never the planner


def test_set_6_writes_its_report_and_both_headlines_since_its_first_run() -> None:
    chosen = bench.SETS[6]
    assert chosen.written is bench.SET_6_TARGETS
    assert dict(chosen.written) == {
        "held-out-scenarios-6-report": [ROOT / "docs/benchmarks/held-out-scenarios-6.md"],
        "held-out-scenarios-6-headline": [ROOT / "docs/benchmarks/README.md"],
        "held-out-scenarios-6-readme": [ROOT / "README.md"],
    }
    assert chosen.scenarios is hs.HELD_OUT_SCENARIOS_6 and chosen.expectations is hs.EXPECTATIONS_6
    assert {"held-out-scenarios-6-report", "held-out-scenarios-6-headline", "held-out-scenarios-6-readme"} <= set(
        bench.BLOCKS
    )
    assert chosen.json.exists()  # its first full run is committed: every block renders from it (test_docs_figures)
    assert "First run on: (" not in (ROOT / "docs/benchmarks/held-out-scenarios-6.md").read_text(encoding="utf-8")
