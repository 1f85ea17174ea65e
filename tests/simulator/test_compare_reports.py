"""benchmarks/compare_reports.py: runs matched by name across the reports' two shapes, changes counted
against the tie, and a file that is not a report refused by name."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import figures  # noqa: E402

cmp = figures.load_script("benchmarks/compare_reports.py")


def _row(model: str, seed: int, final: float, moves: int, *, strategy: str = "GlobalPlanner", worst: float = 0.7):
    return {
        "model": model,
        "scenario": "steady-with-noise",
        "cadence": "dag",
        "strategy": strategy,
        "seed": seed,
        "final_max": final,
        "worst_max": worst,
        "moves": moves,
    }


def _balance(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The balance reports' shape: load model -> cadence -> scenario -> strategy -> runs (per seed)."""
    out: dict[str, Any] = {}
    for row in runs:
        r = {**{k: v for k, v in row.items() if k != "model"}, "load_model": row["model"]}
        out.setdefault(r["load_model"], {}).setdefault(r["cadence"], {}).setdefault(r["scenario"], {}).setdefault(
            r["strategy"], []
        ).append(r)
    return {"results": out, "series": {"ignored": [{"final_max": 1, "moves": 1}]}}


def test_changes_are_counted_against_the_tie_and_listed_largest_first() -> None:
    old = {"rows": [_row("a", 1, 0.60, 3), _row("a", 2, 0.60, 3), _row("b", 1, 0.70, 5), _row("b", 2, 0.50, 2)]}
    new = {
        "rows": [
            _row("a", 1, 0.604, 3),  # within the tie: unchanged
            _row("a", 2, 0.62, 4, worst=0.75),  # higher, and its worst broker over the run too
            _row("b", 1, 0.64, 6),  # lower
            _row("b", 2, 0.50, 1),  # same final, other moves: changed, neither higher nor lower
            _row("c", 1, 0.5, 0),  # only in the new report
        ]
    }
    result = cmp.compare(old, new)
    assert (result["runs"], result["only_before"], result["only_after"]) == (4, 0, 1)
    assert result["changed"] == 3
    assert result["higher"] == ["a / steady-with-noise / dag / GlobalPlanner / seed 2: 0.600 -> 0.620 (3 -> 4 moves)"]
    assert result["lower"] == ["b / steady-with-noise / dag / GlobalPlanner / seed 1: 0.700 -> 0.640 (5 -> 6 moves)"]
    assert result["summed_change"] == pytest.approx(-0.04)
    assert (result["moves_before"], result["moves_after"]) == (13, 14)
    assert result["worst_higher"] == ["a / steady-with-noise / dag / GlobalPlanner / seed 2: worst 0.700 -> 0.750"]
    assert cmp.compare(old, new, tie=0.001)["changed"] == 4
    text = cmp.render(result)
    assert "4 runs in both reports (1 only in the new one)" in text and "ending higher: 1, lower: 1" in text


def test_nested_balance_reports_match_runs_by_load_model_and_filter_by_strategy() -> None:
    before = [_row("linear", 1, 0.6, 2), _row("linear", 1, 0.7, 0, strategy="no-action")]
    after = [_row("linear", 1, 0.5, 3), _row("linear", 1, 0.7, 0, strategy="no-action")]
    result = cmp.compare(_balance(before), _balance(after))
    assert result["runs"] == 2 and result["changed"] == 1  # the series are not runs
    assert result["lower"] == [
        "linear / steady-with-noise / dag / GlobalPlanner / seed 1: 0.600 -> 0.500 (2 -> 3 moves)"
    ]
    only = cmp.compare(_balance(before), _balance(after), strategy="no-action")
    assert only["runs"] == 1 and only["changed"] == 0


def test_files_that_are_not_reports_are_refused_by_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"rows": [_row("a", 1, 0.6, 1)]}))
    bad = tmp_path / "decide.json"
    bad.write_text(json.dumps({"seconds": 4.4}))
    assert cmp.main([str(good), str(bad)]) == 2
    assert f"{bad}: has neither 'rows' nor 'results'" in capsys.readouterr().err
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"rows": [_row("z", 9, 0.6, 1)]}))
    assert cmp.main([str(good), str(other)]) == 2
    assert "no run in common" in capsys.readouterr().err
    twice = tmp_path / "twice.json"
    twice.write_text(json.dumps({"rows": [_row("a", 1, 0.6, 1), _row("a", 1, 0.7, 1)]}))
    assert cmp.main([str(good), str(twice)]) == 2
    assert "two runs named a / steady-with-noise / dag / GlobalPlanner / seed 1" in capsys.readouterr().err
    assert cmp.main([str(good), str(good), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["changed"] == 0
