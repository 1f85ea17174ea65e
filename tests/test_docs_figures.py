"""Every figure in the docs is written by the script that measured it, and every relative link resolves.

A marked block (``<!-- NAME:start (written by SCRIPT from JSON) -->`` ... ``<!-- NAME:end -->``) in
README.md or docs/**/*.md must be exactly what ``benchmarks/figures.py`` renders from the committed JSON
with the script's renderer: a hand-edited block, or a JSON written without its blocks, fails here. No
benchmark runs.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import figures  # noqa: E402

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
BLOCKS = [(doc, block) for doc in DOCS for block in figures.find_blocks(doc.read_text(encoding="utf-8"))]


def _id(item: tuple[Path, figures.Block]) -> str:
    return f"{item[0].relative_to(ROOT)}:{item[1].name}"


def test_blocks_are_found() -> None:
    names = {block.name for _, block in BLOCKS}
    assert {"balance-headline", "balance-report", "pipeline-report", "scale-report", "fault-table"} <= names


@pytest.mark.parametrize("item", BLOCKS, ids=[_id(i) for i in BLOCKS])
def test_block_is_rendered_from_its_json(item: tuple[Path, figures.Block]) -> None:
    doc, block = item
    assert (ROOT / block.script).is_file(), f"{block.script} (named by {_id(item)}) does not exist"
    assert (ROOT / block.json).is_file(), f"{block.json} (named by {_id(item)}) does not exist"
    assert block.json.startswith("docs/benchmarks/") and block.json.endswith(".json")
    data = json.loads((ROOT / block.json).read_text(encoding="utf-8"))
    for key in ("date", "machine", "load_average", "command"):
        assert key in data["meta"], f"{block.json}: meta has no {key}"
    expected = figures.render(block.name, block.script, block.json, data)
    assert block.text == expected, (
        f"{_id(item)} differs from what {block.script} renders from {block.json}: re-run the script "
        "(or render the block from the JSON with benchmarks/figures.py) instead of editing it"
    )


def test_every_marker_is_a_complete_block() -> None:
    """A start marker without its end (or with another format) would escape the check above."""
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        starts = re.findall(r"<!-- ([\w-]+):start", re.sub(r"```.*?```", "", text, flags=re.DOTALL))
        assert sorted(starts) == sorted(b.name for b in figures.find_blocks(text)), doc


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def test_relative_links_resolve() -> None:
    broken = []
    for doc in DOCS:
        text = re.sub(r"```.*?```", "", doc.read_text(encoding="utf-8"), flags=re.DOTALL)
        for target in LINK.findall(text):
            if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                continue  # a URL or an anchor in the same page
            path = target.split("#", 1)[0]
            if not (doc.parent / path).exists():
                broken.append(f"{doc.relative_to(ROOT)}: {target}")
    assert not broken, broken


def test_no_internal_work_items_in_user_docs() -> None:
    found = [
        f"{doc.relative_to(ROOT)}: {m.group(0)}"
        for doc in DOCS
        for m in re.finditer(r"\bissues? \d+\b", doc.read_text(encoding="utf-8"), flags=re.IGNORECASE)
    ]
    assert not found, found


def _declared_targets() -> dict[tuple[str, Path], str]:
    """Every (block name, file) a benchmark script's module-level ``*TARGETS`` dict writes, with the script."""
    declared: dict[tuple[str, Path], str] = {}
    for script in sorted((ROOT / "benchmarks").glob("*.py")):
        if script.name == "figures.py":
            continue
        module = figures.load_script(str(script.relative_to(ROOT)))
        for attr, value in vars(module).items():
            if attr.endswith("TARGETS") and isinstance(value, dict):
                for name, paths in value.items():
                    for path in paths:
                        declared[(name, Path(path).resolve())] = script.name
    return declared


def test_every_declared_target_holds_its_block() -> None:
    """A script writes a block only where it is (``figures.replace_block`` refuses otherwise): a block moved
    to another page without its script's targets would fail at the end of an hour-long benchmark, not here."""
    held_out = figures.load_script("benchmarks/bench_held_out_scenarios.py")
    # a held-out scenario set kept in reserve has no run yet: its first run creates its report, intro and block
    # included (``write_report``), so its report's absence is no moved block
    reserve = {s.doc.resolve() for s in held_out.SETS.values() if not s.json.exists()}
    missing = []
    for (name, path), script in _declared_targets().items():
        if path in reserve and not path.exists():
            continue
        found = [b for b in figures.find_blocks(path.read_text(encoding="utf-8")) if b.name == name]
        if len(found) != 1:
            missing.append(f"{script}: {name} in {path.relative_to(ROOT)} ({len(found)} found)")
    assert not missing, missing


@pytest.mark.parametrize("page", ["README.md", "docs/benchmarks/README.md"])
def test_every_headline_block_is_written_by_its_script(page: str) -> None:
    """The headline pages gather blocks from many scripts; each must be one its script's targets name for that
    page, or the next run of the script would leave it stale there."""
    declared = _declared_targets()
    path = (ROOT / page).resolve()
    blocks = list(figures.find_blocks(path.read_text(encoding="utf-8")))
    assert blocks, page
    stale = [b.name for b in blocks if declared.get((b.name, path)) != Path(b.script).name]
    assert not stale, f"{page}: blocks no script's TARGETS write here: {stale}"


def test_the_balance_benchmarks_size_in_words_is_its_own() -> None:
    """The prose around the headline blocks counts the benchmark's scenarios and load models in words: a
    scenario added or dropped must change the words too (they once said eleven where there were ten)."""
    from pulsar_rebalance.simulator.load_models import LOAD_MODELS
    from pulsar_rebalance.simulator.scenarios import SCENARIOS

    words = dict(enumerate("zero one two three four five six seven eight nine ten eleven twelve".split()))
    phrase = f"{words[len(SCENARIOS)]} scenarios, {words[len(LOAD_MODELS)]} **load models**"
    for page in (ROOT / "README.md", ROOT / "docs" / "benchmarks" / "README.md"):
        text = " ".join(page.read_text(encoding="utf-8").split())
        assert phrase in text, f"{page.relative_to(ROOT)}: expected {phrase!r}"


def test_the_config_key_count_in_the_reference_is_the_configs() -> None:
    from pulsar_rebalance.core.pulsar.config import PULSAR_KEYS

    text = " ".join((ROOT / "docs" / "reference.md").read_text(encoding="utf-8").split())
    assert f"`broker.conf` keys verbatim ({len(PULSAR_KEYS)} keys," in text


def test_progress_prints_every_nth_run_and_the_last_with_what_is_left() -> None:
    import io

    out = io.StringIO()
    progress = figures.Progress(5, every=2, out=out)
    lines = [progress.tick() for _ in range(5)]
    assert [line is not None for line in lines] == [False, True, False, True, True]
    printed = out.getvalue().splitlines()
    assert [p.split(" runs")[0] for p in printed] == ["2/5", "4/5", "5/5"]
    assert printed[-1].endswith("about 0 s left")
    assert all(re.fullmatch(r"\d/5 runs, \d+ s, about \d+ s left", p) for p in printed)
