"""benchmarks/bench_robustness.py: conditions parsed and refused by name, which runs a condition takes,
what counts as a failure, and one real run of the closed loop under a changed broker count."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import figures  # noqa: E402

bench = figures.load_script("benchmarks/bench_robustness.py")


@pytest.mark.parametrize(
    ("text", "parsed"),
    [("utilization=1.3", ("utilization", 1.3)), ("brokers=20", ("brokers", 20.0)), ("delay=55", ("delay", 55.0))],
)
def test_a_condition_is_parsed(text: str, parsed: tuple[str, float]) -> None:
    assert bench.parse_condition(text) == parsed


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("speed=2", "expected utilization=F"),
        ("brokers", "expected utilization=F"),
        ("noise=lots", "is not a number"),
        ("noise=0.2", "noise must be within 0.0-0.1"),
        ("utilization=0", "utilization must be within"),
        ("brokers=3.5", "brokers must be a whole number"),
        ("brokers=1", "brokers must be within 2-100"),
    ],
)
def test_a_bad_condition_is_refused_by_name(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        bench.parse_condition(text)
    with pytest.raises(SystemExit):  # argparse: exits 2 with the message, before any run
        bench.main(["--no-write", "--conditions", text])


def test_a_condition_runs_only_where_it_means_something() -> None:
    by_broker = bench.tasks_for("brokers=3", ["linear"], [1], ["minute", "dag"])
    scenarios = {t[1] for t in by_broker}
    assert scenarios and not scenarios & {"scale-up", "scale-down", "rolling-restart", "large-zipf"}
    assert {t[4] for t in by_broker} == {"GlobalPlanner", "no-action"}  # every run paired with doing nothing
    delayed = bench.tasks_for("delay=55", ["linear"], [1], ["minute", "dag"])
    assert {t[3] for t in delayed} == {"dag"}  # the minute cadence applies at once: no approval delay
    assert "scale-up" in {t[1] for t in bench.tasks_for("utilization=1.3", ["linear"], [1], ["minute"])}


def _row(strategy: str, scenario: str, final: float, worst: float, moves: int, seed: int = 1) -> dict[str, Any]:
    return {
        "condition": "utilization=1.6",
        "scenario": scenario,
        "model": "linear",
        "cadence": "dag",
        "strategy": strategy,
        "seed": seed,
        "final_max": final,
        "worst_max": worst,
        "moves": moves,
        "ideal": 0.7,
    }


def test_the_report_counts_and_lists_what_is_worse_than_doing_nothing() -> None:
    doc = {
        "conditions": ["utilization=1.6"],
        "models": ["linear"],
        "seeds": [1, 2],
        "scenarios": None,
        "fixed_size": ["scale-up"],
        "seconds": 1.0,
        "rows": [
            # ends 3 points above doing nothing
            _row("GlobalPlanner", "one-hot-broker", 0.80, 0.82, 4),
            _row("no-action", "one-hot-broker", 0.77, 0.80, 0),
            # ends lower, but its worst broker went above 85 % where doing nothing's stayed below
            _row("GlobalPlanner", "periodic-jitter", 0.75, 0.86, 6),
            _row("no-action", "periodic-jitter", 0.78, 0.82, 0),
            # a tie within half a point, and moves on the steady scenario
            _row("GlobalPlanner", "steady-with-noise", 0.704, 0.71, 2),
            _row("no-action", "steady-with-noise", 0.70, 0.71, 0),
            # both above 85 %: not the planner's doing
            _row("GlobalPlanner", "heterogeneous", 0.90, 0.95, 3, seed=2),
            _row("no-action", "heterogeneous", 0.93, 0.97, 0, seed=2),
        ],
    }
    report = bench.render(doc)
    assert "| `utilization=1.6` | 4 | 1 | 1 | 2 | 15 | 2 (1 of 1 runs moved) |" in report
    assert (
        "* `utilization=1.6`: one-hot-broker / linear / dag / seed 1: ends at 0.800 against doing nothing's 0.770"
        in report
    )
    assert (
        "periodic-jitter / linear / dag / seed 1: its worst broker over the run 0.860 against doing nothing's 0.820"
        in report
    )
    assert "heterogeneous / linear" not in report
    assert "steady-with-noise / linear / dag / seed 1: 2 moves, ends at 0.704 against 0.700" in report
    headline = bench.render_headline(doc)
    assert "4 runs of the planner: it ends above doing nothing in **1**" in headline and "in **1** (" in headline
    assert "([robustness.md](robustness.md) lists each)" in headline
    doc["report"] = "robustness-held-out.md"  # the held-out sets' run links its own report
    assert "([robustness-held-out.md](robustness-held-out.md) lists each)" in bench.render_headline(doc)


def test_a_run_under_three_brokers_pairs_the_planner_with_doing_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--no-write", "--conditions", "brokers=3", "--models", "linear", "--cadences", "minute"]
    assert bench.main([*argv, "--seeds", "1", "--scenarios", "one-hot-broker", "steady-with-noise"]) == 0
    out = capsys.readouterr().out
    # one broker with twice the average of three: the planner lowers it, and leaves the balanced one alone
    assert "| `brokers=3` | 2 | 0 | 0 | 1 |" in out and "0 (0 of 1 runs moved) |" in out
    assert "No run ends above doing nothing" in out


def test_the_later_held_out_sets_run_in_place_of_the_models(capsys: pytest.CaptureFixture[str]) -> None:
    assert {"3", "4", "5", "6"} <= set(bench.OWN_MODULE_SETS)
    with pytest.raises(SystemExit):  # no such set
        bench.main(["--no-write", "--held-out-sets", "99"])
    argv = ["--no-write", "--held-out-sets", "6", "--conditions", "utilization=1.3", "--cadences", "minute"]
    assert bench.main([*argv, "--seeds", "1", "--scenarios", "steady-with-noise"]) == 0
    out = capsys.readouterr().out
    # the set's models, built from its module (no registry lists them), each paired with doing nothing
    assert "load models shared-hosts, cold-start;" in out and "| `utilization=1.3` | 2 | 0 | 0 |" in out
    assert bench.HELD_OUT_TARGETS["robustness-held-out-report"][0].name == "robustness-held-out.md"
    assert bench.HELD_OUT_JSON.name == "robustness-held-out.json"


def _rrow(strategy: str, cadence: str, seed: int, final: float) -> dict[str, Any]:
    return {
        "condition": "utilization=1.3",
        "scenario": "one-hot-broker",
        "model": "linear",
        "cadence": cadence,
        "strategy": strategy,
        "seed": seed,
        "final_max": final,
        "worst_max": final,
        "moves": 1,
        "ideal": 0.5,
    }


def test_merge_replaces_the_planners_rows_at_the_cadences_named_and_says_what_it_kept() -> None:
    stored = {
        "meta": {"date": "2026-12-03 11:42 UTC", "command": "python benchmarks/bench_robustness.py --jobs 2"},
        "seconds": 5303.6,
        "rows": [_rrow(st, c, 1, 0.6) for st in (bench.PLANNER, bench.NO_ACTION) for c in ("minute", "dag")],
    }
    meta = {
        "date": "2026-12-05 00:30 UTC",
        "command": "python benchmarks/bench_robustness.py --merge --cadences minute",
    }
    doc = bench.merge_rows(stored, [_rrow(bench.PLANNER, "minute", 1, 0.55)], ["minute"], 12.0, meta)
    finals = {(r["strategy"], r["cadence"]): r["final_max"] for r in doc["rows"]}
    assert finals == {
        (bench.PLANNER, "minute"): 0.55,
        (bench.PLANNER, "dag"): 0.6,
        (bench.NO_ACTION, "minute"): 0.6,
        (bench.NO_ACTION, "dag"): 0.6,
    }
    assert stored["rows"][0]["final_max"] == 0.6  # the stored document is left as it was
    note = doc["meta"]["note"]
    assert note.startswith("GlobalPlanner's rows at the minute cadence re-run by this command (12 s) and merged")
    assert "no-action's, and the planner's at the dag cadence) is from the full run of 2026-12-03 11:42 UTC" in note
    # merged again: the base stays the full run
    again = bench.merge_rows(doc, [_rrow(bench.PLANNER, "minute", 1, 0.54)], ["minute"], 3.0, meta)
    assert again["merged"]["base"]["date"] == "2026-12-03 11:42 UTC"
    with pytest.raises(ValueError, match="does not cover the stored run's GlobalPlanner rows"):
        bench.merge_rows(stored, [], ["minute"], 1.0, meta)
    with pytest.raises(SystemExit):  # argparse: the stored run's own scope only
        bench.main(["--merge", "--models", "linear"])
