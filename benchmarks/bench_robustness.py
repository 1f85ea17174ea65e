"""Benchmark: the planner off the balance benchmark's beaten track - other cluster sizes, loads, noise and approval delays.

Usage::

    .venv/bin/python benchmarks/bench_robustness.py --jobs 2     # writes docs/benchmarks/robustness.json + .md
    .venv/bin/python benchmarks/bench_robustness.py --held-out-sets --conditions utilization=1.3 utilization=1.6 --jobs 2
    # the held-out sets in modules of their own instead: robustness-held-out.json + .md
    .venv/bin/python benchmarks/bench_robustness.py --merge --cadences minute --jobs 2
    # re-run the planner's rows only (of the stored run, at the cadences named) and merge them into the stored report

Every scenario of the balance benchmark has 8 or 10 brokers at 40-60 % of their capacity, reports with
3 % noise, and (at the DAG's cadence) a 15-minute approval delay. A real cluster need not: this runs
the same closed loop (``bench_balance.run_one``: the cluster model, the do-no-harm guard, both
cadences) with **one condition changed at a time**:

* ``utilization=F``: the cluster's load is F times the scenario's own (0.5: a quiet cluster; 1.6: the
  brokers near Pulsar's overload threshold before anything moves);
* ``brokers=N``: N brokers instead of the scenario's 8 or 10 (scenarios whose events name brokers,
  ``scale-up``, ``scale-down``, ``rolling-restart``, keep theirs and are left out);
* ``noise=X``: CPU noise and rate noise of the reports both at X (the balance benchmark: 2-3 % CPU,
  3 % rates);
* ``delay=M``: M minutes between a plan and its execution at the DAG's cadence (the approval wait;
  the minute cadence applies at once, so only ``dag`` runs).

under load models the planner was tuned on and draws of the random family (``random-<k>``), next to
doing nothing on the same runs. Counted, per condition, as in the random-models report: runs where the
planner ends above doing nothing (by more than half a point), runs where it drives a broker above 85 %
while doing nothing stays below, and its moves on the steady scenario. Every such run is listed.

``--held-out-sets [K ...]`` runs the load models of the held-out sets that live in a module of their own (the third
on, written after this benchmark; ``bench_balance.OWN_MODULE_SETS``, all by default) instead of ``--models``, and
writes their own report (``docs/benchmarks/robustness-held-out.json`` + ``.md``), leaving the stored one as it ran.

``--merge`` re-runs only the planner's rows of the stored report (its conditions, models, scenarios and seeds; the
cadences ``--cadences`` names, both by default) and replaces them in it: doing nothing's rows, and the planner's at a
cadence not named, stay as the full run measured them, which the report's provenance line says. For a change to the
planner alone (doing nothing's code is the closed loop's, which it does not touch).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "src"))

import figures  # noqa: E402  (benchmarks/figures.py: JSON + marked blocks in the docs)
from bench_balance import OWN_MODULE_MODELS, OWN_MODULE_SETS  # noqa: E402  (held-out sets in modules of their own)
from bench_random_models import HOT, NO_ACTION, PLANNER, STEADY, TIE  # noqa: E402  (counted as that report counts)

from pulsar_rebalance.simulator.closed_loop import APPROVAL_DELAY_MIN  # noqa: E402
from pulsar_rebalance.simulator.scenarios import MAX_UTILIZATION  # noqa: E402

SCRIPT = "benchmarks/bench_robustness.py"
JSON = ROOT / "docs" / "benchmarks" / "robustness.json"
DOC = ROOT / "docs" / "benchmarks" / "robustness.md"
HELD_OUT_JSON = ROOT / "docs" / "benchmarks" / "robustness-held-out.json"
HELD_OUT_DOC = ROOT / "docs" / "benchmarks" / "robustness-held-out.md"
SKIPPED = ("large-zipf",)
"""100 brokers and 200,000 topics: minutes per run, measured in the balance benchmark itself."""
CONDITIONS = (
    "utilization=0.5",
    "utilization=1.3",
    "utilization=1.6",
    "brokers=3",
    "brokers=5",
    "brokers=20",
    "noise=0.1",
    "delay=55",
)
MODELS = (
    "linear",
    "convex-cpu",
    "heterogeneous-capacity",
    "tls-crypto",
    "random-185",
    "random-186",
    "random-187",
    "random-188",
)
"""Three the planner was tuned on, one held out (``tls-crypto``) and four draws of the random family."""
RATE_NOISE = 0.03
"""The balance benchmark's rate noise."""


