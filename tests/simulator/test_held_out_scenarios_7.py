"""The seventh held-out set (simulator/held_out_scenarios_7.py), kept in reserve until its first run: each scenario does what its
description says at both cadences and declares its criteria; ``bench_held_out_scenarios.py --set 7`` writes its own
report with them, and no headline. (Building under every default load model at the stated load, determinism and
unknown names: the shared tests of test_held_out_scenario_sets.py.) No test here runs the GlobalPlanner on this set
(doing nothing and Pulsar's strategies only): its first run is the measure of the planner change that follows."""

from __future__ import annotations

from pathlib import Path

import pytest

from pulsar_rebalance.simulator import held_out_scenarios_7 as hs
from pulsar_rebalance.simulator.dynamics import ClusterModel
from pulsar_rebalance.simulator.load_models import Load
from pulsar_rebalance.simulator.scenarios import _load, _topic_stats
from tests.simulator.scenario_profiles import DAG_STEPS, ROOT, at, check_tiny_set_run, factors, held_out_bench

bench = held_out_bench()


def test_the_sets_own_criteria() -> None:
    """(Every set's names, sizes and criteria keys: test_held_out_scenario_sets.py.)"""
    for name in ("geo-replication-catchup", "telemetry-flood"):  # hot for hours or for good: a good balancer moves
        assert hs.EXPECTATIONS_7[name].criteria == hs.ALWAYS, name
    for name in ("cdc-snapshot", "host-agent-cron"):  # comes and goes below the line: a good balancer barely moves
        assert hs.EXPECTATIONS_7[name].criteria == hs.COMES_AND_GOES, name
    assert not any("steady" in e.criteria for e in hs.EXPECTATIONS_7.values())


def _owners_of(m: ClusterModel, namespaces: tuple[str, ...]) -> set[str]:
    """The brokers owning a bundle of one of ``namespaces``."""
    return {o for b, o in m.owners.items() if b.split("/0x")[0] in namespaces}


def _sent(m: hs.CatchUpClusterModel, name: str) -> float:
    """What ``name``'s replicator sends now, per message published (its rates out beyond its subscriptions')."""
    t = m._by_name[name]
    return (t.rate_out - t.rate_in * t.fanout) / t.rate_in


@pytest.mark.parametrize(("cadence", "before", "after"), [("minute", 19, 20), ("dag", *DAG_STEPS)])
def test_geo_replication_catchup_sends_each_backlog_at_its_speed_then_replicates_as_before(
    cadence: str, before: int, after: int
) -> None:
    m = hs.build("geo-replication-catchup", 1, cadence=cadence).model
    assert isinstance(m, hs.CatchUpClusterModel)
    tenant = hs.GEO_NAMESPACES
    assert all(len(m.namespaces[ns]) == hs.DEFAULT_BUNDLES for ns in tenant)
    assert {m._by_name[n].namespace for n in m.speeds} == set(tenant)
    assert len(m.speeds) == sum(1 for t in m.topics if t.namespace in tenant)
    assert all(hs.GEO_SPEED[0] <= k <= hs.GEO_SPEED[1] for k in m.speeds.values())
    ends = [m.caught_up(n) - hs.GEO_RESTORE_MIN for n in m.speeds]
    assert 60 <= min(ends) < 75 and 400 < max(ends) <= 480  # 1 to 8 hours, by topic
    held = _owners_of(m, tenant)
    assert 4 <= len(held) <= 8
    at(m, before)
    assert all(_sent(m, n) == pytest.approx(0.0, abs=1e-9) for n in m.speeds)  # the link is down
    usage = m.true_usage()
    assert max(usage.values()) < m.ideal_usage() * 1.08  # balanced on what it carries now
    at(m, after)
    for n, k in m.speeds.items():  # every replicator sends its backlog on top of the new messages
        assert _sent(m, n) == pytest.approx(k, rel=1e-9), n
    assert {t.name for t in m.topics if t.rate_out > t.rate_in * t.fanout * (1 + 1e-9)} == set(m.speeds)
    now = m.true_usage()
    hottest = max(now, key=lambda b: now[b])
    assert hottest in held and now[hottest] > m.ideal_usage() + 0.1
    for b in m.brokers:
        if b not in held:
            assert now[b] == pytest.approx(usage[b], abs=0.03), b  # every other namespace unchanged
    owners = dict(m.owners)
    at(m, hs.GEO_RESTORE_MIN + hs.GEO_OUTAGE_MIN / (hs.GEO_SPEED[0] - 1))  # the slowest has caught up
    assert all(_sent(m, n) == pytest.approx(1.0, rel=1e-9) for n in m.speeds)  # as before the outage
    late = m.true_usage()
    assert max(late[b] for b in held) < now[hottest] - 0.05  # the surge is over; the replication stays
    assert max(late.values()) > m.ideal_usage()
    assert m.owners == owners


