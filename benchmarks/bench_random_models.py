"""Benchmark: the planner on load models drawn at random, next to doing nothing and Pulsar's shedders.

Usage::

    .venv/bin/python benchmarks/bench_random_models.py --jobs 2   # writes docs/benchmarks/random-models.json + .md
    .venv/bin/python benchmarks/bench_random_models.py --render   # redraws the plot and blocks from the JSON
    .venv/bin/python benchmarks/bench_random_models.py --merge --jobs 2   # after a planner-only change
    .venv/bin/python benchmarks/bench_random_models.py --unseen --first K --jobs 2   # draws never run before
    .venv/bin/python benchmarks/bench_random_models.py --checks-from-git   # rebuilds the ledger of checks
    .venv/bin/python benchmarks/bench_random_models.py --first K --no-guard --no-write --jobs 2   # decide alone

``--unseen`` (with ``--first`` past every draw run so far) writes its own report,
``docs/benchmarks/random-models-unseen.json`` + ``.md`` + ``.png`` and the ``random-unseen-headline`` block
of ``docs/benchmarks/README.md``, and leaves the stored ``random-models`` report alone: the record of the planner
on cost models nobody had run it on when it was measured (after that run they are seen; the next check takes the
next ``--first``). It refuses a ``--first`` not past every draw run so far. Each check's report replaces the last
one, so a summary of
every check is kept in a ledger, ``docs/benchmarks/random-models-unseen-checks.json`` (one row per check,
appended by ``--unseen``; its blocks: the table in ``random-models-unseen.md`` and the README's
``random-unseen-checks-headline``, which counts the checks of the last ten with a planner run above doing
nothing and names the next never-run draw). ``--checks-from-git`` rebuilds the ledger from every committed
version of the unseen report (each range as first committed), for a ledger lost or edited by hand.

``--merge`` re-runs only the planner's runs (a quarter of them) and merges them into the stored report;
it refuses, naming the files, when a source the runs import changed outside ``core/planner/`` (the other
strategies' stored runs would be stale) or the stored run had other models, scenarios, cadences or seeds.

``--no-guard`` (with ``--no-write``) applies each strategy's plans as ``decide`` returns them, without the
do-no-harm guard that ``plan_split`` and every stored run apply: what a harness driving ``decide`` alone sees.

A real cluster's cost per message is unknown. The balance benchmark's five load models are the ones the
planner was tuned on and its held-out sets are two more guesses each; this one draws ``--models N``
load models from a seeded family (``simulator/random_models.py``: NIC size, per-message in / out and
per-byte costs from 0.2x to 5x, idle CPU, a queueing curve, capacity mixes, per-broker speeds and
background CPU the reports do not explain), the same ones on every machine, and runs every scenario but
``large-zipf`` (100 brokers: too slow for this sweep) at both cadences of ``bench_balance.py`` (same
``run_one``: the cluster model, the do-no-harm guard, noisy reports) for each strategy. Nothing was
tuned on them: the family was written, run once, and reported as it came out.

Counted per run (one seed), not per mean: whether a strategy ends above doing nothing (final max more
than half a point above no-action's on the same seed), whether it drives a broker above 85 % where doing
nothing stays below, and its moves; on ``steady-with-noise`` where doing nothing's worst broker stays
within 5 points of the ideal (a model with hidden speeds or background CPU unbalances the start), any
move is churn.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "src"))

import bench_balance  # noqa: E402  (run_one, the source digests and the merge rule)
import figures  # noqa: E402  (benchmarks/figures.py: JSON + marked blocks in the docs)

SCRIPT = "benchmarks/bench_random_models.py"
JSON = ROOT / "docs" / "benchmarks" / "random-models.json"
DOC = ROOT / "docs" / "benchmarks" / "random-models.md"
PNG = ROOT / "docs" / "benchmarks" / "random-models.png"
UNSEEN_JSON = ROOT / "docs" / "benchmarks" / "random-models-unseen.json"
UNSEEN_DOC = ROOT / "docs" / "benchmarks" / "random-models-unseen.md"
UNSEEN_PNG = ROOT / "docs" / "benchmarks" / "random-models-unseen.png"
CHECKS_JSON = ROOT / "docs" / "benchmarks" / "random-models-unseen-checks.json"
CHECKS_PNG = ROOT / "docs" / "benchmarks" / "random-models-unseen-checks.png"
LAST_CHECKS = 10
"""The README counts the checks among the last this many in which the planner ended a run above doing nothing."""
SEEN_THROUGH = 160
"""Every draw up to ``random-160`` was run before the ledger's first check (random-161): ``--unseen`` starts past
the highest draw run so far, this or the ledger's last (checks in between that were not stored, as random-177 to
random-184, are below it too)."""
CORE_SOURCES = figures.CORE_SOURCES
"""The decision core: checks whose reports record the same digests for it ran the same decision code."""
PLANNER = "GlobalPlanner"
NO_ACTION = "no-action"
STRATEGIES = (PLANNER, NO_ACTION, "AvgShedder", "ThresholdShedder")
SKIPPED_SCENARIOS = ("large-zipf",)
TIE = 0.005
"""Ends above doing nothing: more than this above no-action's final max on the same seed."""
HOT = 0.85
STEADY = "steady-with-noise"


