"""Benchmark: how often does the GlobalPlanner move in a simulated day of periodic jitter?

Usage::

    .venv/bin/python benchmarks/bench_jitter_day.py --jobs 2     # writes docs/benchmarks/jitter-day.json + .md

The criterion is "at most 2 moves per simulated day under periodic jitter". The balance benchmark
(``bench_balance.py``) runs ``periodic-jitter`` at the minute cadence for one simulated hour, so a single
corrective move there reads as 24 a day. This benchmark measures the criterion as it is written: the
same scenario (an on/off consumer adds 40 % of a NIC to one bundle's out-traffic, flipping every other
cycle), the same closed loop (the cluster model, the do-no-harm guard, 3 % noise on the reported rates),
one decision per simulated minute for a whole simulated day (1,440 decisions), under every default load
model and both held-out sets. Next to the planner: doing nothing, and Pulsar's default shedder
(AvgShedder), on the same runs. Counted: moves in the day, the worst broker at the end (highest usage over
the last 5 decisions) and over the day.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "src"))

import figures  # noqa: E402  (benchmarks/figures.py: JSON + marked blocks in the docs)
from bench_balance import JITTER_MOVES_PER_DAY, NO_ACTION, PLANNER, TIE  # noqa: E402  (the criteria's one source)

SCRIPT = "benchmarks/bench_jitter_day.py"
JSON = ROOT / "docs" / "benchmarks" / "jitter-day.json"
DOC = ROOT / "docs" / "benchmarks" / "jitter-day.md"
SCENARIO = "periodic-jitter"
STRATEGIES = (PLANNER, NO_ACTION, "AvgShedder")
MINUTES = 1440


def _run(task: tuple[str, str, int, float]) -> dict[str, Any]:
    from pulsar_rebalance.simulator.closed_loop import run_closed_loop
    from pulsar_rebalance.simulator.scenarios import build

    logging.getLogger("pulsar_rebalance").setLevel(logging.ERROR)
    model, strategy, seed, rate_noise = task
    started = time.perf_counter()
    run = build(SCENARIO, seed, load_model=model, rate_noise=rate_noise)
    result = run_closed_loop(run, strategy, decisions=MINUTES)
    s = result.summary()
    return {
        "model": model,
        "strategy": strategy,
        "seed": seed,
        "moves": s["moves"],
        "moves_per_day": s["moves_per_day"],
        "final_max": s["final_max"],
        "worst_max": s["worst_max"],
        "ideal": s["ideal"],
        "seconds": round(time.perf_counter() - started, 1),
    }


def main(argv: list[str] | None = None) -> int:
    from pulsar_rebalance.simulator.held_out_models import HELD_OUT_MODELS, HELD_OUT_MODELS_2
    from pulsar_rebalance.simulator.load_models import LOAD_MODELS

    known = [*LOAD_MODELS, *HELD_OUT_MODELS, *HELD_OUT_MODELS_2]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="*", default=known, help="default: the five load models and both held-out sets")
    ap.add_argument("--strategies", nargs="*", default=list(STRATEGIES))
    ap.add_argument("--seeds", nargs="*", type=int, default=[1, 2, 3])
    ap.add_argument("--rate-noise", type=float, default=0.03, help="noise on reported rates, 0-0.1 (default 3 %%)")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (this machine has 2 cores)")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    unknown = [m for m in args.models if m not in known]
    if unknown:
        ap.error(f"--models: unknown load model(s) {', '.join(unknown)}; known: {', '.join(known)}")
    if not 0 <= args.rate_noise <= 0.1:
        ap.error("--rate-noise must be within 0-0.1")
    tasks = [(m, st, s, args.rate_noise) for m in args.models for st in args.strategies for s in args.seeds]
    print(f"{len(tasks)} day-long runs ({MINUTES} decisions each) on {args.jobs} worker(s)", file=sys.stderr)
    load = figures.LoadSampler()
    load.__enter__()
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for i, row in enumerate(pool.map(_run, tasks), 1):
            rows.append(row)
            print(
                f"[{i}/{len(tasks)}] {row['model']:22s} {row['strategy']:14s} seed {row['seed']}: {row['moves']} move(s), "
                f"final max {row['final_max']:.3f} ({row['seconds']:.0f} s)",
                file=sys.stderr,
                flush=True,
            )
    load.__exit__(None, None, None)
    doc = {
        "meta": figures.meta(load),
        "rows": rows,
        "rate_noise": args.rate_noise,
        "held_out": [*HELD_OUT_MODELS, *HELD_OUT_MODELS_2],
        "seconds": round(time.perf_counter() - started, 1),
    }
    print(render(doc))
    if not args.no_write:
        figures.write_json(JSON, doc)
        figures.update(SCRIPT, str(JSON.relative_to(ROOT)), doc, TARGETS)
    return 0


def verdict(doc: dict[str, Any]) -> str:
    """The criterion's verdict on the planner's runs, with every run that breaks it."""
    runs = [r for r in doc["rows"] if r["strategy"] == PLANNER]
    over = [r for r in runs if r["moves_per_day"] > JITTER_MOVES_PER_DAY + 1e-9]
    if not runs:
        return "not measured (the planner was not run)"
    most = max(runs, key=lambda r: r["moves_per_day"])
    if not over:
        return (
            f"**met** in all {len(runs)} day-long runs (at most {most['moves_per_day']:g} moves in a day: "
            f"{most['model']}, seed {most['seed']})"
        )
    return f"**not met** in {len(over)} of {len(runs)} runs: " + "; ".join(
        f"{r['model']} seed {r['seed']}: {r['moves']} moves" for r in over
    )


def _worse(doc: dict[str, Any], key: str = "final_max") -> list[dict[str, Any]]:
    """The planner's runs that end above doing nothing on the same seed (beyond half a point); with
    ``key="worst_max"``: whose worst broker over the day is above doing nothing's."""
    na = {(r["model"], r["seed"]): r for r in doc["rows"] if r["strategy"] == NO_ACTION}
    return [
        r
        for r in doc["rows"]
        if r["strategy"] == PLANNER
        and (r["model"], r["seed"]) in na
        and r[key] > na[(r["model"], r["seed"])][key] + TIE
    ]


