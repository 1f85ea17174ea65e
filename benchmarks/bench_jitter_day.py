"""Benchmark: how often does the GlobalPlanner move in a simulated day of periodic jitter?

Usage::

    .venv/bin/python benchmarks/bench_jitter_day.py --jobs 2     # writes docs/benchmarks/jitter-day.json + .md
    .venv/bin/python benchmarks/bench_jitter_day.py --random 1-8 213-220 --jobs 2   # jitter-day-random.json + .md
    .venv/bin/python benchmarks/bench_jitter_day.py --held-out-sets --jobs 2   # jitter-day-held-out.json + .md

The criterion is "at most 2 moves per simulated day under periodic jitter". The balance benchmark
(``bench_balance.py``) runs ``periodic-jitter`` at the minute cadence for one simulated hour, so a single
corrective move there reads as 24 a day. This benchmark measures the criterion as it is written: the
same scenario (an on/off consumer adds 40 % of a NIC to one bundle's out-traffic, flipping every other
cycle), the same closed loop (the cluster model, the do-no-harm guard, 3 % noise on the reported rates),
one decision per simulated minute for a whole simulated day (1,440 decisions), under every default load
model and the first two held-out sets. Next to the planner: doing nothing, and Pulsar's default shedder
(AvgShedder), on the same runs. Counted: moves in the day, the worst broker at the end (highest usage over
the last 5 decisions) and over the day.

``--random K-L ...`` runs draws of the random load-model family (``simulator/random_models.py``) instead
and writes its own report (``docs/benchmarks/jitter-day-random.json`` + ``.md``): the random-models
benchmark runs them for one simulated hour at the minute cadence like the balance benchmark, so there,
too, one corrective move reads as 24 a day. Under per-broker speeds or background CPU the reports do not
explain, doing nothing is not balanced on this scenario either; a run's moves are therefore also counted
after its first simulated hour (a one-off rebalance at the start against moving back and forth with the
jitter), next to how far above the ideal doing nothing ends.

``--held-out-sets [K ...]`` runs the held-out sets that live in a module of their own (the third on, which were
written after this benchmark; ``bench_balance.OWN_MODULE_SETS``, all of them by default) and writes their own report
(``docs/benchmarks/jitter-day-held-out.json`` + ``.md``), so the stored default report is left as it ran.
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
from bench_balance import (  # noqa: E402  (the criteria's one source; the held-out sets in modules of their own)
    JITTER_MOVES_PER_DAY,
    NO_ACTION,
    OWN_MODULE_MODELS,
    OWN_MODULE_SETS,
    PLANNER,
    TIE,
)

SCRIPT = "benchmarks/bench_jitter_day.py"
JSON = ROOT / "docs" / "benchmarks" / "jitter-day.json"
DOC = ROOT / "docs" / "benchmarks" / "jitter-day.md"
RANDOM_JSON = ROOT / "docs" / "benchmarks" / "jitter-day-random.json"
RANDOM_DOC = ROOT / "docs" / "benchmarks" / "jitter-day-random.md"
HELD_OUT_JSON = ROOT / "docs" / "benchmarks" / "jitter-day-held-out.json"
HELD_OUT_DOC = ROOT / "docs" / "benchmarks" / "jitter-day-held-out.md"
FIRST_HOUR = 60
"""Decisions (minutes) counted as the start of a run: moves after them are the ones made under the jitter."""
SCENARIO = "periodic-jitter"
STRATEGIES = (PLANNER, NO_ACTION, "AvgShedder")
MINUTES = 1440


def _run(task: tuple[str, str, int, float]) -> dict[str, Any]:
    from pulsar_rebalance.simulator.closed_loop import run_closed_loop
    from pulsar_rebalance.simulator.cluster import resolve_load_model
    from pulsar_rebalance.simulator.scenarios import build

    logging.getLogger("pulsar_rebalance").setLevel(logging.ERROR)
    model, strategy, seed, rate_noise = task
    started = time.perf_counter()
    # the held-out sets in a module of their own are in no registry: the balance benchmark resolves them
    load_model = OWN_MODULE_MODELS[model]() if model in OWN_MODULE_MODELS else resolve_load_model(model)
    run = build(SCENARIO, seed, load_model=load_model, rate_noise=rate_noise)
    result = run_closed_loop(run, strategy, decisions=MINUTES)
    s = result.summary()
    return {
        "model": model,
        "strategy": strategy,
        "seed": seed,
        "moves": s["moves"],
        "moves_after_first_hour": sum(result.moves_per_cycle[FIRST_HOUR:]),
        "moves_per_day": s["moves_per_day"],
        "final_max": s["final_max"],
        "worst_max": s["worst_max"],
        "ideal": s["ideal"],
        "seconds": round(time.perf_counter() - started, 1),
    }


def parse_ranges(specs: list[str]) -> list[str]:
    """``["1-8", "213"]`` -> ``["random-1", ..., "random-8", "random-213"]``; ``ValueError`` names a bad one."""
    from pulsar_rebalance.simulator.random_models import NAME

    names: list[str] = []
    for spec in specs:
        first, _, last = spec.partition("-")
        try:
            lo, hi = int(first), int(last or first)
        except ValueError:
            raise ValueError(f"--random: {spec!r} is not K or K-L (draws of the random family, e.g. 213-220)") from None
        if lo < 1 or hi < lo:
            raise ValueError(f"--random: {spec!r} is not a range K-L with 1 <= K <= L")
        if not NAME.fullmatch(f"random-{hi}"):
            raise ValueError(f"--random: {spec!r} goes past the family's last draw, random-999999")
        names += [f"random-{k}" for k in range(lo, hi + 1) if f"random-{k}" not in names]
    return names


def main(argv: list[str] | None = None) -> int:
    from pulsar_rebalance.simulator.held_out_models import HELD_OUT_MODELS, HELD_OUT_MODELS_2
    from pulsar_rebalance.simulator.load_models import LOAD_MODELS

    known = [*LOAD_MODELS, *HELD_OUT_MODELS, *HELD_OUT_MODELS_2]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--models", nargs="*", default=known, help="default: the five load models and the first two held-out sets"
    )
    ap.add_argument(
        "--random",
        nargs="+",
        metavar="K-L",
        help="draws of the random load-model family instead (e.g. 1-8 213-220); writes jitter-day-random.json + .md",
    )
    ap.add_argument(
        "--held-out-sets",
        nargs="*",
        metavar="K",
        choices=list(OWN_MODULE_SETS),
        help=f"the held-out sets in a module of their own instead ({', '.join(OWN_MODULE_SETS)}; default all of them); "
        "writes jitter-day-held-out.json + .md",
    )
    ap.add_argument("--strategies", nargs="*", default=list(STRATEGIES))
    ap.add_argument("--seeds", nargs="*", type=int, default=[1, 2, 3])
    ap.add_argument("--rate-noise", type=float, default=0.03, help="noise on reported rates, 0-0.1 (default 3 %%)")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (this machine has 2 cores)")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    unknown = [m for m in args.models if m not in known]
    if unknown:
        ap.error(f"--models: unknown load model(s) {', '.join(unknown)}; known: {', '.join(known)}")
    if args.random is not None and args.held_out_sets is not None:
        ap.error("--random and --held-out-sets write different reports: one at a time")
    if args.held_out_sets is not None:
        args.models = [m for key in args.held_out_sets or OWN_MODULE_SETS for m in OWN_MODULE_SETS[key][1]]
    if args.random is not None:
        try:
            args.models = parse_ranges(args.random)
        except ValueError as e:
            ap.error(str(e))
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
        "held_out": [] if args.random else [*HELD_OUT_MODELS, *HELD_OUT_MODELS_2, *OWN_MODULE_MODELS],
        "seconds": round(time.perf_counter() - started, 1),
    }
    if args.held_out_sets is not None:
        doc["held_out_sets"] = sorted({key for key, (_, ms) in OWN_MODULE_SETS.items() if set(ms) & set(args.models)})
    print(render_random(doc) if args.random else render(doc))
    if not args.no_write:
        path, targets = (
            (RANDOM_JSON, RANDOM_TARGETS)
            if args.random
            else (HELD_OUT_JSON, HELD_OUT_TARGETS)
            if args.held_out_sets is not None
            else (JSON, TARGETS)
        )
        figures.write_json(path, doc)
        figures.update(SCRIPT, str(path.relative_to(ROOT)), doc, targets)
    return 0


def verdict(doc: dict[str, Any]) -> str:
    """The criterion's verdict on the planner's runs, with every run that breaks it."""
    runs = [r for r in doc["rows"] if r["strategy"] == PLANNER]
    over = [r for r in runs if r["moves_per_day"] > JITTER_MOVES_PER_DAY + 1e-9]
    if not runs:
        return "not measured (the planner was not run)"
    most = max(runs, key=lambda r: r["moves_per_day"])
    if not over and not most["moves_per_day"]:
        return f"**met** in all {len(runs)} day-long runs (no move in any)"
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


def _closing(doc: dict[str, Any]) -> str:
    """Where the planner ends above doing nothing, and where its worst broker over the day is above."""
    worse = _worse(doc)
    return (
        "Ends above doing nothing on the same seed (by more than half a point): "
        + ("; ".join(f"{r['model']} seed {r['seed']} ({r['final_max']:.3f})" for r in worse) if worse else "none")
        + ". "
        + _day_text(doc)
    )


def _headline_tail(doc: dict[str, Any]) -> str:
    """The headlines' last sentences: the runs the planner ends above doing nothing, and over the day."""
    worse = _worse(doc)
    runs = (
        "no run."
        if not worse
        else f"{len(worse)} run(s): " + "; ".join(f"{r['model']} seed {r['seed']}" for r in worse) + "."
    )
    return f"The planner ends above doing nothing (by more than half a point) in {runs} {_day_text(doc)}"