def _run(task: tuple[str, str, str, str, int, bool]) -> dict[str, Any]:
    from pulsar_rebalance.simulator.random_models import random_model

    scenario, model, cadence, strategy, seed, guard = task
    drawn = random_model(model)  # an instance: the named load models' registry does not list the family
    task_ = (scenario, drawn, cadence, strategy, seed, None, 0.03, 15, 0.5, None, guard)
    _, summary, *_ = bench_balance.run_one(task_)  # type: ignore[arg-type]
    return {
        "scenario": scenario,
        "model": model,
        "cadence": cadence,
        "strategy": strategy,
        "seed": seed,
        "final_max": round(summary["final_max"], 5),
        "worst_max": round(summary["worst_max"], 5),
        "moves": summary["moves"],
        "plans": summary["plans"],
        "ideal": round(summary["ideal"], 5),
        "sim_minutes": summary["sim_minutes"],
    }


def main(argv: list[str] | None = None) -> int:
    from pulsar_rebalance.simulator.random_models import RandomCostModel
    from pulsar_rebalance.simulator.scenarios import SCENARIOS

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", type=int, default=8, help="draw random-1 .. random-N (default 8)")
    ap.add_argument("--first", type=int, default=1, help="the first model's index (default 1)")
    ap.add_argument("--scenarios", nargs="*", default=[s for s in SCENARIOS if s not in SKIPPED_SCENARIOS])
    ap.add_argument("--strategies", nargs="*", default=list(STRATEGIES))
    ap.add_argument("--cadences", nargs="*", default=["minute", "dag"])
    ap.add_argument("--seeds", nargs="*", type=int, default=[1, 2])
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (this machine has 2 cores)")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument(
        "--no-guard",
        action="store_true",
        help="run the plans as strategies make them, without the do-no-harm guard (with --no-write only: "
        "what a harness driving `decide` alone sees)",
    )
    ap.add_argument("--render", action="store_true", help="run nothing: redraw the plot and blocks from the JSON")
    ap.add_argument(
        "--merge", action="store_true", help="re-run only the planner and merge into the stored report (see above)"
    )
    ap.add_argument(
        "--unseen",
        action="store_true",
        help="draws never run before: write the random-models-unseen report instead of random-models (see above)",
    )
    ap.add_argument(
        "--checks-from-git",
        action="store_true",
        help="run nothing: rebuild the ledger of unseen checks from the unseen report's committed versions",
    )
    args = ap.parse_args(argv)
    json_path, png, targets = (UNSEEN_JSON, UNSEEN_PNG, UNSEEN_TARGETS) if args.unseen else (JSON, PNG, TARGETS)
    if args.checks_from_git:
        write_ledger(ledger_doc(checks_from_git()))
        return 0
    if args.render:
        doc = json.loads(json_path.read_text(encoding="utf-8"))
        plot(doc, png)
        figures.update(SCRIPT, _rel(json_path), doc, targets)
        if args.unseen and CHECKS_JSON.exists():
            write_ledger(json.loads(CHECKS_JSON.read_text(encoding="utf-8")))
        return 0
    if args.unseen and args.merge:
        ap.error("--unseen reports draws run once, as they came out: it does not merge")
    if args.unseen and args.no_write:
        ap.error("--unseen records every check in the ledger: with --no-write its draws would be run but not recorded")
    if args.no_guard and not args.no_write:
        ap.error("--no-guard measures what the stored reports do not: pass --no-write too")
    if NO_ACTION not in args.strategies or PLANNER not in args.strategies:
        ap.error(f"--strategies must include {PLANNER} and {NO_ACTION} (the baseline)")
    unknown = [s for s in args.scenarios if s not in SCENARIOS]
    if unknown:
        ap.error(f"unknown scenario(s) {', '.join(unknown)}; known: {', '.join(SCENARIOS)}")
    if args.models < 1 or args.first < 1:
        ap.error("--models and --first must be at least 1")
    names = [f"random-{k}" for k in range(args.first, args.first + args.models)]
    first_unseen = next_unseen() if args.unseen else 0
    if args.first < first_unseen:
        named = seen_draws(names)
        ap.error(
            f"--unseen: random-{args.first} to random-{args.first + args.models - 1} are not past every draw run so "
            f"far (random-{first_unseen - 1})"
            + (": " + "; ".join(f"{n} ({where})" for n, where in named.items()) if named else "")
            + f"; the next never-run draw: --first {first_unseen}"
        )
    models = {n: RandomCostModel(k).description for k, n in enumerate(names, args.first)}
    run_args = {"models": names, "scenarios": args.scenarios, "cadences": args.cadences, "seeds": args.seeds}
    digests = bench_balance.source_digests()
    stored: dict[str, Any] | None = None
    if args.merge:
        if not JSON.exists():
            ap.error(f"--merge: {JSON} does not exist; run the full benchmark first")
        stored = json.loads(JSON.read_text(encoding="utf-8"))
        problems = merge_problems(stored, run_args, digests)
        if problems:
            print(f"cannot merge into {JSON}:", file=sys.stderr)
            for problem in problems:
                print(f"  - {problem}", file=sys.stderr)
            return 2
    strategies = [PLANNER] if args.merge else args.strategies
    tasks = [
        (s, m, c, st, seed, not args.no_guard)
        for m in names
        for s in args.scenarios
        for c in args.cadences
        for seed in args.seeds
        for st in strategies
    ]
    print(f"{len(tasks)} runs on {args.jobs} worker(s)", file=sys.stderr, flush=True)
    load = figures.LoadSampler()
    load.__enter__()
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    progress = figures.Progress(len(tasks))
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for row in pool.map(_run, tasks):
            rows.append(row)
            progress.tick()
    load.__exit__(None, None, None)
    doc: dict[str, Any] = {
        "meta": figures.meta(load),
        "models": models,
        "rows": rows,
        "seconds": round(time.perf_counter() - started, 1),
        "args": run_args,
        "sources": digests,
    }
    if args.unseen:
        doc["unseen"] = True
    if stored is not None:
        doc = merge_doc(stored, doc)
    print(render(doc))
    if not args.no_write:
        figures.write_json(json_path, doc)
        plot(doc, png)
        figures.update(SCRIPT, _rel(json_path), doc, targets)
        if args.unseen:
            write_ledger(ledger_doc([*load_checks(), check_summary(doc)]))
    return 0


