"""The fourth held-out set (simulator/held_out_scenarios_4.py), kept in reserve until its first run: each scenario
does what its description says at both cadences and declares its criteria; ``bench_held_out_scenarios.py --set 4``
writes its own report with them. (Building under every default load model at the stated load, determinism and
unknown names: the shared tests of test_held_out_scenario_sets.py.) No test here runs the GlobalPlanner on this set
(doing nothing and Pulsar's strategies only): its first run measured the planner change that followed it."""

from __future__ import annotations

from pathlib import Path

import pytest

from pulsar_rebalance.core.pulsar.bundles import NamespaceBundles, topic_hash
from pulsar_rebalance.simulator import held_out_scenarios_4 as hs
from pulsar_rebalance.simulator.dynamics import ClusterModel
from pulsar_rebalance.simulator.load_models import Load
from pulsar_rebalance.simulator.scenarios import _bundle_loads, _load, _topic_stats
from tests.simulator.scenario_profiles import DAG_STEPS, ROOT, at, check_tiny_set_run, factors, held_out_bench

bench = held_out_bench()


def test_the_sets_own_criteria() -> None:
    """(Every set's names, sizes and criteria keys: test_held_out_scenario_sets.py.)"""
    assert "steady" in hs.EXPECTATIONS_4["whale-topics"].criteria
    assert "jitter" in hs.EXPECTATIONS_4["bookie-recovery"].criteria
    assert hs.EXPECTATIONS_4["partition-increase"].criteria == hs.ALWAYS  # permanent: a good balancer moves
    assert hs.EXPECTATIONS_4["bigger-messages"].criteria == hs.ALWAYS


def _owners_of(m: ClusterModel, topics: list[str]) -> dict[str, str]:
    """The bundle of each topic -> its owner."""
    return {m.bundle_of_topic(t): m.owners[m.bundle_of_topic(t)] for t in topics}


@pytest.mark.parametrize(("cadence", "steps"), [("minute", (19, 20, 21)), ("dag", DAG_STEPS)])
def test_partition_increase_spreads_the_same_traffic_over_16_partitions_for_good(
    cadence: str, steps: tuple[int, ...]
) -> None:
    m = hs.build("partition-increase", 1, cadence=cadence).model
    names = [hs.partition_name(i) for i in range(hs.PART_AFTER)]
    old, new = names[: hs.PART_BEFORE], names[hs.PART_BEFORE :]
    assert len(new) == hs.PART_AFTER - hs.PART_BEFORE

    def live() -> list[str]:
        return [t.name for t in m.topics if t.namespace == hs.PART_NS and t.name.startswith(hs.PART_TOPIC)]

    def traffic() -> float:  # the partitioned topic's publish rate, daily cycle and drift left out
        return sum(t.base_rate * t.burst for t in m.topics if t.name in names)

    assert live() == old
    before = traffic()
    loads = _bundle_loads(m)
    share = sum(loads[b] for b in _owners_of(m, old)) / sum(loads.values())
    assert share == pytest.approx(hs.PART_SHARE / (1 + hs.PART_SHARE), rel=0.1)  # a quarter (with its bundles' rest)
    assert len(set(_owners_of(m, old).values())) == hs.PART_BEFORE  # the 4 hot bundles on 4 brokers: balanced
    assert max(m.true_usage().values()) < m.ideal_usage() * 1.05
    for step in steps:
        at(m, step)
        assert len(live()) == (hs.PART_AFTER if step >= hs.PART_MIN else hs.PART_BEFORE), step
    assert traffic() == pytest.approx(before)  # the same traffic, over 16
    assert {t.burst for t in m.topics if t.name in names} == {1.0}
    rates = [t.rate_in / t.drift for t in m.topics if t.name in names]
    assert max(rates) == pytest.approx(min(rates))  # round-robin: one rate a partition
    bundles = _owners_of(m, names)
    assert len(bundles) == hs.PART_AFTER  # 16 partitions in 16 bundles of the 64
    assert not set(_owners_of(m, new)) & set(_owners_of(m, old))  # the new ones in other bundles
    ideal = m.ideal_usage()
    usage = m.true_usage()
    left = set(_owners_of(m, old).values())
    lightest = min(usage, key=lambda b: usage[b])
    assert lightest in left and usage[lightest] < ideal - 0.1  # the old partitions' brokers are left light
    hottest = max(usage, key=lambda b: usage[b])
    assert usage[hottest] > ideal + 0.1 and hottest not in left
    at(m, 2880)
    assert len(live()) == hs.PART_AFTER and max(m.true_usage().values()) > m.ideal_usage() + 0.1  # it stays


