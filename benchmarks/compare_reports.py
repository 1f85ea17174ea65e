"""Compare two stored runs of a closed-loop benchmark report: which runs a change moved, and how far.

Usage::

    cp docs/benchmarks/robustness.json /tmp/before.json      # before re-running the benchmark
    .venv/bin/python benchmarks/bench_robustness.py --jobs 2
    .venv/bin/python benchmarks/compare_reports.py /tmp/before.json docs/benchmarks/robustness.json

    git show HEAD~3:docs/benchmarks/balance.json > /tmp/old.json   # or any committed version
    .venv/bin/python benchmarks/compare_reports.py /tmp/old.json docs/benchmarks/balance.json --strategy GlobalPlanner

Reads the reports whose runs carry ``final_max`` (the worst broker at the run's end): ``balance*.json``
(nested by load model, cadence, scenario and strategy), ``random-models*.json``, ``robustness.json``,
``jitter-day*.json`` and ``steady-noise.json`` (lists of rows). A run is named by the fields that identify
it (load model, scenario, cadence, strategy, seed, and the condition or noise level where the report has
one); runs present in only one report are counted, not compared. A run *changed* when its final worst
broker moved by more than ``--tie`` (default 0.005, the benchmarks' own tie) or its moves differ; it *ends
higher* / *lower* by more than the tie. Printed: the counts, the summed change, the moves in all, the runs
whose worst broker over the run rose by more than the tie, and the largest rises and falls (``--list``).
``--json`` prints the same as one JSON document. Exit 0 whatever the result; 2 when a file is not such a
report.

This is how a planner change's effect on a re-measured report is summarised (``docs/planner-history.md``:
"13 of 3,744 runs changed ..., 5 ending higher and 3 lower by more than half a point").
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench_balance import TIE  # the benchmarks' tie: half a point of a broker's usage

KEY_FIELDS = ("model", "condition", "level", "scenario", "cadence", "strategy", "seed")
"""The fields that name a run, in the order they are printed."""


class NotAReport(ValueError):
    """The file is not a benchmark report with per-run results."""


def runs(doc: Any) -> Iterator[dict[str, Any]]:
    """Every run of a report: a mapping with ``final_max`` and ``moves``, found in ``rows`` / ``results``
    however deeply nested (balance reports nest by load model, cadence, scenario and strategy)."""

    def walk(node: Any) -> Iterator[dict[str, Any]]:
        if isinstance(node, Mapping):
            if "final_max" in node and "moves" in node:
                yield dict(node)
                return
            for value in node.values():
                yield from walk(value)
        elif isinstance(node, list):
            for item in node:
                yield from walk(item)

    if not isinstance(doc, Mapping):
        raise NotAReport("not a JSON object")
    body = doc.get("rows", doc.get("results"))
    if body is None:
        raise NotAReport("has neither 'rows' nor 'results'")
    yield from walk(body)


def run_key(run: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    """The identifying fields present in ``run`` (the balance reports name the model ``load_model``)."""
    named = {"model": run.get("load_model"), **run}
    return tuple((f, named[f]) for f in KEY_FIELDS if named.get(f) is not None)


def key_text(key: tuple[tuple[str, Any], ...]) -> str:
    return " / ".join(f"seed {v}" if f == "seed" else str(v) for f, v in key)


@dataclass(frozen=True)
class Change:
    key: tuple[tuple[str, Any], ...]
    final_before: float
    final_after: float
    moves_before: int
    moves_after: int
    worst_before: float | None
    worst_after: float | None

    @property
    def delta(self) -> float:
        return self.final_after - self.final_before

    def text(self) -> str:
        return (
            f"{key_text(self.key)}: {self.final_before:.3f} -> {self.final_after:.3f} "
            f"({self.moves_before} -> {self.moves_after} moves)"
        )


def index(doc: Any, strategy: str | None) -> dict[tuple[tuple[str, Any], ...], dict[str, Any]]:
    out: dict[tuple[tuple[str, Any], ...], dict[str, Any]] = {}
    for run in runs(doc):
        if strategy is not None and run.get("strategy", strategy) != strategy:
            continue
        key = run_key(run)
        if key in out:
            raise NotAReport(f"two runs named {key_text(key)}")
        out[key] = run
    return out


def compare(old: Any, new: Any, *, strategy: str | None = None, tie: float = TIE) -> dict[str, Any]:
    """The comparison of two reports' runs (see the module docstring), as a JSON-able dict."""
    before, after = index(old, strategy), index(new, strategy)
    both = [k for k in after if k in before]
    if not both and (before or after):
        raise NotAReport("the two reports have no run in common (not the same benchmark?)")
    changes = [
        Change(
            k,
            float(before[k]["final_max"]),
            float(after[k]["final_max"]),
            int(before[k]["moves"]),
            int(after[k]["moves"]),
            before[k].get("worst_max"),
            after[k].get("worst_max"),
        )
        for k in both
    ]
    changed = [c for c in changes if abs(c.delta) > tie or c.moves_before != c.moves_after]
    higher = sorted((c for c in changes if c.delta > tie), key=lambda c: -c.delta)
    lower = sorted((c for c in changes if c.delta < -tie), key=lambda c: c.delta)
    worse_peak = [
        c
        for c in changes
        if c.worst_before is not None and c.worst_after is not None and c.worst_after - c.worst_before > tie
    ]
    return {
        "runs": len(both),
        "only_before": len(before) - len(both),
        "only_after": len(after) - len(both),
        "changed": len(changed),
        "higher": [c.text() for c in higher],
        "lower": [c.text() for c in lower],
        "summed_change": round(sum(c.delta for c in changed), 4),
        "moves_before": sum(c.moves_before for c in changes),
        "moves_after": sum(c.moves_after for c in changes),
        "worst_higher": [
            f"{key_text(c.key)}: worst {c.worst_before:.3f} -> {c.worst_after:.3f}"
            for c in sorted(worse_peak, key=lambda c: -((c.worst_after or 0) - (c.worst_before or 0)))
        ],
        "tie": tie,
        "strategy": strategy,
    }


