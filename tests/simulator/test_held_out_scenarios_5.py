"""The fifth held-out set (simulator/held_out_scenarios_5.py), kept in reserve until its first run: each scenario does what its description
says at both cadences and declares its criteria; ``bench_held_out_scenarios.py --set 5`` writes its own report with
them. (Building under every default load model at the stated load, determinism and unknown names: the shared tests of
test_held_out_scenario_sets.py.) No test here runs the GlobalPlanner on this set (doing nothing and Pulsar's
strategies only): its first run is the measure of the planner change that follows."""

from __future__ import annotations

from pathlib import Path

import pytest

from pulsar_rebalance.simulator import held_out_scenarios_5 as hs
from pulsar_rebalance.simulator.dynamics import ClusterModel
from pulsar_rebalance.simulator.scenarios import _load, _topic_stats
from tests.simulator.scenario_profiles import DAG_STEPS, ROOT, at, check_tiny_set_run, factors, held_out_bench

bench = held_out_bench()


def test_the_sets_own_criteria() -> None:
    """(Every set's names, sizes and criteria keys: test_held_out_scenario_sets.py.)"""
    assert "steady" in hs.EXPECTATIONS_5["running-hot"].criteria
    assert "jitter" in hs.EXPECTATIONS_5["hourly-batch"].criteria
    for name in ("hardware-refresh", "ingest-firehose", "hot-key"):  # permanent: a good balancer moves
        assert hs.EXPECTATIONS_5[name].criteria == hs.ALWAYS, name


def _owners_of(m: ClusterModel, prefix: str) -> set[str]:
    """The brokers owning a bundle of namespace ``prefix``."""
    return {m.owners[b] for b in m.bundle_stats() if b.startswith(f"{prefix}/")}


@pytest.mark.parametrize(
    ("cadence", "steps"),
    [("minute", (54, 55, 64, 65, 114, 115, 119)), ("dag", (*DAG_STEPS, 75, 120, 2880))],
)
def test_hourly_batch_raises_one_namespace_2_5x_for_10_minutes_every_hour(cadence: str, steps: tuple[int, ...]) -> None:
    m = hs.build("hourly-batch", 1, cadence=cadence).model
    ideal = m.ideal_usage()
    owners = dict(m.owners)
    assert len(m.namespaces[hs.BATCH_NS]) == hs.DEFAULT_BUNDLES
    assert max(m.true_usage().values()) < ideal * 1.05  # balanced between the job's runs
    seen = set()
    for step in steps:
        at(m, step)
        running = hs.batch_running(step)
        seen.add(running)
        assert factors(m)[hs.BATCH_NS] == (hs.BATCH_FACTOR if running else 1.0), step
        assert {f for ns, f in factors(m).items() if ns != hs.BATCH_NS} == {1.0}
        usage = m.true_usage()
        hottest = max(usage, key=lambda b: usage[b])
        if running:
            assert hottest in _owners_of(m, hs.BATCH_NS) and usage[hottest] > m.ideal_usage() + 0.1, step
            assert max(usage.values()) < 0.85  # below the line: nothing a move must fix
        else:
            assert max(usage.values()) < ideal * 1.06, step
    assert seen == {True, False}
    if cadence == "dag":  # every hourly decision falls 5 minutes into a run of the job
        assert all(hs.batch_running(60 * k) for k in range(1, 48))
    assert m.owners == owners  # nothing moved: the traffic alone


@pytest.mark.parametrize(("cadence", "steps"), [("minute", (19, 20, 22, 30, 52)), ("dag", DAG_STEPS)])
def test_hardware_refresh_replaces_four_brokers_by_larger_ones_each_back_empty(
    cadence: str, steps: tuple[int, ...]
) -> None:
    m = hs.build("hardware-refresh", 1, cadence=cadence).model
    start = m.ideal_usage()
    assert {m.brokers[b].cores for b in m.brokers} == {8.0}
    for step in steps:
        at(m, step)
        for i, broker in enumerate(hs.REFRESHED):
            left = hs.REFRESH_START_MIN + i * hs.REFRESH_EVERY_MIN
            if step < left:
                assert m.brokers[broker].cores == 8.0, (step, broker)
            elif step < left + hs.REFRESH_DOWN_MIN:
                assert broker not in m.brokers, (step, broker)  # gone: its bundles placed by lookup
            else:
                assert m.brokers[broker].cores == 8.0 * hs.REFRESH_SIZE, (step, broker)
                assert m.brokers[broker].nic_mbps == 1000.0 * hs.REFRESH_SIZE
    at(m, 60)
    assert len(m.live_brokers()) == 10
    assert not [b for b, o in m.owners.items() if o == hs.REFRESHED[-1]]  # the last one back is empty
    total = 10 + len(hs.REFRESHED) * (hs.REFRESH_SIZE - 1)
    assert m.ideal_usage() == pytest.approx(start * 10 / total, rel=0.05)  # a fifth more capacity
    usage = m.true_usage()
    assert max(usage.values()) > m.ideal_usage() + 0.1  # where the load is does not follow
    at(m, 2880)
    assert max(m.true_usage().values()) > m.ideal_usage() + 0.1  # nothing else changes it