def test_geo_replication_catchup_fades_topic_by_topic() -> None:
    m = hs.build("geo-replication-catchup", 2).model
    assert isinstance(m, hs.CatchUpClusterModel)
    sending = []
    for minute in (20, 90, 150, 240, 360, 500):
        at(m, minute)
        sending.append(sum(1 for n in m.speeds if _sent(m, n) > 1.0 + 1e-6))
    assert sending[0] == len(m.speeds) and sending[-1] == 0
    assert sending == sorted(sending, reverse=True) and len(set(sending)) == len(sending)  # no cliff: a fade


def test_geo_replication_catchup_replicates_a_fifth_of_the_traffic_as_usual() -> None:
    m = hs.build("geo-replication-catchup", 1).model
    assert isinstance(m, hs.CatchUpClusterModel)
    m.restore = -hs.NEVER  # replicating as usual
    m._update_rates()
    assert hs._share(m, hs.GEO_NAMESPACES) == pytest.approx(hs.GEO_SHARE, rel=1e-3)


@pytest.mark.parametrize(("cadence", "before", "after"), [("minute", 19, 20), ("dag", *DAG_STEPS)])
def test_telemetry_flood_multiplies_a_fleets_tiny_messages_on_two_broker_generations(
    cadence: str, before: int, after: int
) -> None:
    m = hs.build("telemetry-flood", 1, cadence=cadence).model
    for i, b in enumerate(m.brokers):
        assert (m.brokers[b].cores, m.brokers[b].nic_mbps) == ((16.0, 2000.0) if i < 4 else (8.0, 1000.0)), b
    assert len(m.namespaces[hs.FLEET_NS]) == hs.DEFAULT_BUNDLES
    fleet = [t for t in m.topics if t.namespace == hs.FLEET_NS]
    assert {(t.msg_size, t.fanout) for t in fleet} == {(hs.FLEET_MSG_SIZE, 1.0)}
    assert hs._share(m, (hs.FLEET_NS,)) == pytest.approx(hs.FLEET_SHARE, rel=0.05)
    usage = m.true_usage()
    assert max(usage.values()) < m.ideal_usage() * 1.08  # balanced by capacity
    held = _owners_of(m, (hs.FLEET_NS,))
    at(m, before)
    assert set(factors(m).values()) == {1.0}
    stats = m.bundle_stats()
    mine = [b for b in stats if b.startswith(f"{hs.FLEET_NS}/")]
    rates = {b: stats[b]["msgRateIn"] for b in mine}
    at(m, after)
    assert factors(m)[hs.FLEET_NS] == hs.FLOOD_FACTOR
    assert {f for ns, f in factors(m).items() if ns != hs.FLEET_NS} == {1.0}
    stats = m.bundle_stats()
    for b in mine:  # 12x the messages, each as small as before
        assert stats[b]["msgRateIn"] == pytest.approx(rates[b] * hs.FLOOD_FACTOR, rel=0.05)
        assert stats[b]["msgThroughputIn"] / stats[b]["msgRateIn"] == pytest.approx(hs.FLEET_MSG_SIZE)
    now = m.true_usage()
    hottest = max(now, key=lambda b: now[b])
    assert hottest in held and now[hottest] > m.ideal_usage() + 0.08
    reports = m.load_reports()
    cpu = reports[hottest]["cpu"]
    assert cpu["usage"] / cpu["limit"] == pytest.approx(now[hottest], rel=0.06)  # its CPU binds (CPU noise aside)
    owners = dict(m.owners)
    at(m, 2880)
    assert factors(m)[hs.FLEET_NS] == hs.FLOOD_FACTOR and m.owners == owners  # it stays


def test_telemetry_flood_puts_message_rates_and_capacity_apart() -> None:
    """Balanced by capacity, a new-generation broker carries twice a small one's load: message rates per broker are
    not even, and the flood's message rates are many times a small broker's share."""
    m = hs.build("telemetry-flood", 1).model
    stats = m.bundle_stats()
    rate = dict.fromkeys(m.brokers, 0.0)
    for b, s in stats.items():
        rate[m.owners[b]] += s["msgRateIn"] + s["msgRateOut"]
    big = [rate[b] for b in list(m.brokers)[:4]]
    small = [rate[b] for b in list(m.brokers)[4:] if b not in _owners_of(m, (hs.FLEET_NS,))]
    assert min(big) > 1.5 * max(small)