def render_headline(doc: dict[str, Any]) -> str:
    return (
        f"Periodic jitter for a whole simulated day (one decision a minute, {MINUTES} in all) under every load "
        f"model, the held-out ones included; criterion at most {JITTER_MOVES_PER_DAY:g} moves per simulated day: {verdict(doc)}. "
        + _headline_tail(doc)
    )


def render_held_out_headline(doc: dict[str, Any]) -> str:
    models = list(dict.fromkeys(r["model"] for r in doc["rows"]))
    sets = [str(k) for k in doc.get("held_out_sets", [])]
    named = f"set {sets[0]}" if len(sets) == 1 else f"sets {', '.join(sets[:-1])} and {sets[-1]}"
    return (
        f"Periodic jitter for a whole simulated day (one decision a minute, {MINUTES} in all) under the {len(models)} "
        f"load models of the held-out {named} ({', '.join(models)}); criterion at most {JITTER_MOVES_PER_DAY:g} moves "
        f"per simulated day: {verdict(doc)}. " + _headline_tail(doc)
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
    out += ["", _closing(doc)]
    return "\n".join(out)


def _over(doc: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """The planner's runs above the criterion, each with doing nothing's run on the same model and seed."""
    na = {(r["model"], r["seed"]): r for r in doc["rows"] if r["strategy"] == NO_ACTION}
    return [
        (r, na.get((r["model"], r["seed"])))
        for r in doc["rows"]
        if r["strategy"] == PLANNER and r["moves_per_day"] > JITTER_MOVES_PER_DAY + 1e-9
    ]


def _after_text(doc: dict[str, Any]) -> str:
    """The planner's moves after the first simulated hour: those made under the jitter, not the start's rebalance."""
    runs = [r for r in doc["rows"] if r["strategy"] == PLANNER]
    later = [r for r in runs if r["moves_after_first_hour"]]
    total = sum(r["moves_after_first_hour"] for r in runs)
    text = f"After the first simulated hour the planner moves {total} bundle(s) in all"
    if not later:
        return text + f", in none of {len(runs)} runs."
    most = max(later, key=lambda r: r["moves_after_first_hour"])
    return (
        text + f", in {len(later)} of {len(runs)} runs (at most {most['moves_after_first_hour']} in a day: "
        f"{most['model']}, seed {most['seed']})."
    )


def _over_text(doc: dict[str, Any]) -> str:
    over = _over(doc)
    if not over:
        return ""
    parts = []
    for r, na in over:
        base = f", doing nothing ends at {na['final_max']:.3f}" if na is not None else ""
        parts.append(
            f"{r['model']} seed {r['seed']}: {r['moves']} moves, {r['moves'] - r['moves_after_first_hour']} in the first "
            f"hour, final {r['final_max']:.3f}{base} (ideal {r['ideal']:.3f})"
        )
    return "Where it moves more than that: " + "; ".join(parts) + "."


def render_random_headline(doc: dict[str, Any]) -> str:
    models = list(dict.fromkeys(r["model"] for r in doc["rows"]))
    return (
        f"Periodic jitter for a whole simulated day (one decision a minute) under {len(models)} draws of the random "
        f"load-model family ({', '.join(models)}); criterion at most {JITTER_MOVES_PER_DAY:g} moves per simulated day: "
        f"{verdict(doc)}. {_after_text(doc)} {_headline_tail(doc)}"
    )


def render_random(doc: dict[str, Any]) -> str:
    rows = doc["rows"]
    models = list(dict.fromkeys(r["model"] for r in rows))
    seeds = sorted({r["seed"] for r in rows})
    by = {(r["model"], r["strategy"], r["seed"]): r for r in rows}
    out = [
        f"Scenario `{SCENARIO}`, minute cadence, {MINUTES} decisions (one simulated day) per run, seeds {seeds}, "
        f"rate noise {doc['rate_noise']:.0%}; {doc['seconds']:.0f} s in all. Cells per seed: the planner's moves in "
        f"the day (after the first hour) / its final max (the worst broker's highest usage over the last 5 "
        "decisions); doing nothing's final max; the ideal; *day max*: the worst broker's highest usage over the "
        "day after the first decision, the planner's / doing nothing's.",
        "",
        f"Criterion, at most {JITTER_MOVES_PER_DAY:g} moves per simulated day: {verdict(doc)}. {_after_text(doc)}",
        "",
        "| load model | seed | GlobalPlanner: moves (after 1 h) / final | no-action final | ideal | day max |",
        "|---|---:|---|---:|---:|---|",
    ]
    for m in models:
        for seed in seeds:
            p, na = by.get((m, PLANNER, seed)), by.get((m, NO_ACTION, seed))
            if p is None:
                continue
            out.append(
                f"| {m} | {seed} | {p['moves']} ({p['moves_after_first_hour']}) / {p['final_max']:.3f} | "
                + (f"{na['final_max']:.3f}" if na else "-")
                + f" | {p['ideal']:.3f} | {p['worst_max']:.2f} / "
                + (f"{na['worst_max']:.2f}" if na else "-")
                + " |"
            )
    out += ["", _over_text(doc) or "No run moves more than the criterion allows.", "", _closing(doc)]
    return "\n".join(out)


BLOCKS = {
    "jitter-day-report": render,
    "jitter-day-headline": render_headline,
    "jitter-day-random-report": render_random,
    "jitter-day-random-headline": render_random_headline,
    "jitter-day-held-out-report": render,
    "jitter-day-held-out-headline": render_held_out_headline,
}
TARGETS = {"jitter-day-report": [DOC], "jitter-day-headline": [figures.BENCHMARKS_INDEX]}
RANDOM_TARGETS = {
    "jitter-day-random-report": [RANDOM_DOC],
    "jitter-day-random-headline": [figures.BENCHMARKS_INDEX],
}

HELD_OUT_TARGETS = {
    "jitter-day-held-out-report": [HELD_OUT_DOC],
    "jitter-day-held-out-headline": [figures.BENCHMARKS_INDEX],
}

if __name__ == "__main__":
    raise SystemExit(main())