def parse_condition(text: str) -> tuple[str, float]:
    """``utilization=1.3`` -> ("utilization", 1.3); ``ValueError`` names what is wrong."""
    key, sep, value = text.partition("=")
    if not sep or key not in ("utilization", "brokers", "noise", "delay"):
        raise ValueError(f"condition {text!r}: expected utilization=F, brokers=N, noise=X or delay=M")
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"condition {text!r}: {value!r} is not a number") from None
    limits = {"utilization": (0.0, MAX_UTILIZATION), "brokers": (2, 100), "noise": (0.0, 0.1), "delay": (0, 24 * 60)}
    lo, hi = limits[key]
    if not (lo < number <= hi if key == "utilization" else lo <= number <= hi):
        raise ValueError(f"condition {text!r}: {key} must be within {lo}-{hi}")
    if key in ("brokers", "delay") and number != int(number):
        raise ValueError(f"condition {text!r}: {key} must be a whole number")
    return key, number


def tasks_for(
    condition: str, models: list[str], seeds: list[int], cadences: list[str], scenarios: list[str] | None = None
) -> list[tuple[Any, ...]]:
    """The runs of one condition: (condition, scenario, model, cadence, strategy, seed)."""
    from pulsar_rebalance.simulator.scenarios import FIXED_SIZE, SCENARIOS

    key, _ = parse_condition(condition)
    scenarios = [
        s
        for s in (scenarios or [s for s in SCENARIOS if s not in SKIPPED])
        if not (key == "brokers" and s in FIXED_SIZE)
    ]
    cads = [c for c in cadences if not (key == "delay" and c == "minute")]
    return [
        (condition, sc, m, c, st, seed)
        for sc in scenarios
        for m in models
        for c in cads
        for seed in seeds
        for st in (PLANNER, NO_ACTION)
    ]