def _rel(path: Path) -> str:
    """``path`` as the docs' markers name it: relative to the repository (as given when it is elsewhere)."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def merge_problems(stored: dict[str, Any], run_args: dict[str, Any], digests: dict[str, str]) -> list[str]:
    """Why this run's planner rows cannot replace ``stored``'s (empty: they can): same models, scenarios,
    cadences and seeds, and no source the runs import changed outside the planner's (see
    ``bench_balance.merge_problems``, whose rule this is)."""
    if "sources" not in stored or "args" not in stored:
        return ["the stored run has no source digests (it predates --merge): run the full benchmark once"]
    problems = [
        f"{key}: the stored run had {stored['args'].get(key)!r}, this command {value!r}"
        for key, value in run_args.items()
        if stored["args"].get(key) != value
    ]
    unreferenced = bench_balance.unreferenced_sources(Path(bench_balance.__file__), Path(__file__))
    stale = bench_balance.stale_sources(stored["sources"], digests, unreferenced)
    if stale:
        problems.append(stale)
    return problems


def merge_doc(stored: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """``stored`` with its planner rows replaced by ``new``'s (the same runs), ``new``'s meta and digests, and
    provenance naming both runs."""
    key = lambda r: (r["model"], r["scenario"], r["cadence"], r["seed"])  # noqa: E731
    fresh = {key(r): r for r in new["rows"]}
    old = [key(r) for r in stored["rows"] if r["strategy"] == PLANNER]
    if sorted(old) != sorted(fresh):
        raise ValueError("the re-run does not cover the stored run's planner runs")
    rows = [fresh[key(r)] if r["strategy"] == PLANNER else r for r in stored["rows"]]
    base = stored.get("merged", {}).get("base") or {
        "date": stored["meta"]["date"],
        "command": stored["meta"]["command"],
        "seconds": stored["seconds"],
    }
    note = (
        f"{PLANNER} re-run by this command ({new['seconds']:.0f} s) and merged: the other strategies' runs are "
        f"from the full run of {base['date']} (`{base['command']}`), whose sources differ from these only in "
        f"the planner's ({bench_balance.PLANNER_SOURCES}) and in modules nothing the runs execute imports"
    )
    return {
        **new,
        "meta": {**new["meta"], "note": note},
        "rows": rows,
        "seconds": base["seconds"],
        "merged": {"seconds": new["seconds"], "base": base},
    }


# ---------------------------------------------------------------- verdicts


def _baseline(rows: Sequence[dict[str, Any]]) -> dict[tuple[str, str, str, int], dict[str, Any]]:
    return {(r["scenario"], r["model"], r["cadence"], r["seed"]): r for r in rows if r["strategy"] == NO_ACTION}


def _key(r: dict[str, Any]) -> tuple[str, str, str, int]:
    return (r["scenario"], r["model"], r["cadence"], r["seed"])


BALANCED = 0.05
"""A steady run counts as balanced where doing nothing's worst broker stays within this of the ideal: a model
with hidden speeds or background CPU leaves a start the scenarios balance by the standard broker's measure
unbalanced, and moving there is no churn."""


def _balanced(r: dict[str, Any], base: dict[tuple[str, str, str, int], dict[str, Any]]) -> bool:
    b = base[_key(r)]
    return bool(b["worst_max"] <= b["ideal"] + BALANCED)


def verdicts(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per strategy: runs, runs above no-action, runs with a broker hot where no-action is not, the largest
    excess (and its run), moves in all, moves on a balanced steady cluster."""
    rows = doc["rows"]
    base = _baseline(rows)
    out: dict[str, dict[str, Any]] = {}
    for st in dict.fromkeys(r["strategy"] for r in rows):
        if st == NO_ACTION:
            continue
        mine = [r for r in rows if r["strategy"] == st and _key(r) in base]
        worse = [r for r in mine if r["final_max"] > base[_key(r)]["final_max"] + TIE]
        hot = [r for r in mine if r["worst_max"] > HOT and base[_key(r)]["worst_max"] <= HOT]
        excess = max(mine, key=lambda r: r["final_max"] - base[_key(r)]["final_max"], default=None)
        steady = [r for r in mine if r["scenario"] == STEADY and _balanced(r, base)]
        out[st] = {
            "runs": len(mine),
            "worse": worse,
            "hot": hot,
            "excess": excess,
            "excess_by": excess["final_max"] - base[_key(excess)]["final_max"] if excess else 0.0,
            "moves": sum(r["moves"] for r in mine),
            "steady_runs": len(steady),
            "steady_moved": [r for r in steady if r["moves"]],
            "below": sum(1 for r in mine if r["final_max"] < base[_key(r)]["final_max"] - TIE),
        }
    return out


