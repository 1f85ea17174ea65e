"""benchmarks/bench_jitter_day.py: ``--random`` ranges parsed and refused by name, and the random-family
report's counting (moves after the first hour, the runs over the criterion with doing nothing's side)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import figures  # noqa: E402

bench = figures.load_script("benchmarks/bench_jitter_day.py")


def test_ranges_name_the_draws_in_order_without_repeats() -> None:
    assert bench.parse_ranges(["1-3", "213", "2-4"]) == ["random-1", "random-2", "random-3", "random-213", "random-4"]


@pytest.mark.parametrize(
    ("spec", "message"),
    [("2-x", "is not K or K-L"), ("5-3", "1 <= K <= L"), ("0-2", "1 <= K <= L"), ("1000000", "past the family")],
)
def test_a_bad_range_is_refused_by_name_before_any_run(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        bench.parse_ranges([spec])
    with pytest.raises(SystemExit):  # argparse: exits 2 with the message
        bench.main(["--no-write", "--random", spec])


def _row(model: str, strategy: str, seed: int, moves: int, after: int, final: float) -> dict[str, Any]:
    return {
        "model": model,
        "strategy": strategy,
        "seed": seed,
        "moves": moves,
        "moves_after_first_hour": after,
        "moves_per_day": float(moves),
        "final_max": final,
        "worst_max": final + 0.1,
        "ideal": 0.5,
        "seconds": 1.0,
    }


def _doc(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {"rows": rows, "rate_noise": 0.03, "held_out": [], "seconds": 10.0}


def test_a_start_rebalance_is_told_apart_from_moves_under_the_jitter() -> None:
    doc = _doc(
        [
            _row("random-1", "GlobalPlanner", 1, 5, 0, 0.60),  # a one-off rebalance: over the criterion
            _row("random-1", "no-action", 1, 0, 0, 0.90),
            _row("random-2", "GlobalPlanner", 1, 2, 2, 0.55),  # within it, but under the jitter
            _row("random-2", "no-action", 1, 0, 0, 0.55),
        ]
    )
    report = bench.render_random(doc)
    assert "**not met** in 1 of 2 runs: random-1 seed 1: 5 moves" in report
    assert "random-1 seed 1: 5 moves, 5 in the first hour, final 0.600, doing nothing ends at 0.900" in report
    assert "moves 2 bundle(s) in all, in 1 of 2 runs (at most 2 in a day: random-2, seed 1)" in report
    assert "| random-1 | 1 | 5 (0) / 0.600 | 0.900 | 0.500 | 0.70 / 1.00 |" in report
    headline = bench.render_random_headline(doc)
    assert "2 draws of the random load-model family (random-1, random-2)" in headline
    assert "ends above doing nothing (by more than half a point) in no run" in headline


def test_a_run_above_doing_nothing_is_named() -> None:
    doc = _doc([_row("random-3", "GlobalPlanner", 2, 1, 1, 0.70), _row("random-3", "no-action", 2, 0, 0, 0.60)])
    assert "**met** in all 1 day-long runs" in bench.render_random(doc)
    assert "in 1 run(s): random-3 seed 2." in bench.render_random_headline(doc)


def test_the_later_held_out_sets_run_by_name_and_write_their_own_report(monkeypatch: pytest.MonkeyPatch) -> None:
    sets = bench.OWN_MODULE_SETS
    assert {"3", "4", "5", "6"} <= set(sets)
    with pytest.raises(SystemExit):  # no such set
        bench.main(["--no-write", "--held-out-sets", "99"])
    with pytest.raises(SystemExit):  # two reports at once
        bench.main(["--no-write", "--held-out-sets", "--random", "1"])
    # a model of a set in a module of its own is built from that module (no registry lists it)
    monkeypatch.setattr(bench, "MINUTES", 3)
    row = bench._run(("cold-start", "no-action", 1, 0.03))
    assert row["model"] == "cold-start" and row["moves"] == 0 and 0.4 < row["ideal"] < 0.6
    assert bench.HELD_OUT_TARGETS["jitter-day-held-out-report"][0].name == "jitter-day-held-out.md"
    assert bench.HELD_OUT_JSON.name == "jitter-day-held-out.json"
    doc = _doc(
        [
            _row("batching-concave", "GlobalPlanner", 1, 1, 1, 0.52),
            _row("batching-concave", "no-action", 1, 0, 0, 0.53),
            _row("cold-start", "GlobalPlanner", 1, 3, 0, 0.51),
            _row("cold-start", "no-action", 1, 0, 0, 0.51),
        ]
    )
    doc["held_out_sets"] = ["5", "6"]
    headline = bench.render_held_out_headline(doc)
    assert "the 2 load models of the held-out sets 5 and 6 (batching-concave, cold-start)" in headline
    assert "**not met** in 1 of 2 runs: cold-start seed 1: 3 moves" in headline
    doc["held_out_sets"] = ["6"]
    assert "held-out set 6 (" in bench.render_held_out_headline(doc)
    # a day without a move says so
    still = _doc(
        [_row("shared-hosts", "GlobalPlanner", 1, 0, 0, 0.53), _row("shared-hosts", "no-action", 1, 0, 0, 0.53)]
    )
    assert "**met** in all 1 day-long runs (no move in any)" in bench.render(still)