def _run(task: tuple[Any, ...]) -> dict[str, Any]:
    import logging

    from pulsar_rebalance.simulator.closed_loop import run_closed_loop
    from pulsar_rebalance.simulator.cluster import resolve_load_model
    from pulsar_rebalance.simulator.scenarios import build

    logging.getLogger("pulsar_rebalance").setLevel(logging.ERROR)
    condition, scenario, model, cadence, strategy, seed = task
    key, value = parse_condition(condition)
    noise = value if key == "noise" else None
    run = build(
        scenario,
        seed,
        # the held-out sets in a module of their own are in no registry: the balance benchmark resolves them
        load_model=OWN_MODULE_MODELS[model]() if model in OWN_MODULE_MODELS else resolve_load_model(model),
        noise=noise,
        rate_noise=value if key == "noise" else RATE_NOISE,
        brokers=int(value) if key == "brokers" else None,
        utilization=value if key == "utilization" else 1.0,
    )
    result = run_closed_loop(
        run,
        strategy,
        cadence=cadence,
        approval_delay_min=int(value) if key == "delay" else APPROVAL_DELAY_MIN,
    )
    s = result.summary()
    return {
        "condition": condition,
        "scenario": scenario,
        "model": model,
        "cadence": cadence,
        "strategy": strategy,
        "seed": seed,
        "final_max": round(s["final_max"], 5),
        "worst_max": round(s["worst_max"], 5),
        "moves": s["moves"],
        "ideal": round(s["ideal"], 5),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--conditions", nargs="*", default=list(CONDITIONS), help="each KEY=VALUE, changed alone")
    ap.add_argument("--models", nargs="*", default=list(MODELS), help="load models (names or random-<k>)")
    ap.add_argument(
        "--held-out-sets",
        nargs="*",
        metavar="K",
        choices=list(OWN_MODULE_SETS),
        help=f"the held-out sets in a module of their own instead of --models ({', '.join(OWN_MODULE_SETS)}; default "
        "all of them); writes robustness-held-out.json + .md",
    )
    ap.add_argument("--scenarios", nargs="*", default=None, help=f"default: every one but {', '.join(SKIPPED)}")
    ap.add_argument("--cadences", nargs="*", default=["minute", "dag"])
    ap.add_argument("--seeds", nargs="*", type=int, default=[1, 2])
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (this machine has 2 cores)")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument(
        "--merge",
        action="store_true",
        help="re-run the planner's rows of the stored report only (at --cadences) and merge them into it",
    )
    args = ap.parse_args(argv)
    from pulsar_rebalance.simulator.cluster import resolve_load_model
    from pulsar_rebalance.simulator.scenarios import SCENARIOS

    unknown = [s for s in args.scenarios or [] if s not in SCENARIOS]
    if unknown:
        ap.error(f"unknown scenario(s) {', '.join(unknown)}; known: {', '.join(SCENARIOS)}")

    if args.held_out_sets is not None:
        args.models = [m for key in args.held_out_sets or OWN_MODULE_SETS for m in OWN_MODULE_SETS[key][1]]
    try:
        for c in args.conditions:
            parse_condition(c)
        for m in args.models:
            if m not in OWN_MODULE_MODELS:
                resolve_load_model(m)
    except ValueError as exc:
        ap.error(str(exc))
    if any(c not in ("minute", "dag") for c in args.cadences):
        ap.error("--cadences: minute and/or dag")
    path, targets = (JSON, TARGETS) if args.held_out_sets is None else (HELD_OUT_JSON, HELD_OUT_TARGETS)
    stored: dict[str, Any] | None = None
    if args.merge:
        if args.no_write:
            ap.error("--merge writes the merged report: leave out --no-write")
        stored = json.loads(path.read_text(encoding="utf-8"))
        given = [
            f
            for f, flag in (
                ("--conditions", "conditions"),
                ("--models", "models"),
                ("--seeds", "seeds"),
                ("--scenarios", "scenarios"),
            )
            if argv_has(argv, f)
        ]
        if given:
            ap.error(f"--merge re-runs the stored run's own {', '.join(given)}: leave them out")
        args.conditions, args.models = stored["conditions"], stored["models"]
        args.seeds, args.scenarios = stored["seeds"], stored["scenarios"]
    tasks = [t for c in args.conditions for t in tasks_for(c, args.models, args.seeds, args.cadences, args.scenarios)]
    if args.merge:
        tasks = [t for t in tasks if t[4] == PLANNER]
    # the slow ones (20 brokers) first, so the pool ends together
    brokers = {c: n for c in args.conditions for k, n in [parse_condition(c)] if k == "brokers"}
    tasks.sort(key=lambda t: -brokers.get(t[0], 0))
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    progress = figures.Progress(len(tasks), every=50)
    with figures.LoadSampler() as load, ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for row in pool.map(_run, tasks, chunksize=4):
            rows.append(row)
            progress.tick()
    doc = {
        "meta": figures.meta(load),
        "conditions": args.conditions,
        "models": args.models,
        "seeds": args.seeds,
        "scenarios": args.scenarios,
        "fixed_size": sorted(_fixed()),
        "rows": rows,
        "seconds": round(time.perf_counter() - started, 1),
    }
    if args.held_out_sets is not None:
        doc["report"] = HELD_OUT_DOC.name
    if stored is not None:
        try:
            doc = merge_rows(stored, rows, args.cadences, doc["seconds"], doc["meta"])
        except ValueError as exc:
            ap.error(str(exc))
    print(render(doc))
    if not args.no_write:
        figures.write_json(path, doc)
        figures.update(SCRIPT, str(path.relative_to(ROOT)), doc, targets)
    return 0


