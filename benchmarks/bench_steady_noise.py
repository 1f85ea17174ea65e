"""Benchmark: does the GlobalPlanner leave a balanced cluster alone, whatever the noise of its reports?

Usage::

    .venv/bin/python benchmarks/bench_steady_noise.py --jobs 2     # writes docs/benchmarks/steady-noise.json + .md

The ``steady-with-noise`` scenario (a balanced cluster, nothing changes) in the closed loop of
``bench_balance.py`` (same ``run_one``: the cluster model, the do-no-harm guard, both cadences), under
every default load model, with the noise of the load reports swept: CPU noise (``--noise``, the
reported CPU usage off by up to that fraction) and rate noise (``--rate-noise``, every reported bundle
and topic rate off by up to that fraction) both set to each level. Counted: the planner's moves. A
balanced cluster should get none: every move is a disconnect for nothing. The criterion is 0 moves at
every level up to 5 %; above it the table says what happens.
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "src"))

import figures  # noqa: E402  (benchmarks/figures.py: JSON + marked blocks in the docs)

SCRIPT = "benchmarks/bench_steady_noise.py"
JSON = ROOT / "docs" / "benchmarks" / "steady-noise.json"
DOC = ROOT / "docs" / "benchmarks" / "steady-noise.md"
SCENARIO = "steady-with-noise"
PLANNER = "GlobalPlanner"
CRITERION_MAX_NOISE = 0.05
"""0 moves at steady state with report noise up to this level."""


def _run(task: tuple[str, str, int, float]) -> dict[str, Any]:
    import bench_balance

    model, cadence, seed, level = task
    _, summary, *_ = bench_balance.run_one((SCENARIO, model, cadence, PLANNER, seed, level, level, 15, 0.5, None, True))
    return {
        "model": model,
        "cadence": cadence,
        "seed": seed,
        "level": level,
        "moves": summary["moves"],
        "final_max": summary["final_max"],
    }


def main(argv: list[str] | None = None) -> int:
    from pulsar_rebalance.simulator.load_models import LOAD_MODELS

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--levels", nargs="*", type=float, default=[0.0, 0.02, 0.05, 0.10], help="noise levels, 0-0.1")
    ap.add_argument("--models", nargs="*", default=list(LOAD_MODELS))
    ap.add_argument("--cadences", nargs="*", default=["minute", "dag"])
    ap.add_argument("--seeds", nargs="*", type=int, default=[1, 2, 3])
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (this machine has 2 cores)")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    if any(not 0 <= x <= 0.1 for x in args.levels):
        ap.error("--levels: each level must be within 0-0.1")
    tasks = [(m, c, s, lv) for lv in args.levels for c in args.cadences for m in args.models for s in args.seeds]
    load = figures.LoadSampler()
    load.__enter__()
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for row in pool.map(_run, tasks):
            rows.append(row)
            print(
                f"noise {row['level']:.2f} {row['cadence']:6s} {row['model']:22s} seed {row['seed']}: "
                f"{row['moves']} move(s)",
                file=sys.stderr,
                flush=True,
            )
    load.__exit__(None, None, None)
    doc = {"meta": figures.meta(load), "rows": rows, "seconds": round(time.perf_counter() - started, 1)}
    print(render(doc))
    if not args.no_write:
        figures.write_json(JSON, doc)
        figures.update(SCRIPT, str(JSON.relative_to(ROOT)), doc, TARGETS)
    return 0


def verdict(doc: dict[str, Any]) -> str:
    """The criterion's verdict, and what happens above it."""
    rows = doc["rows"]
    within = [r for r in rows if r["level"] <= CRITERION_MAX_NOISE + 1e-12]
    moved = [r for r in within if r["moves"]]
    above = [r for r in rows if r["level"] > CRITERION_MAX_NOISE + 1e-12]
    text = (
        f"**met**: 0 moves in all {len(within)} runs with noise up to {CRITERION_MAX_NOISE:.0%}"
        if not moved
        else f"**not met**: {len(moved)} of {len(within)} runs with noise up to {CRITERION_MAX_NOISE:.0%} moved "
        + "; ".join(f"{r['model']} / {r['cadence']} / {r['level']:.0%} / seed {r['seed']}: {r['moves']}" for r in moved)
    )
    if above:
        text += (
            f"; above it, {sum(1 for r in above if r['moves'])} of {len(above)} runs moved "
            f"({sum(r['moves'] for r in above)} move(s) in all)"
        )
    return text


def render_headline(doc: dict[str, Any]) -> str:
    levels = [r["level"] for r in doc["rows"]]
    return (
        f"A balanced cluster, its reports' CPU and rate noise swept from {min(levels):.0%} to {max(levels):.0%} "
        f"under every load model and both cadences; criterion 0 moves at steady state with noise up to "
        f"{CRITERION_MAX_NOISE:.0%}: {verdict(doc)}."
    )


def render(doc: dict[str, Any]) -> str:
    rows = doc["rows"]
    levels = sorted({r["level"] for r in rows})
    models = list(dict.fromkeys(r["model"] for r in rows))
    cadences = list(dict.fromkeys(r["cadence"] for r in rows))
    seeds = sorted({r["seed"] for r in rows})
    by: dict[tuple[float, str, str], list[dict[str, Any]]] = {}
    for r in rows:
        by.setdefault((r["level"], r["cadence"], r["model"]), []).append(r)
    out = [
        f"Scenario `{SCENARIO}` (balanced, nothing changes), {PLANNER}, seeds {seeds}; CPU noise and rate noise "
        f"both at each level; {doc['seconds']:.0f} s in all. Cells: moves per seed.",
        "",
        f"Criterion, 0 moves at steady state with noise up to {CRITERION_MAX_NOISE:.0%}: {verdict(doc)}.",
        "",
        "| noise | cadence | " + " | ".join(models) + " |",
        "|---:|---|" + "---|" * len(models),
    ]
    for lv in levels:
        for c in cadences:
            cells = []
            for m in models:
                runs = sorted(by.get((lv, c, m), []), key=lambda r: r["seed"])
                cells.append(" ".join(str(r["moves"]) for r in runs) or "-")
            out.append(f"| {lv:.0%} | {c} | " + " | ".join(cells) + " |")
    return "\n".join(out)


BLOCKS = {"steady-noise-report": render, "steady-noise-headline": render_headline}
TARGETS = {"steady-noise-report": [DOC], "steady-noise-headline": [figures.BENCHMARKS_INDEX]}

if __name__ == "__main__":
    raise SystemExit(main())