@pytest.mark.parametrize(("cadence", "before", "after"), [("minute", 19, 20), ("dag", *DAG_STEPS)])
def test_ingest_firehose_adds_bytes_in_only_for_good(cadence: str, before: int, after: int) -> None:
    m = hs.build("ingest-firehose", 1, cadence=cadence).model
    names = [f"persistent://{hs.FIRE_NS}/{name}" for name, _ in hs.FIREHOSE]

    def live() -> list[str]:
        return [t.name for t in m.topics if t.name in names]

    def nic(direction: str) -> dict[str, float]:
        return {b: r[direction]["usage"] for b, r in m.load_reports().items()}

    at(m, before)
    assert not live()
    out = nic("bandwidthOut")
    at(m, after)
    assert live() == names
    topics = [m._by_name[n] for n in names]
    assert all(t.rate_in > 0 and t.rate_out == 0 for t in topics)  # no live subscription
    for t in topics:  # a quarter of a standard broker each (the daily cycle and drift around it)
        assert _load(m, _topic_stats(t)) == pytest.approx(hs.FIRE_SHARE, rel=0.15)
    for b, v in nic("bandwidthOut").items():
        assert v == pytest.approx(out[b], rel=0.05), b  # no broker's bytes out changed
    usage = m.true_usage()
    hottest = max(usage, key=lambda b: usage[b])
    assert hottest in {m.owners[m.bundle_of_topic(n)] for n in names}
    assert usage[hottest] > m.ideal_usage() + 0.08
    reports = m.load_reports()[hottest]
    assert reports["bandwidthIn"]["usage"] / reports["bandwidthIn"]["limit"] == pytest.approx(usage[hottest])
    at(m, 2880)
    assert live() == names  # it stays


@pytest.mark.parametrize(("cadence", "steps"), [("minute", (19, 20, 21)), ("dag", DAG_STEPS)])
def test_hot_key_adds_a_quarter_of_a_broker_to_one_partition_for_good(cadence: str, steps: tuple[int, ...]) -> None:
    m = hs.build("hot-key", 1, cadence=cadence).model
    names = [hs.key_partition(i) for i in range(hs.KEY_PARTITIONS)]
    parts = [m._by_name[n] for n in names]
    hot = m._by_name[hs.key_partition(hs.KEY_HOT)]
    assert {t.burst for t in parts} == {1.0}
    assert len({t.base_rate for t in parts}) == 1  # by key: spread evenly over the partitions
    base = _load(m, _topic_stats(hot))
    assert max(m.true_usage().values()) < m.ideal_usage() * 1.05
    for step in steps:
        at(m, step)
        assert hot.burst > 1.0 if step >= hs.KEY_MIN else hot.burst == 1.0, step
    assert {t.burst for t in parts if t is not hot} == {1.0}
    assert _load(m, _topic_stats(hot)) == pytest.approx(base + hs.KEY_EXTRA, rel=0.1)
    usage = m.true_usage()
    hottest = max(usage, key=lambda b: usage[b])
    assert hottest == m.owners[m.bundle_of_topic(hot.name)]
    assert usage[hottest] > m.ideal_usage() + 0.15
    at(m, 2880)
    assert hot.burst > 1.0 and max(m.true_usage().values()) > m.ideal_usage() + 0.15  # it stays


@pytest.mark.parametrize("cadence", hs.CADENCES)
@pytest.mark.parametrize("seed", [1, 2])
def test_running_hot_stays_balanced_at_70_percent(cadence: str, seed: int) -> None:
    m = hs.build("running-hot", seed, cadence=cadence).model
    assert m.noise == hs.HOT_NOISE
    owners = dict(m.owners)
    for minute in (0, 30, 60):  # the minute cadence's run
        at(m, minute)
        assert max(m.true_usage().values()) < m.ideal_usage() * 1.03, minute
    for minute in (300, 600, 1500, 2880):  # two days: drift and the daily cycle move brokers a point or two
        at(m, minute)
        assert max(m.true_usage().values()) < min(m.ideal_usage() * 1.06, 0.8), minute
    assert m.owners == owners


def test_a_tiny_set_5_run_writes_its_own_report_with_the_criteria(tmp_path: Path) -> None:
    check_tiny_set_run(
        bench, 5, "fifth", hs.EXPECTATIONS_5, ["running-hot", "hourly-batch"], tmp_path
    )  # never the planner


def test_set_5_writes_its_report_and_both_headlines_since_its_first_run() -> None:
    chosen = bench.SETS[5]
    assert chosen.written is bench.SET_5_TARGETS
    assert dict(chosen.written) == {
        "held-out-scenarios-5-report": [ROOT / "docs/benchmarks/held-out-scenarios-5.md"],
        "held-out-scenarios-5-headline": [ROOT / "docs/benchmarks/README.md"],
        "held-out-scenarios-5-readme": [ROOT / "README.md"],
    }
    assert chosen.scenarios is hs.HELD_OUT_SCENARIOS_5 and chosen.expectations is hs.EXPECTATIONS_5
    assert {"held-out-scenarios-5-report", "held-out-scenarios-5-headline", "held-out-scenarios-5-readme"} <= set(
        bench.BLOCKS
    )
    assert chosen.json.exists()  # its first full run is committed: every block renders from it (test_docs_figures)
    assert "First run on: (" not in (ROOT / "docs/benchmarks/held-out-scenarios-5.md").read_text(encoding="utf-8")