BEHIND = 0.03
"""The planner is behind where the best of Pulsar's shedders on the same run ends more than this lower."""


def behind(doc: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any], dict[str, Any]]]:
    """(planner run, best Pulsar run, no-action run) where the best of Pulsar's shedders ends more than
    :data:`BEHIND` below the planner: never a criterion (the planner is not worse than doing nothing there),
    but where it does too little. Largest gap first."""
    rows = doc["rows"]
    base = _baseline(rows)
    by: dict[tuple[str, str, str, int], list[dict[str, Any]]] = {}
    for r in rows:
        if r["strategy"] not in (PLANNER, NO_ACTION):
            by.setdefault(_key(r), []).append(r)
    out = []
    for r in rows:
        if r["strategy"] != PLANNER or not by.get(_key(r)) or _key(r) not in base:
            continue
        best = min(by[_key(r)], key=lambda x: x["final_max"])
        if best["final_max"] < r["final_max"] - BEHIND:
            out.append((r, best, base[_key(r)]))
    return sorted(out, key=lambda t: t[1]["final_max"] - t[0]["final_max"])


def _where(r: dict[str, Any]) -> str:
    return f"{r['scenario']} / {r['model']} / {r['cadence']} / seed {r['seed']}"


RUN_MINUTES = {"minute": 60, "dag": 48 * 60}
"""Simulated minutes of a run per cadence, for rows stored before they carried ``sim_minutes``: every
scenario this benchmark runs is 60 one-minute cycles, or 48 hourly decisions at the dag cadence."""


def criteria(doc: dict[str, Any]) -> list[tuple[str, str, str, list[dict[str, Any]]]]:
    """The balance benchmark's "Done when" criteria (:func:`bench_balance.done_when`: not worse, no hot
    broker, steady, jitter, moves), per scenario x model x cadence with seeds paired, on these runs:
    ``(scenario, model, cadence, criteria)``. Pulsar's strategies here are AvgShedder and ThresholdShedder
    only, so *moves* compares with the closer of those two. *steady* is the strict criterion (0 moves),
    also under a model whose hidden speeds leave doing nothing unbalanced (the per-run table above
    exempts those)."""
    cells: dict[tuple[str, str, str], dict[str, list[dict[str, Any]]]] = {}
    for r in doc["rows"]:
        row = dict(r)
        minutes = row.get("sim_minutes") or RUN_MINUTES[row["cadence"]]
        row["moves_per_day"] = row["moves"] * 24 * 60 / minutes
        cells.setdefault((r["scenario"], r["model"], r["cadence"]), {}).setdefault(r["strategy"], []).append(row)
    return [(sc, m, c, bench_balance.done_when(sc, by)) for (sc, m, c), by in cells.items()]


def criteria_counts(crit: list[tuple[str, str, str, list[dict[str, Any]]]]) -> tuple[int, int, dict[str, int]]:
    """(cells, cells meeting every criterion, failures per criterion key) of :func:`criteria`'s cells."""
    fails: dict[str, int] = {}
    for *_, cs in crit:
        for x in cs:
            if x["ok"] is False:
                fails[x["key"]] = fails.get(x["key"], 0) + 1
    passing = sum(1 for *_, cs in crit if not any(x["ok"] is False for x in cs))
    return len(crit), passing, fails


def _fails_text(fails: dict[str, int]) -> str:
    return ", ".join(f"*{k}* {n}" for k, n in sorted(fails.items(), key=lambda kv: (-kv[1], kv[0]))) or "none"


def render_headline(doc: dict[str, Any]) -> str:
    v = verdicts(doc)
    p = v[PLANNER]
    others = "; ".join(
        f"{st}: {len(x['worse'])} above, {len(x['hot'])} with a broker pushed above {HOT:.0%}"
        for st, x in v.items()
        if st != PLANNER
    )
    models = len(doc["models"])
    cells, passing, fails = criteria_counts(criteria(doc))
    drawn = (
        f"On {models} load models drawn at random and never run before this measurement ({_span(doc)}; the "
        "planner's source is the one whose digests the report records)"
        if doc.get("unseen")
        else f"On {models} load models drawn at random (costs per message, NICs, curves, capacities and speeds "
        "nobody tuned on)"
    )
    lagging = len(behind(doc))
    return (
        f"{drawn}, {p['runs']} runs of the planner: it ends above doing nothing (by more than half a "
        f"point, per seed) in **{len(p['worse'])}**, drives a broker above {HOT:.0%} where doing nothing stays "
        f"below in **{len(p['hot'])}**, ends lower in {p['below']}; its worst run: {_where(p['excess'])} "
        f"({p['excess_by']:+.3f} vs doing nothing). Pulsar's shedders on the same runs: {others}. Where it does "
        f"too little: in {lagging} run{'' if lagging == 1 else 's'} the best of them ends more than {BEHIND * 100:.0f} points lower "
        "than the planner (the report lists them). By the balance benchmark's criteria (per scenario, model and "
        f"cadence, seeds paired): {passing} of {cells} cells meet every one; failed: {_fails_text(fails)}."
    )


def _span(doc: dict[str, Any]) -> str:
    names = list(doc["models"])
    return names[0] if len(names) == 1 else f"{names[0]} to {names[-1]}"