def argv_has(argv: list[str] | None, flag: str) -> bool:
    """Whether ``flag`` was given on the command line (``argv`` or ``sys.argv``)."""
    return flag in (sys.argv[1:] if argv is None else argv)


def merge_rows(
    stored: dict[str, Any], rows: list[dict[str, Any]], cadences: list[str], seconds: float, meta: dict[str, Any]
) -> dict[str, Any]:
    """``stored`` with its planner rows at ``cadences`` replaced by ``rows`` (exactly those, every one re-run), and a
    provenance note naming both runs. ``ValueError`` when the re-run does not cover them."""
    key = lambda r: (r["condition"], r["scenario"], r["model"], r["cadence"], r["strategy"], r["seed"])  # noqa: E731
    replaced = {key(r) for r in stored["rows"] if r["strategy"] == PLANNER and r["cadence"] in cadences}
    new = {key(r): r for r in rows}
    if set(new) != replaced:
        missing = sorted(replaced - set(new))[:3]
        raise ValueError(f"the re-run does not cover the stored run's {PLANNER} rows: missing {missing}")
    doc = json.loads(json.dumps(stored))
    doc["rows"] = [new.get(key(r), r) for r in stored["rows"]]
    base = stored.get("merged", {}).get("base") or {
        "date": stored["meta"]["date"],
        "command": stored["meta"]["command"],
        "seconds": stored["seconds"],
    }
    kept = [c for c in ("minute", "dag") if c not in cadences]
    doc["merged"] = {"strategy": PLANNER, "cadences": list(cadences), "seconds": seconds, "base": base}
    doc["meta"] = {
        **meta,
        "note": f"{PLANNER}'s rows at the {' and '.join(cadences)} cadence re-run by this command ({round(seconds)} s) "
        f"and merged: every other row ({NO_ACTION}'s"
        + (f", and the planner's at the {' and '.join(kept)} cadence" if kept else "")
        + f") is from the full run of {base['date']} (`{base['command']}`)",
    }
    return doc


def _key(r: dict[str, Any]) -> tuple[Any, ...]:
    return (r["condition"], r["scenario"], r["model"], r["cadence"], r["seed"])


