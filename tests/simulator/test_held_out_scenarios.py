"""The held-out scenarios (simulator/held_out_scenarios.py): each builds under every default load model at its stated
load, is the same for the same seed, does what its description says at both cadences, and is none of the tuned-on
scenarios; the benchmark that runs them (benchmarks/bench_held_out_scenarios.py) writes a report with the criteria."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest

from pulsar_rebalance.simulator import held_out_scenarios as hs
from pulsar_rebalance.simulator.dynamics import ClusterModel

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import figures  # noqa: E402

from tests.simulator.scenario_profiles import at, factors  # noqa: E402

bench = figures.load_script("benchmarks/bench_held_out_scenarios.py")


def _common(model: ClusterModel) -> float:
    """The one factor the profile puts on every namespace now (it moves every topic together)."""
    values = {round(v, 9) for v in factors(model).values()}
    assert len(values) == 1, values
    return values.pop()


def test_the_sets_own_criteria() -> None:
    """(Every set's names, sizes and criteria keys: test_held_out_scenario_sets.py.)"""
    assert "steady" in hs.EXPECTATIONS["diurnal-swing"].criteria
    assert "jitter" in hs.EXPECTATIONS["flash-crowd"].criteria


@pytest.mark.parametrize("step", [1, 15])
def test_broker_crash_leaves_its_bundles_on_the_survivors(step: int) -> None:
    m = hs.build("broker-crash", 1, cadence="minute" if step == 1 else "dag").model
    owned = sorted(b for b, o in m.owners.items() if o == hs.CRASHED)
    assert len(owned) >= 10 and m.brokers[hs.CRASHED].alive
    while m.cycle + step <= hs.CRASH_MINUTE - 1:
        m.advance(step)
        assert m.brokers[hs.CRASHED].alive
    m.advance(step)  # through minute 10: the crash
    assert not m.brokers[hs.CRASHED].alive and hs.CRASHED in m.brokers  # failed, not removed
    live = set(m.live_brokers())
    assert len(live) == 9
    assert hs.CRASHED not in set(m.owners.values())
    assert {m.owners[b] for b in owned} <= live and len({m.owners[b] for b in owned}) > 1
    m.advance(600)
    assert not m.brokers[hs.CRASHED].alive  # it stays down
    assert m.ideal_usage() > hs.CRASH_LOAD * 10 / 9 * 0.95  # 9 brokers carry what 10 did


@pytest.mark.parametrize(("cadence", "period"), [("minute", 60), ("dag", 1440)])
def test_diurnal_swing_moves_every_topic_together_by_35_percent(cadence: str, period: int) -> None:
    run = hs.build("diurnal-swing", 1, cadence=cadence)
    m = run.model
    assert _common(m) == 1.0
    ideals = {}
    for minute in (period // 4, period // 2, 3 * period // 4):
        at(m, minute)
        expected = 1 + hs.SWING * math.sin(2 * math.pi * minute / period)
        assert _common(m) == pytest.approx(expected, abs=1e-8), minute
        ideals[minute] = m.ideal_usage()
    assert _common(m) == pytest.approx(1 - hs.SWING)
    assert ideals[period // 4] > 1.3 * ideals[period // 2] > 1.3 * ideals[3 * period // 4]
    # the run sees the swing whole: the minute cadence's 90 decisions span 1.5 periods, the dag's 48 two days
    minutes = run.cycles if cadence == "minute" else run.dag_decisions * 60
    assert minutes >= period * 1.5


@pytest.mark.parametrize("cadence", hs.CADENCES)
def test_flash_crowd_triples_one_namespace_for_an_hour_a_day(cadence: str) -> None:
    run = hs.build("flash-crowd", 1, cadence=cadence)
    m = run.model
    hot = None
    for minute, crowd in [(29, False), (30, True), (60, True), (89, True), (90, False), (600, False), (1470, True)]:
        at(m, minute)
        f = factors(m)
        if crowd:
            (hot_now,) = [ns for ns, v in f.items() if v != 1.0]
            assert f[hot_now] == hs.CROWD_FACTOR
            assert hot in (None, hot_now)
            hot = hot_now
        else:
            assert set(f.values()) == {1.0}, minute
    assert run.cycles > hs.CROWD_END_MIN  # the minute cadence sees it come and go


@pytest.mark.parametrize("seed", [1, 2])
def test_flash_crowd_leaves_every_broker_below_85_percent_when_nothing_moves(seed: int) -> None:
    m = hs.build("flash-crowd", seed).model
    peak = 0.0
    for minute in range(hs.CROWD_START_MIN, hs.CROWD_END_MIN, 5):
        at(m, minute)
        peak = max(peak, *m.true_usage().values())
    assert hs.CROWD_LOAD + 0.1 < peak < 0.85


@pytest.mark.parametrize(("cadence", "span"), [("minute", 120), ("dag", 2880)])
def test_steady_growth_grows_by_half_with_one_broker_hotter(cadence: str, span: int) -> None:
    run = hs.build("steady-growth", 1, cadence=cadence)
    m = run.model
    usage = m.true_usage()
    first, *others = list(m.brokers)
    assert usage[first] / (sum(usage[b] for b in others) / len(others)) == pytest.approx(hs.GROWTH_HOT, rel=0.05)
    for minute, expected in [(span // 2, 1.25), (span, 1.5), (span + 60, 1.5)]:
        at(m, minute)
        assert _common(m) == pytest.approx(expected, abs=1e-8), minute
    assert (run.cycles if cadence == "minute" else run.dag_decisions * 60) == span


def test_small_brokers_are_many_small_and_dealt_out_by_count() -> None:
    m = hs.build("small-brokers-few-bundles", 1).model
    assert len(m.brokers) == hs.SMALL_BROKERS
    assert {(b.cores, b.nic_mbps) for b in m.brokers.values()} == {(hs.SMALL_CORES, hs.SMALL_NIC_MBPS)}
    assert len(m.namespaces) == hs.SMALL_NAMESPACES
    assert {len(nb.ranges) for nb in m.namespaces.values()} == {hs.SMALL_BUNDLES}
    per = [sum(1 for o in m.owners.values() if o == b) for b in m.brokers]
    assert set(per) <= {6, 7}  # 192 bundles on 30 brokers
    usage = m.true_usage()
    assert max(usage.values()) > 1.2 * m.ideal_usage()  # by count, not by load: coarse and uneven


def _row(seed: int, final: float, moves: int, worst: float = 0.6) -> dict[str, Any]:
    return {
        "seed": seed,
        "final_max": final,
        "worst_max": worst,
        "ideal": 0.5,
        "moves": moves,
        "moves_per_day": moves * 1.0,
        "plans": min(moves, 1),
        "noise": 0.03,
        "rate_noise": 0.03,
    }


def test_criteria_judge_only_what_a_scenario_declares() -> None:
    by = {"GlobalPlanner": [_row(1, 0.60, 3)], "no-action": [_row(1, 0.60, 0)], "AvgShedder": [_row(1, 0.62, 1)]}
    crit = {c["key"]: c for c in bench.criteria(("not_worse", "no_hot", "steady", "moves"), by)}
    assert crit["steady"]["ok"] is False and "3 moves" in crit["steady"]["detail"]
    assert crit["jitter"]["ok"] is None and crit["jitter"]["detail"] == "not declared"
    assert crit["not_worse"]["ok"] is True
    assert crit["moves"]["ok"] is False  # 3 moves vs AvgShedder's 1, ending lower
    crit = {c["key"]: c for c in bench.criteria(("not_worse", "no_hot", "jitter", "moves"), by)}
    assert crit["jitter"]["ok"] is False and crit["steady"]["ok"] is None


def test_a_tiny_benchmark_run_writes_a_report_with_the_criteria(tmp_path: Path) -> None:
    code = bench.main(
        [
            "--scenarios",
            "broker-crash",
            "--models",
            "linear",
            "--cadences",
            "dag",
            "--strategies",
            "GlobalPlanner",
            "no-action",
            "--seeds",
            "1",
            "--out-dir",
            str(tmp_path),
        ]
    )
    assert code == 0
    doc = json.loads((tmp_path / "held-out-scenarios.json").read_text(encoding="utf-8"))
    assert set(doc["results"]["linear"]["dag"]["broker-crash"]) == {"GlobalPlanner", "no-action"}
    assert doc["scenarios"][0]["name"] == "broker-crash" and doc["rate_noise"] == 0.03
    report = (tmp_path / "held-out-scenarios.md").read_text(encoding="utf-8")
    assert "| not_worse | no_hot | steady | jitter | moves |" in report
    assert "## broker-crash" in report and "**Worst case**" in report
    assert report.index("**Worst case**") < report.index("**Best case**")
    assert "| **GlobalPlanner** |" in report  # the do-no-harm table
    # the first seed's series, plotted beside the report and linked from it
    cell = doc["series"]["linear"]["dag"]["broker-crash"]
    assert set(cell["max_usage"]) == {"GlobalPlanner", "no-action"}
    assert len(cell["max_usage"]["no-action"]) == len(cell["ideal"]) > 1
    png = tmp_path / "held-out-scenarios" / "linear-dag.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "](held-out-scenarios/linear-dag.png)" in report


def test_the_index_gets_its_section_once_before_the_planner_history(tmp_path: Path) -> None:
    index = tmp_path / "README.md"
    index.write_text("# Benchmarks\n\n## Earlier\n\ntext\n\n## How the planner got here\n\nmore\n", encoding="utf-8")
    bench.ensure_index_section(index, "docs/benchmarks/held-out-scenarios.json")
    bench.ensure_index_section(index, "docs/benchmarks/held-out-scenarios.json")
    text = index.read_text(encoding="utf-8")
    assert text.count("<!-- held-out-scenarios-headline:start") == 1
    assert text.index("## Held-out scenarios") < text.index("## How the planner got here")
    assert [b.name for b in figures.find_blocks(text)] == ["held-out-scenarios-headline"]