def test_with_16_even_bundles_the_16_partitions_would_share_the_first_4_bundles() -> None:
    """What PART_BUNDLES' docstring says of crc32: why the namespace has 64 bundles."""
    hashes = [topic_hash(hs.partition_name(i)) for i in range(hs.PART_AFTER)]
    sixteen = NamespaceBundles.with_num_bundles(16)
    assert len({sixteen.find(h).name for h in hashes}) == len({sixteen.find(h).name for h in hashes[:4]}) == 4
    wide = NamespaceBundles.with_num_bundles(hs.PART_BUNDLES)
    assert len({wide.find(h).name for h in hashes}) == hs.PART_AFTER


@pytest.mark.parametrize("cadence", hs.CADENCES)
def test_bigger_messages_triples_one_namespaces_bytes_not_its_messages_from_minute_20(cadence: str) -> None:
    m = hs.build("bigger-messages", 1, cadence=cadence).model
    assert isinstance(m, hs.ResizedClusterModel)
    ideal = m.ideal_usage()

    def sizes() -> dict[str, float]:  # bytes per message, per namespace's bundles together
        per: dict[str, list[float]] = {}
        for b, s in m.bundle_stats().items():
            ns = b.rsplit("/", 1)[0]
            per.setdefault(ns, [0.0, 0.0])
            per[ns][0] += s["msgThroughputIn"] + s["msgThroughputOut"]
            per[ns][1] += s["msgRateIn"] + s["msgRateOut"]
        return {ns: v[0] / v[1] for ns, v in per.items()}

    def clients() -> int:
        return sum(s["producerCount"] + s["consumerCount"] for s in m.bundle_stats().values())

    at(m, hs.SIZE_MIN - 1)
    first, count = sizes(), clients()
    assert {t.msg_size for t in m.topics if t.namespace == hs.SIZE_NS} == set(m.base_size.values())
    at(m, hs.SIZE_MIN if cadence == "minute" else 60)
    now = sizes()
    for ns in first:
        assert now[ns] == pytest.approx(first[ns] * (hs.SIZE_FACTOR if ns == hs.SIZE_NS else 1.0), rel=0.1), ns
    for t in m.topics:
        if t.namespace == hs.SIZE_NS:
            assert t.msg_size == pytest.approx(m.base_size[t.name] * hs.SIZE_FACTOR)
    assert set(factors(m, "rate_in").values()) == set(factors(m, "rate_out").values()) == {1.0}  # messages flat
    assert clients() == count
    usage = m.true_usage()
    hottest = max(usage, key=lambda b: usage[b])
    assert m.ideal_usage() > ideal * 1.1
    assert usage[hottest] > m.ideal_usage() + 0.1
    assert hottest in {m.owners[b] for b in m.bundle_stats() if b.startswith(f"{hs.SIZE_NS}/")}
    at(m, 2880)
    assert {round(t.msg_size / m.base_size[t.name], 9) for t in m.topics if t.namespace == hs.SIZE_NS} == {
        hs.SIZE_FACTOR
    }


