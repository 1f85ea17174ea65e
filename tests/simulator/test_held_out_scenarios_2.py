"""The second held-out set (simulator/held_out_scenarios_2.py): each scenario builds under every
default load model at its stated load, is the same for the same seed, does what its description says, and is none of
the tuned-on scenarios nor the first set's; ``bench_held_out_scenarios.py --set 2`` writes its own report with the
criteria. No test here runs the GlobalPlanner on this set (doing nothing and Pulsar's strategies only): it was kept in
reserve until its first full run, on the planner as it was."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from pulsar_rebalance.simulator import held_out_scenarios_2 as hs
from pulsar_rebalance.simulator.load_models import Load, get_load_model
from pulsar_rebalance.simulator.scenarios import _bundle_loads

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import figures  # noqa: E402

from tests.simulator.scenario_profiles import at, factors  # noqa: E402

bench = figures.load_script("benchmarks/bench_held_out_scenarios.py")

PLANNER = "GlobalPlanner"


def test_the_sets_own_criteria() -> None:
    """(Every set's names, sizes and criteria keys: test_held_out_scenario_sets.py.)"""
    assert "jitter" in hs.EXPECTATIONS_2["backlog-drain"].criteria


def test_topic_churn_creates_and_deletes_topics_through_the_run() -> None:
    m = hs.build("topic-churn", 1, cadence="dag").model
    assert isinstance(m, hs.ChurningClusterModel)
    assert len(m.all_topics) == hs.CHURN_STABLE + hs.CHURN_TOPICS
    stable = {t.name for t in m.all_topics if t.name not in m.lifetimes}
    assert len(stable) == hs.CHURN_STABLE
    seen: list[set[str]] = []
    for minute in (0, 60, 300, 1440, 2880):
        at(m, minute)
        live = {t.name for t in m.topics}
        short = live - stable
        assert stable <= live
        assert short == {n for n, (a, b) in m.lifetimes.items() if a <= minute < b}
        assert 300 < len(short) < 600, (minute, len(short))  # about 450 at every minute: the churn's steady state
        # the short-lived topics' share of the traffic, about 40 %
        by = {t.name: t.rate_in * t.msg_size for t in m.topics}
        assert 0.3 < sum(by[n] for n in short) / sum(by.values()) < 0.5, minute
        # every live topic is in the bundle its hash says, and only live ones are counted in the bundles' stats
        assert sum(s["topics"] for s in m.bundle_stats().values()) == len(live)
        seen.append(short)
    assert seen[0] & seen[1] and seen[0] - seen[1] and seen[1] - seen[0]  # an hour on: some left, some new
    assert not seen[0] & seen[3]  # a day on, none of the short-lived topics of minute 0 is left (6 h at most)
    assert not seen[3] & seen[4]
    born = sorted((a, n) for n, (a, _) in m.lifetimes.items() if 100 < a < 200)[0]
    m2 = hs.build("topic-churn", 1, cadence="dag").model
    at(m2, int(born[0]))
    assert born[1] not in {t.name for t in m2.topics}
    m2.advance(1)
    assert born[1] in {t.name for t in m2.topics}
    bundle = m2.bundle_of_topic(born[1])
    assert born[1] in {t.name for t in m2.topics_of(bundle)}
    assert m2.topic_rates(bundle, reported=False)[born[1]]["msgRateIn"] > 0


@pytest.mark.parametrize(("cadence", "shift"), [("minute", 40), ("dag", 480)])
def test_follow_the_sun_moves_the_hot_region_at_the_stated_times(cadence: str, shift: int) -> None:
    run = hs.build("follow-the-sun", 1, cadence=cadence)
    m = run.model
    ideals = []
    for minute, region in [(0, "apac"), (shift - 1, "apac"), (shift, "eu"), (2 * shift, "us"), (3 * shift, "apac")]:
        at(m, minute)
        f = factors(m)
        assert {ns for ns, v in f.items() if v == hs.SUN_HIGH} == {f"{region}/ns-{i}" for i in range(3)}, minute
        assert {v for ns, v in f.items() if not ns.startswith(region)} == {hs.SUN_LOW}
        ideals.append(m.ideal_usage())
    assert max(ideals) / min(ideals) < 1.15  # the total about constant
    minutes = run.cycles if cadence == "minute" else run.dag_decisions * 60
    assert minutes >= 3 * shift  # the run sees every region's turn


def test_follow_the_sun_is_balanced_in_the_first_region_hours_only() -> None:
    m = hs.build("follow-the-sun", 1).model
    assert max(m.true_usage().values()) < hs.SUN_LOAD * 1.05
    at(m, hs.SUN_SHIFT_MIN["minute"])
    assert max(m.true_usage().values()) > hs.SUN_LOAD * 1.2


@pytest.mark.parametrize("model", ["linear", "nic-bound", "heterogeneous-capacity"])
def test_noisy_neighbour_loses_capacity_and_reports_the_same_limits(model: str) -> None:
    m = hs.build("noisy-neighbour", 1, load_model=model).model
    assert isinstance(m.load_model, hs.DegradedLoadModel)
    base = get_load_model(model)
    b = m.brokers[hs.DEGRADED]
    resources = ("cpu", "bandwidthIn", "bandwidthOut")
    limits = {k: m.load_reports()[hs.DEGRADED][k]["limit"] for k in resources}

    def plain() -> float:  # its usage under the base model, from its bundles
        owned = [s for x, s in m.bundle_stats().items() if m.owners[x] == hs.DEGRADED]
        return max(r["usage"] / r["limit"] for r in base.usage(b, Load.of(owned)).values())

    at(m, hs.DEGRADE_MIN - 1)
    before = m.true_usage()
    assert before[hs.DEGRADED] == pytest.approx(plain())
    assert before[hs.DEGRADED] < hs.DEGRADE_LOAD * 1.05
    ideal = m.ideal_usage()
    at(m, hs.DEGRADE_MIN)
    assert m.true_usage()[hs.DEGRADED] == pytest.approx(plain() / hs.DEGRADE_CAPACITY, rel=1e-9)
    others = [u for x, u in m.true_usage().items() if x != hs.DEGRADED]
    assert m.true_usage()[hs.DEGRADED] > 1.5 * max(others) * hs.DEGRADE_CAPACITY
    reported = m.load_reports()[hs.DEGRADED]
    assert {k: reported[k]["limit"] for k in resources} == limits  # the same limits
    assert reported["bandwidthOut"]["usage"] > limits["bandwidthOut"] * 0.6  # its usage as the smaller broker's
    assert m.ideal_usage() > ideal * 1.02  # the cluster lost 0.45 of a broker
    at(m, 600)
    assert m.true_usage()[hs.DEGRADED] == pytest.approx(plain() / hs.DEGRADE_CAPACITY, rel=1e-9)  # it stays


@pytest.mark.parametrize(("cadence", "span"), [("minute", 120), ("dag", 2880)])
def test_tenant_takeover_doubles_one_tenant_at_a_constant_total(cadence: str, span: int) -> None:
    run = hs.build("tenant-takeover", 1, cadence=cadence)
    m = run.model

    def share() -> float:
        loads = _bundle_loads(m)
        return sum(v for x, v in loads.items() if x.startswith("tenant-0/")) / sum(loads.values())

    start, ideal = share(), m.ideal_usage()
    assert 0.15 < start < 0.35
    for minute, growth in [(span // 2, 1.5), (span, 2.0), (span + 60, 2.0)]:
        at(m, minute)
        f = factors(m)
        assert f["tenant-0/ns-0"] == f["tenant-0/ns-4"] == pytest.approx(growth)
        assert {round(v, 9) for ns, v in f.items() if not ns.startswith("tenant-0/")} == {
            round((1 - start * growth) / (1 - start), 9)
        }
    assert share() == pytest.approx(2 * start, rel=0.1)
    assert m.ideal_usage() == pytest.approx(ideal, rel=0.1)  # the total about constant (drift and the daily cycle)
    assert (run.cycles if cadence == "minute" else run.dag_decisions * 60) == span


@pytest.mark.parametrize("cadence", hs.CADENCES)
def test_backlog_drain_triples_one_namespace_dispatch_for_45_minutes(cadence: str) -> None:
    run = hs.build("backlog-drain", 1, cadence=cadence)
    m = run.model
    hot = None
    for minute, draining in [(19, False), (20, True), (40, True), (64, True), (65, False), (600, False), (1460, False)]:
        at(m, minute)
        assert set(factors(m, "rate_in").values()) == {1.0}  # publishing never changes
        f = factors(m, "rate_out")
        if draining:
            (now,) = [ns for ns, v in f.items() if v != 1.0]
            assert f[now] == hs.DRAIN_FACTOR and hot in (None, now)
            hot = now
        else:
            assert set(f.values()) == {1.0}, minute
    assert run.cycles > hs.DRAIN_START_MIN + hs.DRAIN_MIN  # the minute cadence sees it come and go


@pytest.mark.parametrize("seed", [1, 2])
def test_backlog_drain_leaves_every_broker_below_85_percent_when_nothing_moves(seed: int) -> None:
    m = hs.build("backlog-drain", seed).model
    peak = 0.0
    for minute in range(hs.DRAIN_START_MIN, hs.DRAIN_START_MIN + hs.DRAIN_MIN, 5):
        at(m, minute)
        peak = max(peak, *m.true_usage().values())
    assert hs.DRAIN_LOAD + 0.1 < peak < 0.85


def test_a_tiny_set_2_run_writes_its_own_report_with_the_criteria(tmp_path: Path) -> None:
    strategies = ["no-action", "ThresholdShedder"]
    assert PLANNER not in strategies  # never the planner on the second set
    code = bench.main(
        [
            "--set",
            "2",
            "--scenarios",
            "backlog-drain",
            "noisy-neighbour",
            "--models",
            "linear",
            "--cadences",
            "dag",
            "--strategies",
            *strategies,
            "--seeds",
            "1",
            "--out-dir",
            str(tmp_path),
        ]
    )
    assert code == 0
    assert not (tmp_path / "held-out-scenarios.json").exists()
    doc = json.loads((tmp_path / "held-out-scenarios-2.json").read_text(encoding="utf-8"))
    assert doc["strategies"] == ["ThresholdShedder", "no-action"]
    assert set(doc["results"]["linear"]["dag"]) == {"backlog-drain", "noisy-neighbour"}
    assert [s["name"] for s in doc["scenarios"]] == ["noisy-neighbour", "backlog-drain"]
    assert doc["scenarios"][1]["criteria"] == ["not_worse", "no_hot", "jitter", "moves"]
    report = (tmp_path / "held-out-scenarios-2.md").read_text(encoding="utf-8")
    assert report.startswith("# Benchmark: held-out scenarios, second set")
    assert "First run on: " in report and "held_out_scenarios_2.py" in report
    assert "<!-- held-out-scenarios-2-report:start" in report
    assert "| not_worse | no_hot | steady | jitter | moves |" in report
    assert "## backlog-drain" in report and "## noisy-neighbour" in report
    headline = bench.render_headline(doc, 2)
    assert "second held-out set" in headline and "[held-out-scenarios-2.md](held-out-scenarios-2.md)" in headline
    assert "](docs/benchmarks/held-out-scenarios-2.md)" in bench.render_readme(doc, 2)


def test_set_2_writes_its_report_and_its_headlines() -> None:
    assert bench.SETS[2].written is bench.SET_2_TARGETS
    assert dict(bench.SETS[2].written) == {
        "held-out-scenarios-2-report": [ROOT / "docs/benchmarks/held-out-scenarios-2.md"],
        "held-out-scenarios-2-headline": [ROOT / "docs/benchmarks/README.md"],
        "held-out-scenarios-2-readme": [ROOT / "README.md"],
    }
    assert set(bench.SETS[1].written) == set(bench.TARGETS)  # the first set's, unchanged


@pytest.mark.parametrize("number", [1, 2])
def test_each_set_renders_what_the_docs_hold(number: int) -> None:
    """Each set's blocks, rendered from its JSON, are what the docs hold (``--render`` leaves them unchanged)."""
    chosen = bench.SETS[number]
    doc = json.loads(chosen.json.read_text(encoding="utf-8"))
    json_rel = chosen.json.relative_to(ROOT).as_posix()
    for name, paths in chosen.written.items():
        block = figures.render(name, bench.SCRIPT, json_rel, doc)
        for path in paths:
            assert block in path.read_text(encoding="utf-8"), (name, path)