def render(doc: dict[str, Any]) -> str:
    rows = doc["rows"]
    v = verdicts(doc)
    base = _baseline(rows)
    strategies = [s for s in dict.fromkeys(r["strategy"] for r in rows) if s != NO_ACTION]
    scenarios = list(dict.fromkeys(r["scenario"] for r in rows))
    seeds = sorted({r["seed"] for r in rows})
    cadences = list(dict.fromkeys(r["cadence"] for r in rows))
    out = [
        f"{len(doc['models'])} models x {len(scenarios)} scenarios x {len(cadences)} cadences ({', '.join(cadences)}) "
        f"x seeds {seeds}, rate noise 3 %, CPU noise each scenario's own; dag cadence: approval delay 15 min, "
        f"drift_tolerance 0.5; {doc['seconds']:.0f} s in all. Every count is per run (one seed) against doing "
        "nothing on the same seed.",
        "",
        f"![final worst broker minus doing nothing's, per run]({(UNSEEN_PNG if doc.get('unseen') else PNG).name})",
        "",
        figures.table(
            [
                "strategy",
                "runs",
                f"ends above doing nothing (> +{TIE:.3f})",
                f"a broker above {HOT:.0%} where doing nothing stays below",
                "ends lower",
                "largest excess (run)",
                "moves in all",
                f"moves on a balanced steady cluster (doing nothing within {BALANCED:.0%} of ideal)",
            ],
            [
                [
                    f"**{st}**" if st == PLANNER else st,
                    x["runs"],
                    len(x["worse"]),
                    len(x["hot"]),
                    x["below"],
                    f"{x['excess_by']:+.3f} ({_where(x['excess'])})" if x["excess"] else "-",
                    x["moves"],
                    f"{sum(r['moves'] for r in x['steady_moved'])} ({len(x['steady_moved'])} of {x['steady_runs']} runs moved)",
                ]
                for st, x in v.items()
            ],
            "lrrrrlrl",
        ),
        "",
    ]
    p = v[PLANNER]
    if p["worse"] or p["hot"]:
        out.append("The planner's failing runs:")
        out.append("")
        for r in p["worse"]:
            out.append(
                f"* ends above doing nothing: {_where(r)}: {r['final_max']:.3f} vs {base[_key(r)]['final_max']:.3f} "
                f"({r['moves']} moves)"
            )
        for r in p["hot"]:
            out.append(
                f"* a broker above {HOT:.0%}: {_where(r)}: worst {r['worst_max']:.3f} vs "
                f"{base[_key(r)]['worst_max']:.3f} ({r['moves']} moves)"
            )
        out.append("")
    out += criteria_section(doc)
    lag = behind(doc)
    if lag:
        models = sorted({r["model"] for r, _, _ in lag})
        out.append(
            f"Where the planner does too little: in {len(lag)} of {p['runs']} runs the best of Pulsar's shedders ends "
            f"more than {BEHIND * 100:.0f} points below it (not a criterion: the planner is not worse than doing "
            f"nothing there), under {', '.join(models)}; per model: "
            + ", ".join(f"{m} {sum(1 for r, _, _ in lag if r['model'] == m)}" for m in models)
            + ". The largest gaps:"
        )
        out.append("")
        out.append(
            figures.table(
                ["run", "no-action", "planner (moves)", "best Pulsar shedder (moves)"],
                [
                    [
                        _where(r),
                        f"{n['final_max']:.3f}",
                        f"{r['final_max']:.3f} ({r['moves']})",
                        f"{b['strategy']}: {b['final_max']:.3f} ({b['moves']})",
                    ]
                    for r, b, n in lag[:10]
                ],
            )
        )
        out.append("")
    out += ["The models (`simulator/random_models.py`, drawn from their index alone):", ""]
    out.append(figures.table(["model", "drawn"], [[m, d] for m, d in doc["models"].items()]))
    out += ["", "Final worst broker per model, mean over scenarios, cadences and seeds (moves in all):", ""]
    header = ["model", "ideal", NO_ACTION, *strategies]
    table_rows = []
    for m in doc["models"]:
        cells = [m]
        mine = [r for r in rows if r["model"] == m]
        planner_rows = [r for r in mine if r["strategy"] == PLANNER]
        cells.append(f"{sum(r['ideal'] for r in planner_rows) / max(1, len(planner_rows)):.3f}")
        for st in [NO_ACTION, *strategies]:
            rs = [r for r in mine if r["strategy"] == st]
            mean = sum(r["final_max"] for r in rs) / max(1, len(rs))
            cells.append(f"{mean:.3f} ({sum(r['moves'] for r in rs)})")
        table_rows.append(cells)
    out.append(figures.table(header, table_rows))
    out += [
        "",
        "Per scenario, the planner's final worst broker minus doing nothing's, worst run over models, cadences and seeds:",
        "",
    ]
    worst_rows = []
    for s in scenarios:
        mine = [r for r in rows if r["scenario"] == s and r["strategy"] == PLANNER and _key(r) in base]
        if not mine:
            continue
        w = max(mine, key=lambda r: r["final_max"] - base[_key(r)]["final_max"])
        b = min(mine, key=lambda r: r["final_max"] - base[_key(r)]["final_max"])
        worst_rows.append(
            [
                s,
                f"{w['final_max'] - base[_key(w)]['final_max']:+.3f} ({w['model']} / {w['cadence']} / seed {w['seed']})",
                f"{b['final_max'] - base[_key(b)]['final_max']:+.3f} ({b['model']} / {b['cadence']} / seed {b['seed']})",
                f"{sum(r['moves'] for r in mine) / len(mine):.1f}",
            ]
        )
    out.append(figures.table(["scenario", "worst run", "best run", "moves per run"], worst_rows))
    return "\n".join(out)