def findings(doc: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Per condition, the planner's runs paired with doing nothing's, and which of them fail what."""
    base = {_key(r): r for r in doc["rows"] if r["strategy"] == NO_ACTION}
    out: dict[str, list[dict[str, Any]]] = {c: [] for c in doc["conditions"]}
    for r in doc["rows"]:
        if r["strategy"] != PLANNER or _key(r) not in base:
            continue
        b = base[_key(r)]
        out[r["condition"]].append(
            {
                **r,
                "baseline_final": b["final_max"],
                "baseline_worst": b["worst_max"],
                "above": r["final_max"] > b["final_max"] + TIE,
                "pushed": r["worst_max"] > HOT >= b["worst_max"],
                "lower": r["final_max"] < b["final_max"] - TIE,
            }
        )
    return out


def _run_text(r: dict[str, Any]) -> str:
    return f"{r['scenario']} / {r['model']} / {r['cadence']} / seed {r['seed']}"


def render_headline(doc: dict[str, Any]) -> str:
    f = findings(doc)
    runs = [r for rs in f.values() for r in rs]
    above = sum(r["above"] for r in runs)
    pushed = sum(r["pushed"] for r in runs)
    return (
        f"Off the benchmark's beaten track (one condition changed at a time: "
        f"{', '.join(doc['conditions'])}; load models {', '.join(doc['models'])}), {len(runs)} runs of the planner: "
        f"it ends above doing nothing in **{above}**, drives a broker above {HOT:.0%} where doing nothing stays "
        f"below in **{pushed}** ([{doc.get('report', DOC.name)}]({doc.get('report', DOC.name)}) lists each)."
    )


def render(doc: dict[str, Any]) -> str:
    f = findings(doc)
    out = [
        f"Seeds {doc['seeds']}; load models {', '.join(doc['models'])}; "
        + (
            f"scenarios {', '.join(doc['scenarios'])}"
            if doc.get("scenarios")
            else f"every scenario but {', '.join(SKIPPED)}"
        )
        + f" (with `brokers=N`, not {', '.join(doc['fixed_size'])}); both cadences (with "
        f"`delay=M`, the DAG's only); otherwise the balance benchmark's conditions (rate noise {RATE_NOISE:.0%}, "
        f"approval delay {APPROVAL_DELAY_MIN} min); {doc['seconds']:.0f} s in all.",
        "",
        f"| condition | planner runs | ends above doing nothing (> +{TIE}) | a broker above {HOT:.0%} where doing "
        "nothing stays below | ends lower | moves in all | moves on the steady scenario |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for c, rs in f.items():
        steady = [r for r in rs if r["scenario"] == STEADY]
        out.append(
            f"| `{c}` | {len(rs)} | {sum(r['above'] for r in rs)} | {sum(r['pushed'] for r in rs)} | "
            f"{sum(r['lower'] for r in rs)} | {sum(r['moves'] for r in rs)} | "
            f"{sum(r['moves'] for r in steady)} ({sum(1 for r in steady if r['moves'])} of {len(steady)} runs moved) |"
        )
    bad = [(c, r) for c, rs in f.items() for r in rs if r["above"] or r["pushed"]]
    out.append("")
    if not bad:
        out.append("No run ends above doing nothing or drives a broker above 85 % where doing nothing stays below.")
    else:
        out.append(
            "Every run that ends above doing nothing or drives a broker above 85 % where doing nothing does not:"
        )
        out.append("")
        for c, r in bad:
            what = []
            if r["above"]:
                what.append(f"ends at {r['final_max']:.3f} against doing nothing's {r['baseline_final']:.3f}")
            if r["pushed"]:
                what.append(
                    f"its worst broker over the run {r['worst_max']:.3f} against doing nothing's {r['baseline_worst']:.3f}"
                    f" (ends at {r['final_max']:.3f} against {r['baseline_final']:.3f})"
                )
            out.append(f"* `{c}`: {_run_text(r)}: {'; '.join(what)}; {r['moves']} moves")
    moved = [(c, r) for c, rs in f.items() for r in rs if r["scenario"] == STEADY and r["moves"]]
    if moved:
        out.append("")
        out.append(
            "Moves on the steady scenario (doing nothing's final worst broker next to the planner's: a cluster "
            "that hidden per-broker speeds or a changed size leave unbalanced is not steady for doing nothing either):"
        )
        out.append("")
        for c, r in moved:
            out.append(
                f"* `{c}`: {_run_text(r)}: {r['moves']} moves, ends at {r['final_max']:.3f} against "
                f"{r['baseline_final']:.3f} (ideal {r['ideal']:.3f})"
            )
    return "\n".join(out)


def _fixed() -> frozenset[str]:
    from pulsar_rebalance.simulator.scenarios import FIXED_SIZE

    return FIXED_SIZE


BLOCKS = {
    "robustness-report": render,
    "robustness-headline": render_headline,
    "robustness-held-out-report": render,
    "robustness-held-out-headline": render_headline,
}
TARGETS = {"robustness-report": [DOC], "robustness-headline": [figures.BENCHMARKS_INDEX]}
HELD_OUT_TARGETS = {
    "robustness-held-out-report": [HELD_OUT_DOC],
    "robustness-held-out-headline": [figures.BENCHMARKS_INDEX],
}

if __name__ == "__main__":
    raise SystemExit(main())
