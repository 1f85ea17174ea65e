"""``bench_held_out_scenarios.py --merge``: after a change to the planner alone, re-run only the GlobalPlanner's cells of
a set's stored run and merge them into it. On tiny stored runs of the first set (steady-growth, linear, seed 1), written
by the benchmark itself into a temporary folder: the merge replaces the planner's cells and lines with what the same code
gives again, keeps every other strategy's as stored, names both runs and the current sources, and writes the blocks a
full run writes (``--render`` after it changes nothing); it refuses, before anything runs, a stored run it cannot
merge into (missing, older than ``--merge``, without the planner, not the set's full run), other flags, sources changed
outside the planner's, and flags that would make it partial."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.simulator.scenario_profiles import held_out_bench

bench = held_out_bench()

SCENARIO = "steady-growth"
"""A scenario where the planner moves (1 move at the dag cadence, 2 at the minute's), doing nothing and
ThresholdShedder do not: the planner's cell is none of the others'."""
TINY = ["--scenarios", SCENARIO, "--models", "linear", "--cadences", "dag", "--seeds", "1"]
MERGE = ["--merge", "--seeds", "1"]
"""``--merge`` with the tiny run's flags (its seeds; the others at their defaults, as the run had them)."""


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny stored run (the planner, doing nothing and ThresholdShedder on one cell) written by ``--out-dir``."""
    out = tmp_path_factory.mktemp("stored")
    strategies = ["GlobalPlanner", "no-action", "ThresholdShedder"]
    assert bench.main([*TINY, "--strategies", *strategies, "--out-dir", str(out)]) == 0
    return out


@pytest.fixture
def out_dir(tiny_run: Path, tmp_path: Path) -> Path:
    """A copy of the tiny stored run, this test's own."""
    return Path(shutil.copytree(tiny_run, tmp_path / "out"))


def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def _save(path: Path, doc: dict[str, Any]) -> None:
    path.write_text(json.dumps(doc), encoding="utf-8")


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """``main(argv)`` refuses with exit status 2 (a returned 2 or argparse's exit): what it printed on stderr."""
    try:
        code = bench.main(argv)
    except SystemExit as exc:
        code = exc.code
    assert code == 2, argv
    return capsys.readouterr().err


def test_merge_replaces_the_planners_cell_and_line_keeps_the_others_and_says_so(out_dir: Path) -> None:
    path, report = out_dir / "held-out-scenarios.json", out_dir / "held-out-scenarios.md"
    fresh = _load(path)
    cell = fresh["results"]["linear"]["dag"][SCENARIO]
    assert cell["GlobalPlanner"] != cell["no-action"]  # the planner moved: its cell is its own
    # the stored run altered: a planner cell and line the code does not give, and another strategy's cell that no
    # re-run would give either (kept as stored: only the planner is re-run)
    stored = _load(path)
    panel = stored["series"]["linear"]["dag"][SCENARIO]
    stored_cell = stored["results"]["linear"]["dag"][SCENARIO]
    stored_cell["GlobalPlanner"][0].update(final_max=0.123, moves=99)
    panel["max_usage"]["GlobalPlanner"] = [0.5]
    stored_cell["ThresholdShedder"][0]["final_max"] = 0.777
    panel["max_usage"]["ThresholdShedder"] = [0.25, 0.75]
    stored["sources"]["pulsar_rebalance/core/planner/__init__.py"] = "0" * 64  # the planner's code: what --merge is for
    _save(path, stored)
    for png in (out_dir / "held-out-scenarios").iterdir():
        png.unlink()

    assert bench.main([*MERGE, "--out-dir", str(out_dir)]) == 0
    merged = _load(path)
    merged_cell = merged["results"]["linear"]["dag"][SCENARIO]
    lines = merged["series"]["linear"]["dag"][SCENARIO]["max_usage"]
    # the same code re-run: the planner's cell and line exactly as the full run had them
    assert merged_cell["GlobalPlanner"] == fresh["results"]["linear"]["dag"][SCENARIO]["GlobalPlanner"]
    assert lines["GlobalPlanner"] == fresh["series"]["linear"]["dag"][SCENARIO]["max_usage"]["GlobalPlanner"]
    # everyone else's as stored, altered ones included
    assert merged_cell["ThresholdShedder"] == stored_cell["ThresholdShedder"]
    assert merged_cell["ThresholdShedder"][0]["final_max"] == 0.777
    assert merged_cell["no-action"] == fresh["results"]["linear"]["dag"][SCENARIO]["no-action"]
    assert lines["ThresholdShedder"] == [0.25, 0.75] and lines["no-action"] == panel["max_usage"]["no-action"]
    # what the stored run recorded of itself stays; the sources are the ones this run imported; both runs named
    for key in ("seeds", "noise", "rate_noise", "approval_delay_min", "drift_tolerance", "guard", "strategies"):
        assert merged[key] == fresh[key], key
    assert (merged["scenarios"], merged["runs"], merged["elapsed_s"]) == (
        fresh["scenarios"],
        fresh["runs"],
        fresh["elapsed_s"],
    )
    assert merged["sources"] == bench.source_digests()
    base = {"date": fresh["meta"]["date"], "command": fresh["meta"]["command"], "elapsed_s": fresh["elapsed_s"]}
    assert merged["merged"]["strategies"] == ["GlobalPlanner"] and merged["merged"]["base"] == base
    assert merged["meta"]["date"] >= base["date"] and "machine" in merged["meta"]
    note = merged["meta"]["note"]
    assert note.startswith("GlobalPlanner re-run by this command") and f"(`{base['command']}`)" in note
    # the report and the plot written again from the merged JSON; rendering it again changes nothing
    text = report.read_text(encoding="utf-8")
    assert note in text and "0.777" in text and "0.123" not in text  # ThresholdShedder's stored cell, the planner's new
    assert (out_dir / "held-out-scenarios" / "linear-dag.png").is_file()
    before = path.read_bytes(), text
    bench.write_report(path, _load(path), {bench.BLOCK: [report]}, 1)
    assert (path.read_bytes(), report.read_text(encoding="utf-8")) == before
    # merged again: the base stays the full run
    assert bench.main([*MERGE, "--out-dir", str(out_dir)]) == 0
    assert _load(path)["merged"]["base"] == base


def test_a_source_changed_outside_the_planner_is_refused_by_name(
    out_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = out_dir / "held-out-scenarios.json"
    stored = _load(path)
    stored["sources"]["pulsar_rebalance/simulator/closed_loop.py"] = "0" * 64
    _save(path, stored)
    before = path.read_bytes()
    err = _refused([*MERGE, "--out-dir", str(out_dir)], capsys)
    assert f"cannot merge into {path}:" in err
    assert "outside pulsar_rebalance/core/planner/" in err and "pulsar_rebalance/simulator/closed_loop.py" in err
    assert path.read_bytes() == before  # nothing written


def test_flags_other_than_the_stored_runs_are_refused(out_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = out_dir / "held-out-scenarios.json"
    before = path.read_bytes()
    err = _refused(["--merge", "--out-dir", str(out_dir)], capsys)  # seeds 1 2 by default
    assert "seeds: the stored run used [1], this command [1, 2]" in err
    assert f"pass the stored run's flags: `{_load(path)['meta']['command']}`" in err
    err = _refused([*MERGE, "--rate-noise", "0", "--no-guard", "--out-dir", str(out_dir)], capsys)
    assert "rate_noise: the stored run used 0.03, this command 0.0" in err and "guard: " in err
    # what would make it partial, or write nothing: refused before anything is read
    for extra, says in (
        (["--scenarios", SCENARIO], "leave out --models, --scenarios and --cadences"),
        (["--models", "linear"], "leave out --models, --scenarios and --cadences"),
        (["--cadences", "dag"], "leave out --models, --scenarios and --cadences"),
        (["--strategies", "GlobalPlanner", "no-action"], "re-runs the GlobalPlanner only"),
        (["--strategies", "ThresholdShedder"], "re-runs the GlobalPlanner only"),
        (["--no-write"], "leave out --no-write"),
        (["--render"], "leave out --merge"),
    ):
        assert says in _refused([*MERGE, *extra, "--out-dir", str(out_dir)], capsys), extra
    assert path.read_bytes() == before


def test_a_stored_run_it_cannot_merge_into_is_refused(
    out_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nothing"
    err = _refused([*MERGE, "--out-dir", str(missing)], capsys)
    assert f"{missing / 'held-out-scenarios.json'} does not exist" in err
    assert not missing.exists()
    path = out_dir / "held-out-scenarios.json"
    stored = _load(path)
    _save(path, {k: v for k, v in stored.items() if k != "series"})
    assert "predates --merge" in _refused([*MERGE, "--out-dir", str(out_dir)], capsys)
    without = json.loads(json.dumps(stored))
    without["strategies"].remove("GlobalPlanner")
    del without["results"]["linear"]["dag"][SCENARIO]["GlobalPlanner"]
    _save(path, without)
    assert "has no GlobalPlanner cells to replace" in _refused([*MERGE, "--out-dir", str(out_dir)], capsys)


@pytest.fixture
def committed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """The first set's committed files moved into ``tmp_path`` (its JSON, report, index and README), the README with
    its (hand-placed) marked block."""
    files = {name: tmp_path / name for name in ("set.json", "set.md", "index.md", "README.md")}
    files["index.md"].write_text("# Benchmarks\n\n## How the planner got here\n", encoding="utf-8")
    files["README.md"].write_text(
        f"# x\n\n<!-- {bench.README_BLOCK}:start (written by x from y) -->\n<!-- {bench.README_BLOCK}:end -->\n",
        encoding="utf-8",
    )
    written = {
        bench.BLOCK: [files["set.md"]],
        bench.HEADLINE: [files["index.md"]],
        bench.README_BLOCK: [files["README.md"]],
    }
    chosen = dataclasses.replace(bench.SETS[1], json=files["set.json"], doc=files["set.md"], written=written)
    monkeypatch.setitem(bench.SETS, 1, chosen)
    return files


def test_into_the_committed_report_a_stored_run_short_of_the_sets_cells_is_refused(
    tiny_run: Path, committed: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copy(tiny_run / "held-out-scenarios.json", committed["set.json"])
    err = _refused(MERGE, capsys)
    assert f"cannot merge into {committed['set.json']}:" in err
    assert "load models: the stored run has ['linear']" in err
    assert f"the stored run is not set 1's full run (scenarios ['{SCENARIO}'], cadences ['dag'])" in err
    assert not committed["set.md"].exists()  # nothing written


def test_into_the_committed_report_it_writes_every_block_a_full_run_writes(
    committed: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # the first set shrunk to one scenario and one load model (both cadences): a full run of it, then a merge
    chosen = bench.SETS[1]
    only = {SCENARIO: chosen.scenarios[SCENARIO]}
    expectations = {SCENARIO: chosen.expectations[SCENARIO]}
    monkeypatch.setitem(bench.SETS, 1, dataclasses.replace(chosen, scenarios=only, expectations=expectations))
    monkeypatch.setattr(bench, "LOAD_MODELS", {"linear": bench.LOAD_MODELS["linear"]})
    assert bench.main(["--seeds", "1", "--strategies", "GlobalPlanner", "no-action"]) == 0
    full = _load(committed["set.json"])
    assert set(full["results"]["linear"]) == {"minute", "dag"} and "merged" not in full
    stored = json.loads(json.dumps(full))
    stored["results"]["linear"]["minute"][SCENARIO]["GlobalPlanner"][0]["final_max"] = 0.123
    _save(committed["set.json"], stored)

    assert bench.main(MERGE) == 0
    merged = _load(committed["set.json"])
    assert merged["results"] == full["results"] and merged["series"] == full["series"]  # the same code: the same runs
    assert merged["merged"]["base"]["date"] == full["meta"]["date"]
    for path in (committed["set.md"], committed["index.md"], committed["README.md"]):
        assert merged["meta"]["note"] in path.read_text(encoding="utf-8"), path.name  # every block written again
    # --render after it (the committed JSON, every block) changes nothing
    before = {name: path.read_bytes() for name, path in committed.items()}
    assert bench.main(["--render"]) == 0
    assert {name: path.read_bytes() for name, path in committed.items()} == before