def criteria_section(doc: dict[str, Any]) -> list[str]:
    """The balance benchmark's criteria on these runs: per model and cadence, then every failing cell."""
    crit = criteria(doc)
    cells, passing, fails = criteria_counts(crit)
    out = [
        f"**By the balance benchmark's criteria** ([balance.md](balance.md): not worse than doing nothing, no broker "
        f"pushed above {HOT:.0%}, 0 moves at steady state, at most {bench_balance.JITTER_MOVES_PER_DAY:g} moves per "
        f"simulated day under periodic jitter, at most {bench_balance.MOVES_FACTOR:g}x the moves of the closer of "
        "AvgShedder and ThresholdShedder where the planner ends lower), per scenario, model and cadence with "
        f"seeds paired: {passing} of {cells} cells meet every one; failed: {_fails_text(fails)}. *steady* is "
        "strict here: under a model with hidden speeds doing nothing is not balanced on that scenario either.",
        "",
    ]
    rows = []
    for m in doc["models"]:
        for c in dict.fromkeys(x[2] for x in crit):
            mine = [(sc, cs) for sc, mm, cc, cs in crit if mm == m and cc == c]
            if not mine:
                continue
            failed = [(sc, [x["key"] for x in cs if x["ok"] is False]) for sc, cs in mine]
            failed = [(sc, ks) for sc, ks in failed if ks]
            rows.append(
                [
                    m,
                    c,
                    f"{len(mine) - len(failed)} of {len(mine)}",
                    "; ".join(f"{sc}: {', '.join(ks)}" for sc, ks in failed) or "-",
                ]
            )
    out.append(figures.table(["load model", "cadence", "scenarios meeting every criterion", "failed criteria"], rows))
    out.append("")
    failing = [(sc, m, c, x) for sc, m, c, cs in crit for x in cs if x["ok"] is False]
    if failing:
        out += ["Every failed criterion, with both sides' numbers:", ""]
        out += [f"* {sc} / {m} / {c}: *{x['key']}*: {x['detail']}" for sc, m, c, x in failing]
        out.append("")
    return out


def plot(doc: dict[str, Any], out: Path) -> None:
    """Per model, each run's final worst broker minus doing nothing's, one column of dots per strategy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = doc["rows"]
    base = _baseline(rows)
    models = list(doc["models"])
    strategies = [s for s in dict.fromkeys(r["strategy"] for r in rows) if s != NO_ACTION]
    fig, ax = plt.subplots(figsize=(max(7.0, 1.3 * len(models)), 4.2), dpi=90)
    width = 0.8 / max(1, len(strategies))
    for j, st in enumerate(strategies):
        xs, ys = [], []
        for i, m in enumerate(models):
            for r in rows:
                if r["model"] == m and r["strategy"] == st and _key(r) in base:
                    xs.append(i - 0.4 + width * (j + 0.5))
                    ys.append(r["final_max"] - base[_key(r)]["final_max"])
        ax.scatter(
            xs,
            ys,
            s=14 if st == PLANNER else 9,
            label=st,
            color="black" if st == PLANNER else None,
            alpha=0.8 if st == PLANNER else 0.55,
            zorder=3 if st == PLANNER else 2,
        )
    ax.axhline(0.0, color="grey", linewidth=0.8)
    ax.axhline(TIE, color="red", linewidth=0.8, linestyle="--", label=f"doing nothing + {TIE}")
    ax.set_xticks(range(len(models)))
    ax.set_xticklabels(models, fontsize=8)
    ax.set_ylabel("final worst broker − doing nothing's", fontsize=8)
    what = "Random load models never run before (unseen)" if doc.get("unseen") else "Random load models"
    ax.set_title(
        f"{what}: each dot one run (scenario, cadence, seed); below 0 = better than doing nothing",
        fontsize=9,
    )
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)


# ---------------------------------------------------------------- the ledger of unseen checks


def _index(model: str) -> int:
    return int(model.removeprefix("random-"))


core_digest = figures.core_digest


def check_summary(doc: dict[str, Any]) -> dict[str, Any]:
    """One row of the ledger: what an ``--unseen`` report says, counted as its headline counts it."""
    v = verdicts(doc)
    p = v[PLANNER]
    base = _baseline(doc["rows"])
    cells, passing, fails = criteria_counts(criteria(doc))
    names = list(doc["models"])
    return {
        "first": _index(names[0]),
        "last": _index(names[-1]),
        "date": doc["meta"]["date"],
        "command": doc["meta"]["command"],
        "seconds": doc["seconds"],
        "core": core_digest(doc.get("sources")),
        "runs": p["runs"],
        "above": [
            {"run": _where(r), "by": round(r["final_max"] - base[_key(r)]["final_max"], 3)}
            for r in sorted(p["worse"], key=lambda r: base[_key(r)]["final_max"] - r["final_max"])
        ],
        "pushed": len(p["hot"]),
        "lower": p["below"],
        "moves": p["moves"],
        "shedders": {st: {"above": len(x["worse"]), "pushed": len(x["hot"])} for st, x in v.items() if st != PLANNER},
        "behind": len(behind(doc)),
        "cells": cells,
        "cells_met": passing,
        "failed": dict(sorted(fails.items())),
    }


def load_checks(path: Path | None = None) -> list[dict[str, Any]]:
    path = path or CHECKS_JSON
    return list(json.loads(path.read_text(encoding="utf-8"))["checks"]) if path.exists() else []


def ledger_doc(checks: list[dict[str, Any]]) -> dict[str, Any]:
    """The ledger: every check, oldest (lowest draws: ``--unseen`` only goes up) first; its meta is the newest
    check's (the measurement that last changed it), with a note saying what the rows are."""
    if not checks:
        raise ValueError("the ledger of unseen checks would be empty")
    checks = sorted(checks, key=lambda c: c["first"])
    newest = checks[-1]
    report = json.loads(UNSEEN_JSON.read_text(encoding="utf-8")) if UNSEEN_JSON.exists() else {}
    meta = (
        report.get("meta") if report.get("models") and _index(next(iter(report["models"]))) == newest["first"] else None
    )
    if meta is None:
        raise ValueError(f"{UNSEEN_JSON} is not the newest check's report (random-{newest['first']})")
    note = (
        "each row of this ledger sums up one check's report as it came out; the report itself is replaced by the "
        f"next check (earlier ones: `git log -- {_rel(UNSEEN_JSON)}`)"
    )
    return {"meta": {**meta, "note": note}, "checks": checks}


