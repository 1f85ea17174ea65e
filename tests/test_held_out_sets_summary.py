"""The held-out sets' summary (``bench_balance.py``: one row per set, the README's headline over all of them)
counts what each set's stored report counts. Built from a stored report with one cell changed by hand, so each
test fails if the summary stops seeing that change. No benchmark runs."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import figures  # noqa: E402

bench = figures.load_script("benchmarks/bench_balance.py")
STORED = json.loads((ROOT / "docs" / "benchmarks" / "balance-held-out-4.json").read_text(encoding="utf-8"))
MODEL, CADENCE, SCENARIO = "topic-features", "minute", "one-hot-broker"


def _cell(doc: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    return doc["results"][MODEL][CADENCE][SCENARIO]


def test_a_cell_the_planner_ends_above_doing_nothing_is_counted_and_named() -> None:
    before = bench.set_summary("4", STORED)
    doc = copy.deepcopy(STORED)
    no_action = {r["seed"]: r for r in _cell(doc)[bench.NO_ACTION]}
    for r in _cell(doc)[bench.PLANNER]:
        r["final_max"] = no_action[r["seed"]]["final_max"] + 0.05
    after = bench.set_summary("4", doc)
    assert after["cells"] == before["cells"] == 40
    assert after["cells_met"] == before["cells_met"] - 1
    assert after["planner"]["above"] == before["planner"]["above"] + 1
    assert f"not_worse: {SCENARIO} / {MODEL} / {CADENCE}" in after["failed"]
    assert f"not_worse: {SCENARIO} / {MODEL} / {CADENCE}" not in before["failed"]


def test_a_seed_pushed_above_85_percent_fails_no_hot_while_the_mean_stays_below() -> None:
    doc = copy.deepcopy(STORED)
    planner = _cell(doc)[bench.PLANNER]
    no_action = {r["seed"]: r for r in _cell(doc)[bench.NO_ACTION]}
    for r in no_action.values():
        r["worst_max"] = 0.6
    planner[0]["worst_max"] = 0.86
    for r in planner[1:]:
        r["worst_max"] = 0.5
    s = bench.set_summary("4", doc)
    assert f"no_hot: {SCENARIO} / {MODEL} / {CADENCE}" in s["failed"]
    assert s["planner"]["pushed"] == 0  # the do-no-harm table's count is over the means: (0.86 + 0.5) / 2


def test_the_headline_sums_every_set_and_names_each_missed_criterion() -> None:
    one = bench.set_summary("4", STORED)
    two = copy.deepcopy(one)
    two["set"] = "5"
    two["failed"] = [*one["failed"], "no_hot: scale-up / x / minute", "moves: large-zipf / x / dag"]
    two["cells_met"] = one["cells_met"] - 2
    two["planner"] = {"above": 1, "pushed": 2, "moves": 0}
    text = bench.render_sets_headline({"meta": STORED["meta"], "sets": [one, two]})
    assert f"**{2 * one['cells_met'] - 2} of 80** meet every criterion" in text
    assert "*moves* " + str(2 * sum(f.startswith("moves") for f in one["failed"]) + 1) in text
    assert "*no_hot* 1" in text
    assert "above doing nothing in **1**" in text and "stays below in **2**" in text
    assert "the same decision core" in text
    two["core"] = "0123456789"
    assert "2 versions of the decision core" in bench.render_sets_headline({"meta": STORED["meta"], "sets": [one, two]})


def test_the_table_links_every_set_to_its_report() -> None:
    doc = bench.sets_doc()
    # every set whose report is stored, in order; a set not run yet (its JSON not written) is left out
    stored = [key for key, (path, _) in bench.HELD_OUT_OUTPUTS.items() if path.exists()]
    assert [s["set"] for s in doc["sets"]] == stored and {"1", "2", "3", "4", "5", "6", "7", "8", "9"} <= set(stored)
    table = bench.render_sets(doc)
    for key in stored:
        assert f"]({bench.held_out_stem(key)}.md)" in table
        assert (ROOT / "docs" / "benchmarks" / f"{bench.held_out_stem(key)}.md").is_file()


def test_a_set_not_run_yet_is_left_out(monkeypatch: Any, tmp_path: Path) -> None:
    """A held-out set whose report's JSON does not exist yet (a new set before its first full run) is skipped: the
    summary is the stored sets', unchanged."""
    before = bench.sets_doc()
    outputs = {**bench.HELD_OUT_OUTPUTS, "99": (tmp_path / "balance-held-out-99.json", {})}
    monkeypatch.setattr(bench, "HELD_OUT_OUTPUTS", outputs)
    after = bench.sets_doc()
    assert after == before and "99" not in [s["set"] for s in after["sets"]]