@pytest.mark.parametrize(("cadence", "steps"), [("minute", (29, 30, 31, 69, 70, 71)), ("dag", (*DAG_STEPS, 75, 120))])
def test_bookie_recovery_takes_part_of_one_brokers_capacity_for_40_minutes_once(
    cadence: str, steps: tuple[int, ...]
) -> None:
    m = hs.build("bookie-recovery", 1, cadence=cadence).model
    assert isinstance(m.load_model, hs.RecoveringLoadModel)
    owners = dict(m.owners)
    start = max(m.true_usage().values())
    limits = {k: r["limit"] for k, r in m.load_reports()[hs.RECOVERING].items() if isinstance(r, dict) and "limit" in r}
    for step in steps:
        at(m, step)
        usage = m.true_usage()
        plain = m.load_model.base.usage(m.brokers[hs.RECOVERING], _of_broker(m, hs.RECOVERING))
        alone = max(r["usage"] / r["limit"] for r in plain.values())  # what the broker would report undisturbed
        reports = m.load_reports()[hs.RECOVERING]
        assert {k: reports[k]["limit"] for k in limits} == limits  # it reports the same limits all along
        if hs.RECOVERY_START_MIN <= step < hs.RECOVERY_END_MIN:
            assert usage[hs.RECOVERING] == pytest.approx(alone / hs.RECOVERY_CAPACITY, rel=0.02)
            assert usage[hs.RECOVERING] > start + 0.1
            assert max(usage, key=lambda b: usage[b]) == hs.RECOVERING
            assert max(usage.values()) < 0.85  # below the line: nothing a move must fix
        else:
            assert usage[hs.RECOVERING] == pytest.approx(alone)
            assert max(usage.values()) < start + 0.03
    assert m.owners == owners  # nothing moved, no rate changed: only the host's capacity
    at(m, 2880)
    assert not m.load_model.degraded(m.brokers[hs.RECOVERING])  # once


def _of_broker(m: ClusterModel, broker: str) -> Load:
    return Load.of(s for b, s in m.bundle_stats().items() if m.owners[b] == broker)


@pytest.mark.parametrize("cadence", hs.CADENCES)
@pytest.mark.parametrize("seed", [1, 2])
def test_whale_topics_are_a_third_of_a_broker_each_and_the_placement_is_already_even(cadence: str, seed: int) -> None:
    m = hs.build("whale-topics", seed, cadence=cadence).model
    whales = [
        t for t in m.topics if t.namespace == hs.WHALE_NS and t.name.rsplit("/", 1)[1] in {w[0] for w in hs.WHALES}
    ]
    assert len(whales) == len(hs.WHALES)
    loads = _bundle_loads(m)
    total = sum(loads.values())
    for t in whales:
        assert _load(m, _topic_stats(t)) / total == pytest.approx(hs.WHALE_SHARE, rel=0.1)  # daily phase, drift
        assert _load(m, _topic_stats(t)) > 0.25  # about a third of a standard broker
    assert len({m.owners[m.bundle_of_topic(t.name)] for t in whales}) == len(whales)  # 3 brokers
    assert m.floor_usage() == pytest.approx(m.ideal_usage())  # no whale above the ideal: nothing unsplittable
    for minute in (0, 30, 60):  # the minute cadence's run
        at(m, minute)
        assert max(m.true_usage().values()) < m.ideal_usage() * 1.04, minute
    for minute in (300, 600, 1500, 2880):  # two days: the whales' daily cycle lifts their brokers a few points
        at(m, minute)
        assert max(m.true_usage().values()) < m.ideal_usage() * 1.15, minute


def test_a_tiny_set_4_run_writes_its_own_report_with_the_criteria(tmp_path: Path) -> None:
    check_tiny_set_run(
        bench, 4, "fourth", hs.EXPECTATIONS_4, ["whale-topics", "bookie-recovery"], tmp_path
    )  # never the planner


def test_set_4_writes_its_report_and_both_headlines_since_its_first_run() -> None:
    chosen = bench.SETS[4]
    assert chosen.written is bench.SET_4_TARGETS
    assert dict(chosen.written) == {
        "held-out-scenarios-4-report": [ROOT / "docs/benchmarks/held-out-scenarios-4.md"],
        "held-out-scenarios-4-headline": [ROOT / "docs/benchmarks/README.md"],
        "held-out-scenarios-4-readme": [ROOT / "README.md"],
    }
    assert chosen.scenarios is hs.HELD_OUT_SCENARIOS_4 and chosen.expectations is hs.EXPECTATIONS_4
    assert {"held-out-scenarios-4-report", "held-out-scenarios-4-headline", "held-out-scenarios-4-readme"} <= set(
        bench.BLOCKS
    )
    assert chosen.json.exists()  # its first full run is committed: every block renders from it (test_docs_figures)
    assert "First run on: (" not in (ROOT / "docs/benchmarks/held-out-scenarios-4.md").read_text(encoding="utf-8")