def write_ledger(ledger: dict[str, Any]) -> None:
    """The ledger's JSON, its plot and its blocks."""
    figures.write_json(CHECKS_JSON, ledger)
    plot_checks(ledger, CHECKS_PNG)
    figures.update(SCRIPT, _rel(CHECKS_JSON), ledger, CHECKS_TARGETS)


def plot_checks(doc: dict[str, Any], out: Path) -> None:
    """Per check, oldest first: the runs ending above doing nothing, per strategy (the planner's in black), and
    where the decision core changed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    checks = sorted(doc["checks"], key=lambda c: c["first"])
    strategies = [PLANNER, *dict.fromkeys(st for c in checks for st in c["shedders"])]
    fig, ax = plt.subplots(figsize=(max(7.0, 0.55 * len(checks)), 3.6), dpi=90)
    width = 0.8 / len(strategies)
    for j, st in enumerate(strategies):
        xs = [i - 0.4 + width * (j + 0.5) for i in range(len(checks))]
        ys = [len(c["above"]) if st == PLANNER else c["shedders"].get(st, {}).get("above", 0) for c in checks]
        ax.bar(xs, ys, width, label=st, color="black" if st == PLANNER else None, alpha=1.0 if st == PLANNER else 0.6)
    for i in range(1, len(checks)):
        if checks[i]["core"] != checks[i - 1]["core"]:
            ax.axvline(i - 0.5, color="grey", linewidth=0.6, linestyle=":")
    ax.set_xticks(range(len(checks)))
    ax.set_xticklabels([f"{c['first']}-{c['last']}" for c in checks], fontsize=7, rotation=45, ha="right")
    ax.set_xlabel("draws (random-K), oldest check first; dotted line: the decision core changed", fontsize=8)
    ax.set_ylabel(f"runs ending above doing nothing (of {checks[-1]['runs']})", fontsize=8)
    ax.set_title("Every check on draws never run before: runs ending above doing nothing, per strategy", fontsize=9)
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)


def _git(*args: str) -> str:
    try:
        done = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)
    except FileNotFoundError as e:
        raise RuntimeError("--checks-from-git needs git on PATH") from e
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def checks_from_git() -> list[dict[str, Any]]:
    """A ledger row for every range the unseen report was committed with (its first commit: as it came out), for
    the working tree's report if it holds a range not committed yet, and every row of the stored ledger that
    neither has (nothing is dropped). Refuses a shallow clone, whose history is cut."""
    rel = _rel(UNSEEN_JSON)
    if _git("rev-parse", "--is-shallow-repository").strip() == "true":
        raise RuntimeError(
            "--checks-from-git: this clone is shallow, its history of the report is cut (git fetch --unshallow)"
        )
    commits = _git("log", "--reverse", "--diff-filter=AM", "--format=%H", "--", rel).split()
    docs = [json.loads(_git("show", f"{c}:{rel}")) for c in commits]
    if UNSEEN_JSON.exists():
        docs.append(json.loads(UNSEEN_JSON.read_text(encoding="utf-8")))
    checks: dict[int, dict[str, Any]] = {}
    for doc in docs:
        if doc.get("unseen") and _index(next(iter(doc["models"]))) not in checks:
            summary = check_summary(doc)
            checks[summary["first"]] = summary
    for c in load_checks():
        checks.setdefault(c["first"], c)
    return list(checks.values())


def seen_draws(names: Sequence[str]) -> dict[str, str]:
    """Of ``names``, those a stored report has run: the random-models report's models and every check's."""
    out: dict[str, str] = {}
    if JSON.exists():
        for name in json.loads(JSON.read_text(encoding="utf-8"))["models"]:
            out[name] = f"in {_rel(JSON)}"
    for c in load_checks():
        for k in range(c["first"], c["last"] + 1):
            out[f"random-{k}"] = f"the unseen check of {c['date']}"
    return {n: out[n] for n in names if n in out}


def next_unseen(checks: Sequence[dict[str, Any]] | None = None) -> int:
    """The first draw past every one run so far: past :data:`SEEN_THROUGH` and the ledger's last check."""
    checks = load_checks() if checks is None else checks
    return max([SEEN_THROUGH, *(c["last"] for c in checks)]) + 1


