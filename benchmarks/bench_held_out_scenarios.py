"""Held-out scenarios benchmark: every strategy of the balance benchmark on problems nobody tuned the planner on.

Usage::

    PYTHONPATH=src .venv/bin/python benchmarks/bench_held_out_scenarios.py --jobs 2
        # everything: the held-out scenarios x the five default load models x both cadences x seeds 1 2, rate noise
        # 0.03, every strategy; writes docs/benchmarks/held-out-scenarios.md + .json
    PYTHONPATH=src .venv/bin/python benchmarks/bench_held_out_scenarios.py --scenarios flash-crowd --models linear \\
        --cadences minute --strategies GlobalPlanner no-action --seeds 1 --no-write   # a look, nothing written
    PYTHONPATH=src .venv/bin/python benchmarks/bench_held_out_scenarios.py --set 2 --jobs 2
        # the second held-out set (held_out_scenarios_2.py), first run on the planner as it was (kept in reserve
        # until then); writes docs/benchmarks/held-out-scenarios-2.md + .json and its headline blocks
    PYTHONPATH=src .venv/bin/python benchmarks/bench_held_out_scenarios.py --set 3 --jobs 2
        # the third held-out set (held_out_scenarios_3.py), first run on the planner change that followed it (kept in
        # reserve until then); writes docs/benchmarks/held-out-scenarios-3.md + .json and its headline blocks
    PYTHONPATH=src .venv/bin/python benchmarks/bench_held_out_scenarios.py --set 4 --jobs 2
        # the fourth held-out set (held_out_scenarios_4.py), first run on the planner change that followed it (kept in
        # reserve until then); writes docs/benchmarks/held-out-scenarios-4.md + .json and its headline blocks
    PYTHONPATH=src .venv/bin/python benchmarks/bench_held_out_scenarios.py --set 5 --jobs 2
        # the fifth held-out set (held_out_scenarios_5.py), first run on the planner change that followed it (kept in
        # reserve until then); writes docs/benchmarks/held-out-scenarios-5.md + .json and its headline blocks
    PYTHONPATH=src .venv/bin/python benchmarks/bench_held_out_scenarios.py --set 6 --jobs 2
        # the sixth held-out set (held_out_scenarios_6.py), first run on the planner change that followed it (kept in
        # reserve until then); writes docs/benchmarks/held-out-scenarios-6.md + .json and its headline blocks

``--set`` picks the set: 1 (the default: ``held_out_scenarios.py``, its report ``held-out-scenarios.md``), 2
(``held_out_scenarios_2.py``, its own report ``held-out-scenarios-2.md`` and headline blocks), 3
(``held_out_scenarios_3.py``, its own report ``held-out-scenarios-3.md`` and headline blocks), 4
(``held_out_scenarios_4.py``, its own report ``held-out-scenarios-4.md`` and headline blocks), 5
(``held_out_scenarios_5.py``, its own report ``held-out-scenarios-5.md`` and headline blocks) or 6
(``held_out_scenarios_6.py``, its own report ``held-out-scenarios-6.md`` and headline blocks).

The scenarios (``src/pulsar_rebalance/simulator/held_out_scenarios.py``) were written without reading the planner,
each with the criteria a good balancer meets there declared beside it (``EXPECTATIONS``). Everything else is the balance
benchmark's (``bench_balance.py``): the closed loop (``simulator/closed_loop.py``) at the ``minute`` cadence (a
decision per simulated minute, applied at once) and the ``dag`` cadence (a decision per simulated hour, applied after
the approval delay with the executor's checks), the do-no-harm guard, the strategies, and the criteria's arithmetic
(``done_when``: a criterion a scenario does not declare is not judged there). A partial run (not every scenario, load
model and cadence, or without the planner or no-action) writes nothing unless ``--out-dir`` names where to.
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "src"))

import figures  # noqa: E402  (benchmarks/figures.py: JSON + marked blocks in the docs)
from bench_balance import (  # noqa: E402  (the criteria's one source)
    CRITERIA,
    HOT,
    NO_ACTION,
    PLANNER,
    TIE,
    _by_order,
    _case_text,
    _run_text,
    _span,
    _transient_text,
    cases,
    done_when,
    outcome_cells,
    plot_figures,
    safety,
    safety_table,
    source_digests,
    strategy_cells,
    worst_run,
)

from pulsar_rebalance.simulator import (  # noqa: E402
    held_out_scenarios_2,
    held_out_scenarios_3,
    held_out_scenarios_4,
    held_out_scenarios_5,
    held_out_scenarios_6,
)
from pulsar_rebalance.simulator.closed_loop import CADENCES, STRATEGIES, run_closed_loop  # noqa: E402
from pulsar_rebalance.simulator.held_out_scenarios import EXPECTATIONS, HELD_OUT_SCENARIOS, build  # noqa: E402
from pulsar_rebalance.simulator.load_models import LOAD_MODELS  # noqa: E402
from pulsar_rebalance.simulator.scenarios import ScenarioRun  # noqa: E402

SCRIPT = "benchmarks/bench_held_out_scenarios.py"
JSON = ROOT / "docs" / "benchmarks" / "held-out-scenarios.json"
DOC = ROOT / "docs" / "benchmarks" / "held-out-scenarios.md"
BLOCK = "held-out-scenarios-report"
HEADLINE = "held-out-scenarios-headline"
INDEX = figures.BENCHMARKS_INDEX
"""docs/benchmarks/README.md: the headline block, in a section of its own (:func:`ensure_index_section`)."""
README_BLOCK = "held-out-scenarios-readme"
"""README.md's copy of the headline (its markers placed by hand, after the held-out sets' block)."""
TARGETS = {BLOCK: [DOC], HEADLINE: [INDEX], README_BLOCK: [figures.README]}
"""The files each block is written into (a full run; ``--out-dir`` writes the report's block only, there)."""
SEEDS = [1, 2]
RATE_NOISE = 0.03
KEEP = (
    "seed",
    "final_max",
    "worst_max",
    "final_spread",
    "ideal",
    "floor",
    "moves",
    "splits",
    "moves_per_day",
    "plans",
    "ping_pong",
    "churn",
    "clients_disconnected",
    "skipped",
    "guard_cut",
    "sim_minutes",
    "noise",
    "rate_noise",
)
"""The summary fields stored per run (the criteria read seed, final_max, worst_max, ideal, moves, moves_per_day, plans
and the noises)."""
PROXY = {"steady": "steady-with-noise", "jitter": "periodic-jitter"}
"""``done_when`` judges *steady* and *jitter* on the balance benchmark's scenarios of those names: a held-out scenario
that declares one is judged as that scenario would be."""

Task = tuple[str, str, str, str, int, "float | None", float, int, "float | None", bool, int]
"""(scenario, load model, cadence, strategy, seed, noise, rate noise, approval delay, drift tolerance, guard, set)."""
Results = dict[str, dict[str, dict[str, dict[str, list[dict[str, Any]]]]]]
"""load model -> cadence -> scenario -> strategy -> one summary per seed."""


def run_one(task: Task) -> tuple[Task, dict[str, Any], float, dict[str, list[float]]]:
    """One closed-loop run (a process pool's unit of work): its summary (:data:`KEEP`), seconds, and its series (the
    worst broker's usage and the ideal per decision, for the plots)."""
    scenario, model, cadence, strategy, seed, noise, rate_noise, delay, drift, guard, number = task
    logging.getLogger("pulsar_rebalance").setLevel(logging.ERROR)
    t0 = time.perf_counter()
    run = SETS[number].build(scenario, seed, load_model=model, noise=noise, rate_noise=rate_noise, cadence=cadence)
    r = run_closed_loop(
        run,
        strategy,
        cadence=cadence,
        approval_delay_min=delay,
        drift_tolerance=drift,
        max_unloads_per_run=None,
        guard=guard,
    )
    summary = r.summary()
    summary["plans"] = sum(1 for n in r.moves_per_cycle if n)  # decisions that moved at least one bundle
    summary["noise"] = run.model.noise
    summary["rate_noise"] = run.model.rate_noise
    series = {"max_usage": [round(x, 4) for x in r.max_usage], "ideal": [round(x, 4) for x in r.ideal]}
    return task, {k: summary[k] for k in KEEP}, time.perf_counter() - t0, series


def criteria(declared: Sequence[str], by: Mapping[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """``done_when``'s criteria on one cell, in ``CRITERIA``'s order, the undeclared ones not judged (ok None)."""
    found = {c["key"]: c for c in done_when("", dict(by))}
    for key, proxy in PROXY.items():
        if key in declared:
            found[key] = next(c for c in done_when(proxy, dict(by)) if c["key"] == key)
    out = []
    for key, _ in CRITERIA:
        c = dict(found[key])
        if key not in declared:
            c["ok"], c["detail"] = None, "not declared"
        out.append(c)
    return out


def ordered(results: Results, scenarios: Sequence[str]) -> Results:
    """Models, cadences, scenarios and strategies in their defined order (the JSON stores them sorted)."""
    return {
        m: {
            c: {
                sc: {st: results[m][c][sc][st] for st in _by_order(results[m][c][sc], STRATEGIES)}
                for sc in _by_order(results[m][c], scenarios)
            }
            for c in _by_order(results[m], CADENCES)
        }
        for m in _by_order(results, LOAD_MODELS)
    }


def specs(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The run's scenarios by name, in their order: description, declared criteria, why."""
    return {s["name"]: s for s in doc["scenarios"]}


def cell_verdicts(doc: dict[str, Any]) -> list[tuple[str, str, str, list[dict[str, Any]]]]:
    """(load model, cadence, scenario, criteria) for every cell of the run."""
    declared = specs(doc)
    results = ordered(doc["results"], list(declared))
    return [
        (m, c, sc, criteria(declared[sc]["criteria"], by))
        for m, by_c in results.items()
        for c, by_sc in by_c.items()
        for sc, by in by_sc.items()
    ]


def verdict_lines(doc: dict[str, Any]) -> list[str]:
    """One line per cell: PASS, or FAIL with the failed criteria's details; then the worst and best case."""
    lines = []
    for m, c, sc, crit in cell_verdicts(doc):
        failed = [x for x in crit if x["ok"] is False]
        shown = failed or [x for x in crit if x["ok"] is True]
        lines.append(
            f"{'FAIL' if failed else 'PASS'} {sc} / {m} / {c} - "
            + "; ".join(f"{x['key']}: {x['detail']}" for x in shown)
        )
    results = ordered(doc["results"], list(specs(doc)))
    ks = cases(results)
    if ks:
        lines.append(f"worst case: {_case_text(max(ks, key=lambda k: k['delta']))}")
        lines.append(f"best case:  {_case_text(min(ks, key=lambda k: k['delta']))}")
    return lines


# ---------------------------------------------------------------- the report (rendered from the JSON)


def _pct(x: float) -> str:
    return f"{x:.0%}"


def render_report(doc: dict[str, Any]) -> str:
    scenarios = specs(doc)
    results = ordered(doc["results"], list(scenarios))
    noise = "each scenario's own (2-3 %)" if doc.get("noise") is None else _pct(doc["noise"])
    strategies = doc["strategies"]
    lines = [
        f"Seeds {doc['seeds']}; CPU noise {noise}, rate noise {_pct(doc['rate_noise'])}; dag cadence: approval delay "
        f"{doc['approval_delay_min']} min, drift_tolerance {doc['drift_tolerance']}; do-no-harm guard "
        f"{'on' if doc['guard'] else 'off'}; {len(strategies)} strategies ({', '.join(strategies)}); "
        f"{doc['runs']} runs in {doc['elapsed_s']:.0f} s (the results do not depend on the machine's load, only the "
        "time does).",
        "",
        "Usages are noise-free and capacity-normalised under the load model (per broker the max of CPU, NIC in and NIC",
        "out as usage/limit); *ideal* is every broker carrying the same share. *final max* is the worst broker's highest",
        "usage over the last 5 decisions, *worst max* over the run after the first decision; means over seeds (the",
        "criteria pair each seed with no-action's). *closest Pulsar strategy*: the one ending lowest (fewest moves on",
        "ties). A criterion a scenario does not declare is not judged there (-).",
        "",
        "## Headline",
        "",
    ]
    ks = cases(results)
    if ks:
        worst = max(ks, key=lambda k: k["delta"])
        best = min(ks, key=lambda k: k["delta"])
        text = (
            f"**Worst case** for the planner: {_case_text(worst)}. **Best case**: {_case_text(best)} (final max, means "
            "over seeds; scenario / load model / cadence). **Worst transient**: "
            f"{_transient_text(max(ks, key=lambda k: k['delta_worst']))}."
        )
        one = worst_run(results)
        if one is not None:
            text += f" **Worst single run** (one seed): {_run_text(one)}."
        lines += [text, ""]
    verdicts = cell_verdicts(doc)
    met = sum(all(x["ok"] is not False for x in crit) for *_, crit in verdicts)
    lines += [
        f"**{met} of {len(verdicts)}** cells (scenario x load model x cadence) meet every criterion their scenario "
        "declares.",
        "",
        "| load model | cadence | scenarios meeting every declared criterion | failed criteria | worst case vs no-action "
        "| best case vs no-action |",
        "|---|---|---|---|---|---|",
    ]
    for m, by_c in results.items():
        for c in by_c:
            mine = [(sc, crit) for mm, cc, sc, crit in verdicts if (mm, cc) == (m, c)]
            passing = sum(all(x["ok"] is not False for x in crit) for _, crit in mine)
            failed = [
                f"{sc}: {', '.join(x['key'] for x in crit if x['ok'] is False)}"
                for sc, crit in mine
                if any(x["ok"] is False for x in crit)
            ]
            here = [k for k in ks if k["model"] == m and k["cadence"] == c]
            w = max(here, key=lambda k: k["delta"]) if here else None
            b = min(here, key=lambda k: k["delta"]) if here else None
            lines.append(
                f"| {m} | {c} | {passing} of {len(mine)} | {'; '.join(failed) or '-'} | "
                + (f"{w['scenario']}: {w['planner']:.3f} vs {w['no_action']:.3f} | " if w else "- | ")
                + (f"{b['scenario']}: {b['planner']:.3f} vs {b['no_action']:.3f} |" if b else "- |")
            )
    lines += [
        "",
        "Criteria: " + "; ".join(f"*{k}*: {n}" for k, n in CRITERIA) + ".",
        "",
        "Do no harm, every strategy on the same cells (after the do-no-harm guard; final max, means over seeds):",
        "",
        *safety_table(results),
        "",
    ]
    if doc.get("plots"):
        lines += [
            "The worst broker's usage per decision, every strategy, first seed (the planner thick and black, doing "
            "nothing dotted, the ideal dashed grey); one figure per load model and cadence, a panel per scenario:",
            "",
        ]
        for m, by_c in results.items():
            for c in by_c:
                lines += [f"![worst broker usage per scenario: {m}, {c}]({doc['plots']}/{m}-{c}.png)", ""]
    lines += [
        "## The scenarios",
        "",
        "| scenario | what happens | declared criteria | what a good balancer does |",
        "|---|---|---|---|",
    ]
    for sc, e in scenarios.items():
        lines.append(f"| {sc} | {e['description']} | {', '.join(e['criteria'])} | {e['why']} |")
    lines.append("")
    for sc, e in scenarios.items():
        lines += [
            f"## {sc}",
            "",
            f"{e['description']}; declared: {', '.join(f'*{k}*' for k in e['criteria'])}.",
            "",
            "| load model | cadence | ideal | no-action | GlobalPlanner (moves) | closest Pulsar strategy (moves) | "
            + " | ".join(k for k, _ in CRITERIA)
            + " |",
            "|---" * (6 + len(CRITERIA)) + "|",
        ]
        notes: list[str] = []
        rows: list[tuple[str, str, dict[str, list[dict[str, Any]]]]] = []
        for m, by_c in results.items():
            for c, by_sc in by_c.items():
                if sc not in by_sc:
                    continue
                by = by_sc[sc]
                rows.append((m, c, by))
                crit = criteria(e["criteria"], by)
                lines.append("| " + " | ".join([m, c, *outcome_cells(by, crit)]) + " |")
                notes += [f"* {m} / {c}: {x['key']}: {x['detail']}" for x in crit if x["ok"] is False]
        lines.append("")
        if notes:
            lines += ["Failed criteria:", "", *notes, ""]
        lines += [
            "final max (moves) per strategy:",
            "",
            "| load model | cadence | " + " | ".join(strategies) + " |",
            "|---" * (len(strategies) + 2) + "|",
        ]
        for m, c, by in rows:
            lines.append("| " + " | ".join([m, c, *strategy_cells(by, strategies)]) + " |")
        lines.append("")
    return "\n".join(lines)


def render_headline(doc: dict[str, Any], number: int = 1) -> str:
    """docs/benchmarks/README.md's paragraph: cells meeting every criterion, each one missed, worst and best case,
    the do-no-harm counts (``number``: the set's)."""
    names = list(specs(doc))
    results = ordered(doc["results"], names)
    verdicts = cell_verdicts(doc)
    met = sum(all(x["ok"] is not False for x in crit) for *_, crit in verdicts)
    where: dict[tuple[str, str], dict[str, list[str]]] = {}
    for m, c, sc, crit in verdicts:
        for x in crit:
            if x["ok"] is False:
                where.setdefault((x["key"], sc), {}).setdefault(c, []).append(m)
    missed = []
    for (key, sc), by_c in where.items():
        cells = "; ".join(f"{c}: {', '.join(ms)}" for c, ms in by_c.items())
        missed.append(f"*{key}* on {sc} ({cells})")
    what = (
        f"On the {len(names)} held-out scenarios ({', '.join(names)}; written without reading the planner, each with "
        "the criteria a good balancer meets declared before any run)"
        if number == 1
        else f"On the {len(names)} scenarios of the {ORDINAL[number]} held-out set ({', '.join(names)}; written without "
        "reading the planner nor the earlier sets' results, each with the criteria a good balancer meets declared "
        "before any run)"
    )
    text = (
        f"{what}, {len(doc['results'])} load models and both "
        f"cadences: **{met} of {len(verdicts)}** cells meet every declared criterion"
        + (f" (missed: {', '.join(missed)})" if missed else "")
        + "."
    )
    ks = cases(results)
    if ks:
        text += (
            f" **Worst case**: {_case_text(max(ks, key=lambda k: k['delta']))}; **best case**: "
            f"{_case_text(min(ks, key=lambda k: k['delta']))} (final max, means over seeds {doc['seeds']})."
        )
    rows = {r["strategy"]: r for r in safety(results)}
    p = rows.pop(PLANNER, None)
    if p is not None:
        text += (
            f" The planner ends above doing nothing (by more than {TIE}) in **{p['worse']}** of {p['cells']} cells and "
            f"pushes a broker above {HOT:.0%} where doing nothing stays below in **{p['hot']}**"
        )
        if rows:
            above = [r["worse"] for r in rows.values()]
            hot = [r["hot"] for r in rows.values()]
            each = ", ".join(f"{st} {r['worse']} / {r['hot']}" for st, r in rows.items())
            text += f"; the Pulsar strategies in {_span(above)} and {_span(hot)} ({each})"
        text += "."
    report = SETS[number].doc.name
    return text + f" Every cell, criterion and strategy: [{report}]({report})."


def render_readme(doc: dict[str, Any], number: int = 1) -> str:
    """README.md's paragraph: :func:`render_headline`'s, its link to the report from the repository's root."""
    report = SETS[number].doc.name
    return render_headline(doc, number).replace(f"]({report})", f"](docs/benchmarks/{report})")


ORDINAL = {2: "second", 3: "third", 4: "fourth", 5: "fifth", 6: "sixth"}
"""How the headline names a set kept in reserve."""


def set_files(number: int) -> tuple[Path, Path, str, str, str]:
    """Set ``number``'s (from 2) JSON, report, and the names of its report, index-headline and README blocks."""
    name = f"held-out-scenarios-{number}"
    docs = ROOT / "docs" / "benchmarks"
    return docs / f"{name}.json", docs / f"{name}.md", f"{name}-report", f"{name}-headline", f"{name}-readme"


JSON_2, DOC_2, BLOCK_2, HEADLINE_2, README_BLOCK_2 = set_files(2)
SET_2_TARGETS = {BLOCK_2: [DOC_2], HEADLINE_2: [INDEX], README_BLOCK_2: [figures.README]}
"""The files each of the second set's blocks is written into by its full run."""
JSON_3, DOC_3, BLOCK_3, HEADLINE_3, README_BLOCK_3 = set_files(3)
SET_3_TARGETS = {BLOCK_3: [DOC_3], HEADLINE_3: [INDEX], README_BLOCK_3: [figures.README]}
"""The files each of the third set's blocks is written into by its full run."""
JSON_4, DOC_4, BLOCK_4, HEADLINE_4, README_BLOCK_4 = set_files(4)
SET_4_TARGETS = {BLOCK_4: [DOC_4], HEADLINE_4: [INDEX], README_BLOCK_4: [figures.README]}
"""The files each of the fourth set's blocks is written into by its full run."""
JSON_5, DOC_5, BLOCK_5, HEADLINE_5, README_BLOCK_5 = set_files(5)
SET_5_TARGETS = {BLOCK_5: [DOC_5], HEADLINE_5: [INDEX], README_BLOCK_5: [figures.README]}
"""The files each of the fifth set's blocks is written into by its full run."""
JSON_6, DOC_6, BLOCK_6, HEADLINE_6, README_BLOCK_6 = set_files(6)
SET_6_TARGETS = {BLOCK_6: [DOC_6], HEADLINE_6: [INDEX], README_BLOCK_6: [figures.README]}
"""The files each of the sixth set's blocks is written into by its full run."""


def set_blocks(number: int) -> dict[str, Callable[[dict[str, Any]], str]]:
    """Set ``number``'s (from 2) block renderers: its report, its index headline, its README headline."""
    _, _, block, headline, readme = set_files(number)
    return {
        block: render_report,
        headline: functools.partial(render_headline, number=number),
        readme: functools.partial(render_readme, number=number),
    }


BLOCKS: dict[str, Callable[[dict[str, Any]], str]] = {
    BLOCK: render_report,
    HEADLINE: render_headline,
    README_BLOCK: render_readme,
    **{name: render for number in ORDINAL for name, render in set_blocks(number).items()},
}

INTRO = """# Benchmark: held-out scenarios

The balance benchmark ([balance.md](balance.md)) runs the ten scenarios the GlobalPlanner was tuned on; the held-out
load models ([balance-held-out.md](balance-held-out.md) and the sets after it) change how traffic turns into load, on
those same ten problems. This report runs problems nobody tuned the planner on: the scenarios of
`src/pulsar_rebalance/simulator/held_out_scenarios.py`, written without reading the planner, from how Pulsar clusters
behave and what operators report (a broker crashing under load, a common-mode daily swing, a flash crowd on one
namespace, steady growth with one broker a little hotter, a wide cluster of small brokers with Pulsar's default 4
bundles a namespace). Each scenario declared what a good balancer does there, as the balance benchmark's criteria,
before any strategy ran on it; the scenarios were not changed after this report's run. Everything else - the closed
loop, the two cadences, the strategies, the do-no-harm guard, the criteria's arithmetic - is the balance benchmark's.

"""


INTRO_2 = """# Benchmark: held-out scenarios, second set

The first held-out set ([held-out-scenarios.md](held-out-scenarios.md)) ran problems nobody tuned the planner on, once,
on the planner as it was. This report runs a second set, written the same way and then kept in reserve: the scenarios
of `src/pulsar_rebalance/simulator/held_out_scenarios_2.py`, written without reading the planner (nor the first set's
results), from how Pulsar clusters behave and what operators report (topics created and deleted all through the run, a
hotspot that follows the sun between regions, a broker losing capacity to a noisy neighbour while it reports the same
limits, one tenant taking over while the others shrink, a backlog drained after a consumer outage). Each scenario
declared what a good balancer does there, as the balance benchmark's criteria, before any strategy ran on it; while
the set was written only doing nothing and Pulsar's strategies ran on it, never the planner. Everything else - the
closed loop, the two cadences, the strategies, the do-no-harm guard, the criteria's arithmetic - is the balance
benchmark's.

First run on: the planner as it was (decision core `67945534ff`, unchanged since the first set's run), not on a
change made after it. The set had been kept in reserve to measure the next change to the planner's decisions; it was
run before any such change to measure the default operators get, and a third set took its place in reserve. Nothing
in the scenarios, their loads or their declared criteria was changed after this run.

"""


INTRO_3 = """# Benchmark: held-out scenarios, third set

A third set of problems nobody tuned the planner on, written as the second was
([held-out-scenarios-2.md](held-out-scenarios-2.md)) and likewise kept in reserve: the scenarios of
`src/pulsar_rebalance/simulator/held_out_scenarios_3.py`, written without reading the planner (nor any benchmark
report), from how Pulsar places and sheds load and what operators report (a new tenant's namespace whose default 4
bundles lookup places knowing nothing of their traffic, new subscriptions adding dispatch to one namespace's topics,
an over-split namespace whose traffic has gone leaving 128 idle bundles on two brokers, an operator's pulsar-perf run
on a fresh namespace). Each scenario declared what a good balancer does there, as the balance benchmark's criteria,
before any strategy ran on it; while the set was written only doing nothing and Pulsar's strategies ran on it, never
the planner. Its first full run, this report's, measures the planner change that followed. Everything else - the
closed loop, the two cadences, the strategies, the do-no-harm guard, the criteria's arithmetic - is the balance
benchmark's.

First run on: the change to the planner's decisions that followed it (a broker above the overload threshold splits a
bundle smaller than its excess: decision core `c7b68e1f03`, branch `split-overloaded`, run at its commit ddcf95d). The previous
planner (core `67945534ff`) was run on the set right after, the planner and doing nothing only: its 80 runs are
identical to the change's, which makes no decision of this set differently. Nothing in the scenarios, their loads or
their declared criteria was changed after this run.

"""


INTRO_4 = """# Benchmark: held-out scenarios, fourth set

A fourth set of problems nobody tuned the planner on, written as the second and third were
([held-out-scenarios-3.md](held-out-scenarios-3.md)) and likewise kept in reserve: the scenarios of
`src/pulsar_rebalance/simulator/held_out_scenarios_4.py`, written without reading the planner (nor any benchmark
report), from how Pulsar places and serves load and what operators report (a partitioned topic's partitions raised from
4 to 16, the new ones landing in whatever bundles their names hash into; a producer release sending messages 2.5x as
large, as many of them; a broker's host losing part of its capacity to its co-located bookie's autorecovery for 40
minutes; a few whale topics among thousands of small ones, nothing happening). Each scenario declared what a good
balancer does there, as the balance benchmark's criteria, before any strategy ran on it; while the set was written only
doing nothing and Pulsar's strategies ran on it, never the planner. Its first full run, this report's, measures the
planner change that followed. Everything else - the closed loop, the two cadences, the strategies, the do-no-harm
guard, the criteria's arithmetic - is the balance benchmark's.

First run on: (the planner change this set was first run on, and its commit: filled in at the first run).

"""


INTRO_5 = """# Benchmark: held-out scenarios, fifth set

A fifth set of problems nobody tuned the planner on, written as the earlier ones were
([held-out-scenarios-4.md](held-out-scenarios-4.md)) and likewise kept in reserve: the scenarios of
`src/pulsar_rebalance/simulator/held_out_scenarios_5.py`, written without reading the planner, from how Pulsar places
and serves load and what operators report (a cron job raising one namespace's traffic 2.5x for 10 minutes every
hour; four brokers replaced one at a time by hosts half again as large, each drained by lookup and back empty; two
ingest-only topics, all bytes in, started on a namespace nobody reads live; a large customer's key landing on one
partition of a keyed topic; a cluster balanced at 70 %, nothing happening). Each scenario declared what a good balancer does there, as
the balance benchmark's criteria, before any strategy ran on it; while the set was written only doing nothing and
Pulsar's strategies ran on it, never the planner. Its first full run, this report's, measures the planner change that
followed. Everything else - the closed loop, the two cadences, the strategies, the do-no-harm guard, the criteria's
arithmetic - is the balance benchmark's.

First run on: (the planner change this set was first run on, and its commit: filled in at the first run).

"""


INTRO_6 = """# Benchmark: held-out scenarios, sixth set

A sixth set of problems nobody tuned the planner on, written as the earlier ones were
([held-out-scenarios-5.md](held-out-scenarios-5.md)) and likewise kept in reserve: the scenarios of
`src/pulsar_rebalance/simulator/held_out_scenarios_6.py`, written without reading the planner, from how Pulsar places
and serves load and what operators report (a large tenant offboarded, its namespaces deleted from the brokers that held
its bundles; every broker upgraded in turn, each down 5 minutes, its bundles re-placed by lookup and itself back empty;
one subscription reset 3 days back, reading its backlog at catch-up speed for 6 hours; two brokers whose bonded NIC
loses one of its links, reporting half the limit). Each scenario declared what a good balancer does there, as the
balance benchmark's criteria, before any strategy ran on it; while the set was written only doing nothing and Pulsar's
strategies ran on it, never the planner. Its first full run, this report's, measures the planner change that followed.
Everything else - the closed loop, the two cadences, the strategies, the do-no-harm guard, the criteria's arithmetic -
is the balance benchmark's.

First run on: (the planner change this set was first run on, and its commit: filled in at the first run).

"""


INDEX_SECTION = """## Held-out scenarios

The balance benchmark's criteria on problems nobody tuned the planner on (a broker crashing under load, a common-mode
daily swing, a flash crowd on one namespace, steady growth, a wide cluster of small brokers), each scenario declaring
which criteria a good balancer meets there ([held-out-scenarios.md](held-out-scenarios.md)):

"""


def ensure_index_section(index: Path, json_rel: str) -> None:
    """docs/benchmarks/README.md's section for this benchmark with its (empty) headline block, put before "How the
    planner got here" (at the end if there is no such heading) if it is not there yet."""
    text = index.read_text(encoding="utf-8")
    if f"<!-- {HEADLINE}:start" in text:
        return
    section = (
        INDEX_SECTION + f"<!-- {HEADLINE}:start (written by {SCRIPT} from {json_rel}) -->\n<!-- {HEADLINE}:end -->\n\n"
    )
    anchor = "## How the planner got here"
    text = text.replace(anchor, section + anchor, 1) if anchor in text else text.rstrip("\n") + "\n\n" + section
    index.write_text(text, encoding="utf-8")


def plot_series(doc: dict[str, Any], img_dir: Path) -> None:
    """One figure per load model and cadence (``img_dir/<model>-<cadence>.png``): a panel per scenario, the worst broker's
    usage per decision for every strategy on the first seed, the ideal dashed (``bench_balance.plot_figures``)."""
    plot_figures(doc["series"], img_dir, list(LOAD_MODELS), [s["name"] for s in doc["scenarios"]])


def write_report(json_path: Path, doc: dict[str, Any], targets: dict[str, list[Path]], number: int = 1) -> None:
    """The JSON, then each block of ``targets`` rendered from it: the report created with its intro if it is new, the
    index given its section if it has none (``number``: the set's)."""
    figures.write_json(json_path, doc)
    json_rel = json_path.relative_to(ROOT).as_posix() if json_path.is_relative_to(ROOT) else str(json_path)
    chosen = SETS[number]
    for md_path in targets.get(chosen.block, []):
        if not md_path.exists():
            md_path.write_text(
                chosen.intro
                + f"<!-- {chosen.block}:start (written by {SCRIPT} from {json_rel}) -->\n<!-- {chosen.block}:end -->\n",
                encoding="utf-8",
            )
    for index in targets.get(HEADLINE, []):
        ensure_index_section(index, json_rel)
    figures.update(SCRIPT, json_rel, doc, targets)


# ---------------------------------------------------------------- the sets


@dataclass(frozen=True)
class ScenarioSet:
    """One held-out set: its scenarios, their declared criteria, its builder, its report and the blocks it writes."""

    number: int
    scenarios: Mapping[str, Callable[[int], ScenarioRun]]
    expectations: Mapping[str, Any]
    build: Callable[..., ScenarioRun]
    json: Path
    doc: Path
    block: str
    intro: str
    written: Mapping[str, list[Path]]
    """The files each block is written into by a full run."""


SETS: dict[int, ScenarioSet] = {
    1: ScenarioSet(1, HELD_OUT_SCENARIOS, EXPECTATIONS, build, JSON, DOC, BLOCK, INTRO, TARGETS),
    2: ScenarioSet(
        2,
        held_out_scenarios_2.HELD_OUT_SCENARIOS_2,
        held_out_scenarios_2.EXPECTATIONS_2,
        held_out_scenarios_2.build,
        JSON_2,
        DOC_2,
        BLOCK_2,
        INTRO_2,
        SET_2_TARGETS,
    ),
    3: ScenarioSet(
        3,
        held_out_scenarios_3.HELD_OUT_SCENARIOS_3,
        held_out_scenarios_3.EXPECTATIONS_3,
        held_out_scenarios_3.build,
        JSON_3,
        DOC_3,
        BLOCK_3,
        INTRO_3,
        SET_3_TARGETS,
    ),
    4: ScenarioSet(
        4,
        held_out_scenarios_4.HELD_OUT_SCENARIOS_4,
        held_out_scenarios_4.EXPECTATIONS_4,
        held_out_scenarios_4.build,
        JSON_4,
        DOC_4,
        BLOCK_4,
        INTRO_4,
        SET_4_TARGETS,
    ),
    5: ScenarioSet(
        5,
        held_out_scenarios_5.HELD_OUT_SCENARIOS_5,
        held_out_scenarios_5.EXPECTATIONS_5,
        held_out_scenarios_5.build,
        JSON_5,
        DOC_5,
        BLOCK_5,
        INTRO_5,
        SET_5_TARGETS,
    ),
    6: ScenarioSet(
        6,
        held_out_scenarios_6.HELD_OUT_SCENARIOS_6,
        held_out_scenarios_6.EXPECTATIONS_6,
        held_out_scenarios_6.build,
        JSON_6,
        DOC_6,
        BLOCK_6,
        INTRO_6,
        SET_6_TARGETS,
    ),
}
"""``--set``'s choices: the first held-out set (the default), the second, the third, the fourth, the fifth and the
sixth."""


# ---------------------------------------------------------------- running


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--set",
        type=int,
        choices=sorted(SETS),
        default=1,
        help="the held-out set: 1 (default), 2, 3, 4, 5 or 6",
    )
    parser.add_argument(
        "--scenarios",
        nargs="*",
        default=None,
        help=f"default: all of the set's (set 1: {', '.join(HELD_OUT_SCENARIOS)}; set 2: "
        f"{', '.join(held_out_scenarios_2.HELD_OUT_SCENARIOS_2)}; set 3: "
        f"{', '.join(held_out_scenarios_3.HELD_OUT_SCENARIOS_3)}; set 4: "
        f"{', '.join(held_out_scenarios_4.HELD_OUT_SCENARIOS_4)}; set 5: "
        f"{', '.join(held_out_scenarios_5.HELD_OUT_SCENARIOS_5)}; set 6: "
        f"{', '.join(held_out_scenarios_6.HELD_OUT_SCENARIOS_6)})",
    )
    parser.add_argument("--models", nargs="*", default=None, help=f"load models (default: {', '.join(LOAD_MODELS)})")
    parser.add_argument("--cadences", nargs="*", default=list(CADENCES), help="minute, dag (default: both)")
    parser.add_argument(
        "--strategies", nargs="*", default=None, help="default: every strategy of the balance benchmark"
    )
    parser.add_argument("--seeds", nargs="*", type=int, default=None, help="default 1 2")
    parser.add_argument("--noise", type=float, default=None, help="CPU noise, 0-0.1 (default: each scenario's, 2-3 %%)")
    parser.add_argument("--rate-noise", type=float, default=RATE_NOISE, help=f"default {RATE_NOISE}")
    parser.add_argument(
        "--approval-delay-min", type=int, default=15, help="dag cadence: minutes from decision to apply"
    )
    parser.add_argument(
        "--drift-tolerance", type=float, default=0.5, help="dag cadence: the executor's drift_tolerance (<0: no check)"
    )
    parser.add_argument("--no-guard", action="store_true", help="the strategies' raw decisions, without the guard")
    parser.add_argument(
        "--jobs", type=int, default=1, help=f"worker processes (this machine has {os.cpu_count() or 1} cores)"
    )
    parser.add_argument("--verbose", action="store_true", help="one line per run as it finishes")
    parser.add_argument("--no-write", action="store_true", help="print the verdicts only")
    parser.add_argument(
        "--out-dir",
        type=Path,
        default=None,
        help="write the set's report (held-out-scenarios.md / -2.md to -6.md) + .json there (any run, partial too)",
    )
    parser.add_argument("--render", action="store_true", help="only re-render the report from the committed JSON")
    args = parser.parse_args(argv)
    chosen = SETS[args.set]
    if args.render:
        import json

        if not chosen.json.exists():
            parser.error(f"{chosen.json.relative_to(ROOT)} does not exist: set {args.set} has no report yet")
        write_report(chosen.json, json.loads(chosen.json.read_text(encoding="utf-8")), dict(chosen.written), args.set)
        return 0
    scenarios = args.scenarios or list(chosen.scenarios)
    models = args.models or list(LOAD_MODELS)
    strategies = args.strategies or list(STRATEGIES)
    seeds = args.seeds or list(SEEDS)
    for name, given, known in (
        ("scenario", scenarios, chosen.scenarios),
        ("load model", models, LOAD_MODELS),
        ("cadence", args.cadences, CADENCES),
        ("strategy", strategies, STRATEGIES),
    ):
        unknown = [g for g in given if g not in known]
        if unknown:
            parser.error(f"unknown {name} {', '.join(unknown)}; known: {', '.join(known)}")
    for flag, value in (("--noise", args.noise), ("--rate-noise", args.rate_noise)):
        if value is not None and not 0.0 <= value <= 0.1:
            parser.error(f"{flag} must be in [0, 0.1], got {value}")
    drift = None if args.drift_tolerance < 0 else args.drift_tolerance
    digests = source_digests()  # before the runs: what they import
    tasks: list[Task] = [
        (sc, m, c, st, seed, args.noise, args.rate_noise, args.approval_delay_min, drift, not args.no_guard, args.set)
        for sc in scenarios
        for m in models
        for c in args.cadences
        for seed in seeds
        for st in strategies
    ]
    # the long ones first (minute cadence, the planner), so that the pool ends together
    tasks.sort(key=lambda t: (t[2] != "minute", t[3] != PLANNER))
    logging.getLogger("pulsar_rebalance").setLevel(logging.ERROR)
    print(f"{len(tasks)} runs on {max(1, args.jobs)} worker(s)", file=sys.stderr, flush=True)
    load = figures.LoadSampler()
    load.__enter__()
    started = time.perf_counter()
    progress = figures.Progress(len(tasks))
    done: list[tuple[Task, dict[str, Any], float, dict[str, list[float]]]] = []

    def tick(item: tuple[Task, dict[str, Any], float, dict[str, list[float]]]) -> None:
        done.append(item)
        task, s, seconds, _ = item
        if args.verbose:
            print(
                f"{task[0]:26s} {task[1]:22s} {task[2]:6s} seed {task[4]} {task[3]:28s} final {s['final_max']:.3f} "
                f"worst {s['worst_max']:.3f} moves {s['moves']:4d} ideal {s['ideal']:.3f} ({seconds:.1f} s)",
                file=sys.stderr,
                flush=True,
            )
        progress.tick()

    if args.jobs > 1:
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            for item in pool.map(run_one, tasks):
                tick(item)
    else:
        for task in tasks:
            tick(run_one(task))
    elapsed = time.perf_counter() - started
    load.__exit__(None, None, None)
    results: Results = {}
    series: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
    for task, summary, _, ys in sorted(done, key=lambda d: (d[0][4], d[0][3])):
        sc, m, c, st = task[:4]
        results.setdefault(m, {}).setdefault(c, {}).setdefault(sc, {}).setdefault(st, []).append(summary)
        if task[4] == seeds[0]:  # the plots show the first seed
            cell = series.setdefault(m, {}).setdefault(c, {}).setdefault(sc, {"max_usage": {}, "ideal": ys["ideal"]})
            cell["max_usage"][st] = ys["max_usage"]
    doc: dict[str, Any] = {
        "meta": figures.meta(load),
        "seeds": seeds,
        "noise": args.noise,
        "rate_noise": args.rate_noise,
        "approval_delay_min": args.approval_delay_min,
        "drift_tolerance": drift,
        "guard": not args.no_guard,
        "strategies": [s for s in STRATEGIES if s in strategies],
        "scenarios": [
            {"name": sc, "description": e.description, "criteria": list(e.criteria), "why": e.why}
            for sc, e in chosen.expectations.items()
            if sc in scenarios
        ],
        "runs": len(tasks),
        "elapsed_s": round(elapsed),
        "results": ordered(results, scenarios),
        "series": series,
        "sources": digests,
    }
    print(f"\n{len(tasks)} runs in {elapsed:.0f} s (means over seeds {seeds})")
    for line in verdict_lines(doc):
        print(line)
    if args.no_write:
        return 0
    doc["plots"] = chosen.json.stem  # the figures' folder, beside the report
    if args.out_dir is not None:
        args.out_dir.mkdir(parents=True, exist_ok=True)
        plot_series(doc, args.out_dir / doc["plots"])
        write_report(args.out_dir / chosen.json.name, doc, {chosen.block: [args.out_dir / chosen.doc.name]}, args.set)
        return 0
    full = (
        set(scenarios) == set(chosen.scenarios)
        and set(models) == set(LOAD_MODELS)
        and set(args.cadences) == set(CADENCES)
        and {PLANNER, NO_ACTION} <= set(strategies)
    )
    if not full:
        print(
            "partial run (not every scenario, load model and cadence, or no planner / no-action): nothing written "
            "(--out-dir DIR writes it there)",
            file=sys.stderr,
        )
        return 0
    plot_series(doc, chosen.json.parent / doc["plots"])
    write_report(chosen.json, doc, dict(chosen.written), args.set)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