@pytest.mark.parametrize("cadence", hs.CADENCES)
def test_cdc_snapshot_walks_over_the_tables_topics_once(cadence: str) -> None:
    m = hs.build("cdc-snapshot", 1, cadence=cadence).model
    windows = hs.snapshot_windows()
    assert [(a, b - a) for _, a, b in windows][0] == (hs.CDC_START_MIN, hs.CDC_TABLES[0][1])
    assert all(windows[i][2] == windows[i + 1][1] for i in range(len(windows) - 1))  # one table after another
    assert windows[-1][2] - hs.CDC_START_MIN == 7 * 60
    tables = [m._by_name[topic] for topic, _, _ in windows]
    assert {t.namespace for t in tables} == {hs.CDC_NS} and len(m.namespaces[hs.CDC_NS]) == hs.DEFAULT_BUNDLES
    base = {t.name: _load(m, _topic_stats(t)) for t in tables}
    assert max(m.true_usage().values()) < m.ideal_usage() * 1.08
    brokers = set()
    for topic, start, end in windows:
        for minute in (start, end - 1):
            at(m, minute)
            for t in tables:
                load = _load(m, _topic_stats(t))
                if t.name == topic:  # the table being read: its rows published and read by both sinks
                    assert t.burst > 1.0, (minute, t.name)  # (its daily cycle and drift aside)
                    assert base[t.name] + 0.8 * hs.CDC_EXTRA < load < base[t.name] + 1.35 * hs.CDC_EXTRA, minute
                else:
                    assert t.burst == 1.0 and load == pytest.approx(base[t.name], rel=0.3), (minute, t.name)
            usage = m.true_usage()
            hottest = max(usage, key=lambda b: usage[b])
            owner = m.owners[m.bundle_of_topic(topic)]
            assert hottest == owner and usage[hottest] > m.ideal_usage() + 0.2, (minute, topic)
            assert usage[hottest] < 0.85  # below the line under linear
            brokers.add(owner)
    assert len(brokers) >= 3  # the load walks over the brokers owning the namespace's bundles
    at(m, windows[-1][2])
    assert all(t.burst == 1.0 for t in tables)  # over
    assert max(m.true_usage().values()) < m.ideal_usage() * 1.1


@pytest.mark.parametrize("cadence", hs.CADENCES)
def test_host_agent_cron_adds_cpu_to_two_brokers_at_the_top_of_every_hour(cadence: str) -> None:
    m = hs.build("host-agent-cron", 1, load_model="in-out-fanout", cadence=cadence).model
    agent = m.load_model
    assert isinstance(agent, hs.HostAgentLoadModel)
    assert agent.first_run() == 60
    assert max(m.true_usage().values()) < m.ideal_usage() * 1.08
    assert not any(agent.running(b, minute) for b in m.brokers for minute in range(60))  # installed, not run yet
    for minute in (59, 60, 65, 66, 119, 120, 125, 126, 2880):
        at(m, minute)
        running = minute >= 60 and minute % 60 < hs.AGENT_RUN_MIN
        reports = m.load_reports()
        stats = m.bundle_stats()
        for b in m.brokers:
            on = agent.running(b)
            assert on is (running and b in hs.AGENT_BROKERS), (minute, b)
            cpu = reports[b]["cpu"]
            bundles = agent.base.usage(m.brokers[b], Load.of(s for x, s in stats.items() if m.owners[x] == b))
            extra = cpu["usage"] / cpu["limit"] - bundles["cpu"]["usage"] / bundles["cpu"]["limit"]
            assert extra == pytest.approx(hs.AGENT_CPU if on else 0.0, abs=0.04), (minute, b)  # CPU noise aside
        usage = m.true_usage()
        if running:
            assert max(usage, key=lambda b: usage[b]) in hs.AGENT_BROKERS
            assert max(usage.values()) > m.ideal_usage() + 0.2
            assert max(usage.values()) < 0.85  # below the line: nothing a move must fix
        else:
            assert max(usage.values()) < m.ideal_usage() * 1.1
    assert all(agent.running(hs.AGENT_BROKERS[0], 60 * k) for k in range(1, 48))  # every hourly decision but the first


def test_host_agent_cron_hides_under_a_nic_bound_broker() -> None:
    """Where the NIC binds by far, a third of the CPU is still below the NIC's usage: the agent does not show."""
    m = hs.build("host-agent-cron", 1, load_model="nic-bound").model
    at(m, 60)
    assert max(m.true_usage().values()) < m.ideal_usage() * 1.08


def test_a_tiny_set_7_run_writes_its_own_report_with_the_criteria(tmp_path: Path) -> None:
    check_tiny_set_run(
        bench, 7, "seventh", hs.EXPECTATIONS_7, ["telemetry-flood", "host-agent-cron"], tmp_path
    )  # never the planner


def test_set_7_writes_its_own_report_only() -> None:
    """Report-only until its first run: the full run writes held-out-scenarios-7.md (+ .json) and no headline, so that
    its first run touches neither README; its headline blocks render all the same, for when they are added."""
    chosen = bench.SETS[7]
    assert chosen.written is bench.SET_7_TARGETS
    assert dict(chosen.written) == {"held-out-scenarios-7-report": [ROOT / "docs/benchmarks/held-out-scenarios-7.md"]}
    assert chosen.scenarios is hs.HELD_OUT_SCENARIOS_7 and chosen.expectations is hs.EXPECTATIONS_7
    assert {"held-out-scenarios-7-report", "held-out-scenarios-7-headline", "held-out-scenarios-7-readme"} <= set(
        bench.BLOCKS
    )
    assert chosen.intro.startswith("# Benchmark: held-out scenarios, seventh set")
    assert "First run on: (" in chosen.intro
    assert not chosen.json.exists()  # kept in reserve: no run of it is committed yet