def _n(n: int, what: str) -> str:
    return f"{n} {what}" if n == 1 else f"{n} {what}s"


def _span_of(c: dict[str, Any]) -> str:
    return f"random-{c['first']} to random-{c['last']}"


def _above_text(c: dict[str, Any]) -> str:
    return "; ".join(f"{a['run']} ({a['by']:+.3f})" for a in c["above"]) or "-"


def render_checks(doc: dict[str, Any]) -> str:
    checks = sorted(doc["checks"], key=lambda c: -c["first"])
    shedders = list(dict.fromkeys(st for c in checks for st in c["shedders"]))
    return "\n".join(
        [
            f"{len(checks)} checks on draws never run before, stored since the ledger began (the checks on draws up to "
            f"random-{SEEN_THROUGH}, and any whose report was not stored, are in "
            "[planner-history.md](../planner-history.md) only), newest first. Each row sums up that check's report as "
            "it came out (the report above is the newest; `--unseen` appends its row). *Decision core*: a digest of "
            f"the sources under `src/{CORE_SOURCES}` (the planner, the do-no-harm guard, Pulsar's algorithms) as the "
            "report records them; rows with the same one ran the same decision code (the simulated cluster's code "
            "may differ). Counted per run against doing nothing on the same seed, as above; next never-run draws: "
            f"`--first {next_unseen(checks)}`.",
            "",
            f"![runs ending above doing nothing per check and strategy]({CHECKS_PNG.name})",
            "",
            figures.table(
                [
                    "draws",
                    "measured",
                    "decision core",
                    "planner runs",
                    f"above doing nothing (> +{TIE:.3f})",
                    f"a broker pushed above {HOT:.0%}",
                    "ends lower",
                    "moves",
                    *(f"{st} above / pushed" for st in shedders),
                    "criteria cells met",
                    "failed",
                    "the planner's runs above doing nothing",
                ],
                [
                    [
                        _span_of(c),
                        c["date"],
                        f"`{c['core']}`",
                        c["runs"],
                        f"**{len(c['above'])}**" if c["above"] else 0,
                        c["pushed"],
                        c["lower"],
                        c["moves"],
                        *(
                            f"{c['shedders'][st]['above']} / {c['shedders'][st]['pushed']}"
                            if st in c["shedders"]
                            else "-"
                            for st in shedders
                        ),
                        f"{c['cells_met']} of {c['cells']}",
                        _fails_text(c["failed"]),
                        _above_text(c),
                    ]
                    for c in checks
                ],
                "lllrrrrr" + "r" * len(shedders) + "rll",
            ),
        ]
    )


def render_checks_headline(doc: dict[str, Any]) -> str:
    checks = sorted(doc["checks"], key=lambda c: c["first"])
    last = checks[-LAST_CHECKS:]
    above = [c for c in last if c["above"]]
    core = checks[-1]["core"]
    same: list[dict[str, Any]] = []
    for c in reversed(checks):
        if c["core"] != core:
            break
        same.append(c)
    worst = max((a["by"] for c in last for a in c["above"]), default=0.0)
    sizes = {c["last"] - c["first"] + 1 for c in checks}
    draws = (
        f"{_n(sizes.pop(), 'draw')} each"
        if len(sizes) == 1
        else f"{sum(c['last'] - c['first'] + 1 for c in checks)} draws"
    )
    where = (
        " ("
        + "; ".join(f"{_span_of(c)}: {len(c['above'])} of {c['runs']} runs" for c in reversed(above))
        + f"; by at most {worst * 100:.1f} points)"
        if above
        else ""
    )
    return (
        f"Every check on never-run draws stored since random-{SEEN_THROUGH + 1} is kept: {len(checks)} so far "
        f"({draws}; the first "
        f"{_span_of(checks[0])}, the newest {_span_of(checks[-1])}: [the ledger](docs/benchmarks/random-models-unseen.md#every-check)). In the last "
        f"{len(last)}, the planner ended a run above doing nothing in **{len(above)}**{where}, and pushed a broker "
        f"above {HOT:.0%} where doing nothing stayed below in **{sum(c['pushed'] for c in last)}** runs. The decision "
        f"core of the newest check (`{core}`) has been through the last {len(same)}: "
        f"{sum(len(c['above']) for c in same)} of {sum(c['runs'] for c in same)} runs above doing nothing. "
        f"Next never-run draws: `--first {next_unseen(checks)}`."
    )


BLOCKS = {
    "random-models-report": render,
    "random-models-headline": render_headline,
    "random-unseen-report": render,
    "random-unseen-headline": render_headline,
    "random-unseen-checks": render_checks,
    "random-unseen-checks-headline": render_checks_headline,
}
TARGETS = {"random-models-report": [DOC], "random-models-headline": [figures.BENCHMARKS_INDEX]}
UNSEEN_TARGETS = {
    "random-unseen-report": [UNSEEN_DOC],
    "random-unseen-headline": [figures.BENCHMARKS_INDEX],
}
CHECKS_TARGETS = {"random-unseen-checks": [UNSEEN_DOC], "random-unseen-checks-headline": [figures.README]}

if __name__ == "__main__":
    raise SystemExit(main())