def _day_text(doc: dict[str, Any]) -> str:
    day = _worse(doc, "worst_max")
    runs = sum(1 for r in doc["rows"] if r["strategy"] == PLANNER)
    if not day:
        return f"Its worst broker over the day is above doing nothing's (by more than half a point) in none of {runs} runs."
    return (
        f"Its worst broker over the day is above doing nothing's (by more than half a point) in {len(day)} of {runs} runs: "
        + "; ".join(f"{r['model']} seed {r['seed']}" for r in day)
        + "."
    )


def render_headline(doc: dict[str, Any]) -> str:
    worse = _worse(doc)
    return (
        f"Periodic jitter for a whole simulated day (one decision a minute, {MINUTES} in all) under every load "
        f"model, the held-out ones included; criterion at most {JITTER_MOVES_PER_DAY:g} moves per simulated day: {verdict(doc)}. "
        + (
            "The planner ends above doing nothing (by more than half a point) in no run."
            if not worse
            else f"The planner ends above doing nothing (by more than half a point) in {len(worse)} run(s): "
            + "; ".join(f"{r['model']} seed {r['seed']}" for r in worse)
            + "."
        )
        + " "
        + _day_text(doc)
    )


def render(doc: dict[str, Any]) -> str:
    rows = doc["rows"]
    models = list(dict.fromkeys(r["model"] for r in rows))
    strategies = list(dict.fromkeys(r["strategy"] for r in rows))
    seeds = sorted({r["seed"] for r in rows})
    held = set(doc.get("held_out", []))
    by: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        by.setdefault((r["model"], r["strategy"]), []).append(r)
    out = [
        f"Scenario `{SCENARIO}`, minute cadence, {MINUTES} decisions (one simulated day) per run, seeds {seeds}, "
        f"rate noise {doc['rate_noise']:.0%}; {doc['seconds']:.0f} s in all. Cells: per seed, moves in the day / "
        "final max (the worst broker's highest usage over the last 5 decisions); *day max*: the worst broker's "
        "highest usage over the day after the first decision, per seed.",
        "",
        f"Criterion, at most {JITTER_MOVES_PER_DAY:g} moves per simulated day: {verdict(doc)}.",
        "",
        "| load model | " + " | ".join(strategies) + " | day max: " + " / ".join(strategies) + " |",
        "|---|" + "---|" * len(strategies) + "---|",
    ]
    for m in models:
        cells = []
        peaks = []
        for st in strategies:
            runs = sorted(by.get((m, st), []), key=lambda r: r["seed"])
            cells.append(", ".join(f"{r['moves']} / {r['final_max']:.3f}" for r in runs) or "-")
            peaks.append(" ".join(f"{r['worst_max']:.2f}" for r in runs) or "-")
        name = f"{m} (held out)" if m in held else m
        out.append(f"| {name} | " + " | ".join(cells) + " | " + " / ".join(peaks) + " |")
    worse = _worse(doc)
    out += [
        "",
        "Ends above doing nothing on the same seed (by more than half a point): "
        + ("; ".join(f"{r['model']} seed {r['seed']} ({r['final_max']:.3f})" for r in worse) if worse else "none")
        + ". "
        + _day_text(doc),
    ]
    return "\n".join(out)


BLOCKS = {"jitter-day-report": render, "jitter-day-headline": render_headline}
TARGETS = {"jitter-day-report": [DOC], "jitter-day-headline": [ROOT / "README.md"]}

if __name__ == "__main__":
    raise SystemExit(main())