def render(result: Mapping[str, Any], *, listed: int = 5) -> str:
    who = f"{result['strategy']}'s runs" if result["strategy"] else "runs"
    extra = [
        f"{result[n]:,} only in the {side} one"
        for n, side in (("only_before", "old"), ("only_after", "new"))
        if result[n]
    ]
    lines = [
        f"{result['runs']:,} {who} in both reports" + (f" ({'; '.join(extra)})" if extra else ""),
        f"changed (final worst broker by more than {result['tie']} or other moves): {result['changed']:,}; "
        f"ending higher: {len(result['higher'])}, lower: {len(result['lower'])}; "
        f"summed change of the changed runs {result['summed_change']:+.3f}; "
        f"moves in all {result['moves_before']:,} -> {result['moves_after']:,}",
        f"worst broker over the run higher by more than {result['tie']}: {len(result['worst_higher'])}",
    ]
    for title, items in (
        ("largest rises", result["higher"]),
        ("largest falls", result["lower"]),
        ("worst broker over the run higher", result["worst_higher"]),
    ):
        if items and listed:
            lines.append(f"{title}:")
            lines.extend(f"  {item}" for item in items[:listed])
            if len(items) > listed:
                lines.append(f"  ... and {len(items) - listed} more")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("old", type=Path, help="the report before (a copy, or `git show REV:path > file`)")
    ap.add_argument("new", type=Path, help="the report after")
    ap.add_argument("--strategy", help="compare only this strategy's runs (e.g. GlobalPlanner)")
    ap.add_argument("--tie", type=float, default=TIE, help=f"a change within this is no change (default {TIE})")
    ap.add_argument("--list", type=int, default=5, dest="listed", help="runs listed per kind (default 5)")
    ap.add_argument("--json", action="store_true", help="print the comparison as JSON")
    args = ap.parse_args(argv)
    docs = []
    for path in (args.old, args.new):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            next(iter(runs(doc)), None)  # refuses a document that is not a report, naming the file below
        except (OSError, json.JSONDecodeError, NotAReport) as exc:
            print(f"compare_reports: {path}: {exc}", file=sys.stderr)
            return 2
        docs.append(doc)
    try:
        result = compare(*docs, strategy=args.strategy, tie=args.tie)
    except NotAReport as exc:
        print(f"compare_reports: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result, indent=2) if args.json else render(result, listed=args.listed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
