"""Benchmark: what do a strategy's moves cost the brokers they land on, minute by minute?

Usage::

    .venv/bin/python benchmarks/bench_move_cost.py --jobs 2     # writes docs/benchmarks/move-cost.json + .md + .png

A move is not free on a real broker: the new owner loads the bundle's topics, its clients reconnect, unacknowledged
messages are dispatched again and the subscriptions read their backlog from the bookies for a while. The load models
of :mod:`pulsar_rebalance.simulator.move_cost` (the "arrival cost" family, the project's own, in no registry: this
script builds them by name) charge that to the destination for a few minutes after each arrival; ``arrival-free``
is the same family without the cost (``linear``'s CPU with 10 Gbit/s NICs), the control. Scenarios where bundles
move (a scale-up, a rolling restart, a scale-down, a hot broker, a hot bundle to split, brokers of two sizes, and a
balanced noisy cluster where nothing should move) run in the closed loop of ``bench_balance.py`` (the cluster model,
the do-no-harm guard, 3 % noise on the reported rates) at both cadences, for the planner, Pulsar's shedders and doing
nothing. The worst broker is sampled every simulated minute for the first :data:`AFTER_MIN` minutes after each
applied decision (at the minute cadence: every minute; at the DAG's: the plan's first minutes, which the hourly
samples never see) and at every decision.

Counted per run: the transient peak (the worst broker's highest usage over the run's samples after the start), the
final max (as in the balance benchmark: the highest over the last 5 decisions), moves, and whether a broker goes above
85 % where doing nothing stays below; per decision that moved bundles, the worst broker at the decision and its
highest over the next :data:`AFTER_MIN` minutes, next to doing nothing's over the same minutes (the runs of one seed
share their traffic and events, so the minutes line up).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import statistics
import sys
import time
from collections.abc import Mapping
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "src"))

import figures  # noqa: E402  (benchmarks/figures.py: JSON + marked blocks in the docs)

SCRIPT = "benchmarks/bench_move_cost.py"
JSON = ROOT / "docs" / "benchmarks" / "move-cost.json"
DOC = ROOT / "docs" / "benchmarks" / "move-cost.md"
PNG = ROOT / "docs" / "benchmarks" / "move-cost.png"
PLANNER = "GlobalPlanner"
NO_ACTION = "no-action"
HOT = 0.85
"""A broker above this is overloaded (``loadBalancerBrokerOverloadedThresholdPercentage``, the balance criteria's)."""
TIE = 0.005
AFTER_MIN = 5
"""Minutes sampled one by one after each applied decision."""
SCENARIOS = (
    "scale-up",
    "rolling-restart",
    "scale-down",
    "one-hot-broker",
    "hot-bundle-needs-split",
    "heterogeneous",
    "steady-with-noise",
)
VARIANTS = ("arrival-cost", "arrival-cost-long", "arrival-cost-heavy", "arrival-free")
CONTROL = "arrival-free"
STRATEGIES = (PLANNER, NO_ACTION, "ThresholdShedder", "AvgShedder")
CADENCES = ("minute", "dag")
PLOT_SCENARIO = "scale-up"
PLOT_DAG_MINUTES = 240
"""The plot's DAG-cadence panels: the first 4 simulated hours."""

Task = tuple[str, str, str, str, int, float, "int | None"]
"""scenario, variant, cadence, strategy, seed, rate noise, decisions (None: the scenario's own)."""


class MinuteProbe:
    """Samples a cluster model's worst broker after every clock step, and splits the step that follows an applied
    decision into minutes for its first ``after_min`` minutes; dates the decision's moves at its application (the
    load model reads the ownership just before). Installed on the model instance (``model.apply``/``advance``), so
    the closed loop runs unchanged; every strategy's runs step the same way (doing nothing applies an empty plan)."""

    def __init__(self, model: Any, after_min: int = AFTER_MIN) -> None:
        self.model = model
        self.after_min = after_min
        self.start_ms = model.now_ms
        self.samples: list[tuple[int, float]] = []
        """(minute since the start, the worst broker's usage, noise-free), from the start on."""
        self._pending = False
        self._sample()
        self._apply, self._advance = model.apply, model.advance
        model.apply, model.advance = self.apply, self.advance

    def apply(self, cycle_out: Mapping[str, Any]) -> Any:
        observe = getattr(self.model.load_model, "observe", None)
        if observe is not None:
            observe()
        self._pending = True
        return self._apply(cycle_out)

    def _sample(self) -> None:
        usage = self.model.true_usage()
        self.samples.append(((self.model.now_ms - self.start_ms) // 60_000, max(usage.values())))

    def _step(self, cycles: int) -> Any:
        res = self._advance(cycles)
        self._sample()
        return res

    def advance(self, cycles: int = 1) -> Any:
        steps = [cycles]
        if self._pending and cycles > 1:
            first = min(self.after_min, cycles)
            steps = [1] * first + ([cycles - first] if cycles > first else [])
        self._pending = False
        total = None
        for n in steps:
            res = self._step(n)
            if total is None:
                total = res
            else:  # every field of StepResult adds up (counts and lists of bundles)
                for f in dataclasses.fields(res):
                    setattr(total, f.name, getattr(total, f.name) + getattr(res, f.name))
        return total


def _run(task: Task) -> dict[str, Any]:
    from pulsar_rebalance.simulator.closed_loop import run_closed_loop
    from pulsar_rebalance.simulator.move_cost import MOVE_COST_MODELS
    from pulsar_rebalance.simulator.scenarios import build

    logging.getLogger("pulsar_rebalance").setLevel(logging.ERROR)
    scenario, variant, cadence, strategy, seed, rate_noise, decisions = task
    started = time.perf_counter()
    run = build(scenario, seed, load_model=MOVE_COST_MODELS[variant](), rate_noise=rate_noise)
    probe = MinuteProbe(run.model)
    r = run_closed_loop(run, strategy, cadence=cadence, decisions=decisions)
    s = r.summary()
    samples = probe.samples
    peak_minute, peak = max(samples[1:] or samples, key=lambda x: (x[1], -x[0]))  # after the start
    at = dict(samples)
    plans = []
    for applied_ms, moves in zip(r.applied_ms, r.moves_per_cycle, strict=True):
        if not moves:
            continue
        minute = (applied_ms - probe.start_ms) // 60_000
        window = [u for m, u in samples if minute < m <= minute + AFTER_MIN]
        plans.append({"minute": minute, "moves": moves, "before": at.get(minute), "after": max(window, default=None)})
    return {
        "scenario": scenario,
        "variant": variant,
        "cadence": cadence,
        "strategy": strategy,
        "seed": seed,
        "peak": peak,
        "peak_minute": peak_minute,
        "final_max": s["final_max"],
        "ideal": s["ideal"],
        "moves": s["moves"],
        "plans": plans,
        "samples": samples,
        "seconds": round(time.perf_counter() - started, 2),
    }


def compare(rows: list[dict[str, Any]]) -> None:
    """Next to each run, doing nothing's on the same scenario, variant, cadence and seed (in place): its peak and final
    max, whether the run pushed a broker above :data:`HOT` where doing nothing stays below, and per decision that moved
    bundles doing nothing's worst broker over the same minutes. Drops the samples."""
    base = {(r["scenario"], r["variant"], r["cadence"], r["seed"]): r for r in rows if r["strategy"] == NO_ACTION}
    for r in rows:
        na = base.get((r["scenario"], r["variant"], r["cadence"], r["seed"]))
        r["na_peak"] = na["peak"] if na else None
        r["na_final"] = na["final_max"] if na else None
        r["pushed_hot"] = bool(na) and r["peak"] > HOT >= na["peak"]
        na_at = dict(na["samples"]) if na else {}
        for p in r["plans"]:
            window = [u for m, u in na_at.items() if p["minute"] < m <= p["minute"] + AFTER_MIN]
            p["no_action"] = max(window, default=None)
    for r in rows:
        r.pop("samples", None)


def series(rows: list[dict[str, Any]], seed: int) -> dict[str, dict[str, dict[str, list[list[float]]]]]:
    """cadence -> variant -> strategy -> [[minute, worst broker], ...] of :data:`PLOT_SCENARIO`, ``seed`` (what the
    plot draws: the DAG cadence's first :data:`PLOT_DAG_MINUTES` minutes). Needs the samples."""
    out: dict[str, dict[str, dict[str, list[list[float]]]]] = {}
    for r in rows:
        if r["scenario"] != PLOT_SCENARIO or r["seed"] != seed:
            continue
        limit = PLOT_DAG_MINUTES if r["cadence"] == "dag" else 10**9
        pts = [[m, round(u, 4)] for m, u in r["samples"] if m <= limit]
        out.setdefault(r["cadence"], {}).setdefault(r["variant"], {})[r["strategy"]] = pts
    return out


def main(argv: list[str] | None = None) -> int:
    from pulsar_rebalance.simulator.closed_loop import STRATEGIES as KNOWN_STRATEGIES
    from pulsar_rebalance.simulator.move_cost import MOVE_COST_MODELS
    from pulsar_rebalance.simulator.scenarios import SCENARIOS as KNOWN_SCENARIOS

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenarios", nargs="*", default=list(SCENARIOS), choices=list(KNOWN_SCENARIOS))
    ap.add_argument("--variants", nargs="*", default=list(VARIANTS), choices=list(MOVE_COST_MODELS))
    ap.add_argument("--cadences", nargs="*", default=list(CADENCES), choices=list(CADENCES))
    ap.add_argument("--strategies", nargs="*", default=list(STRATEGIES), choices=list(KNOWN_STRATEGIES))
    ap.add_argument("--seeds", nargs="*", type=int, default=[1, 2])
    ap.add_argument("--rate-noise", type=float, default=0.03, help="noise on reported rates, 0-0.1 (default 3 %%)")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (this machine has 2 cores)")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    if NO_ACTION not in args.strategies:
        ap.error(f"--strategies: {NO_ACTION} is the baseline every run is compared with: keep it")
    if not 0 <= args.rate_noise <= 0.1:
        ap.error("--rate-noise must be within 0-0.1")
    tasks: list[Task] = [
        (sc, v, c, st, seed, args.rate_noise, None)
        for c in args.cadences
        for sc in args.scenarios
        for v in args.variants
        for st in args.strategies
        for seed in args.seeds
    ]
    print(f"{len(tasks)} runs on {args.jobs} worker(s)", file=sys.stderr)
    load = figures.LoadSampler()
    load.__enter__()
    started = time.perf_counter()
    progress = figures.Progress(len(tasks), every=40)
    rows: list[dict[str, Any]] = []
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for row in pool.map(_run, tasks):
            rows.append(row)
            progress.tick()
    load.__exit__(None, None, None)
    plotted = series(rows, min(args.seeds))
    compare(rows)
    doc = {
        "meta": figures.meta(load),
        "rows": rows,
        "series": plotted,
        "seeds": sorted(set(args.seeds)),
        "rate_noise": args.rate_noise,
        "after_min": AFTER_MIN,
        "seconds": round(time.perf_counter() - started, 1),
    }
    print(render(doc))
    if not args.no_write:
        figures.write_json(JSON, doc)
        figures.update(SCRIPT, str(JSON.relative_to(ROOT)), doc, TARGETS)
        plot(doc, PNG)
    return 0


# ---------------------------------------------------------------------------------------------- rendering


def _order(rows: list[dict[str, Any]], key: str) -> list[Any]:
    return list(dict.fromkeys(r[key] for r in rows))


def _mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else 0.0


def _cell(r: Mapping[str, Any]) -> str:
    return f"{r['scenario']} / seed {r['seed']}"


def _moves(n: int) -> str:
    return f"{n} move{'' if n == 1 else 's'}"


def _pushed(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r["pushed_hot"]]


def _largest_plan(rows: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The decision with moves whose next minutes rise highest above doing nothing's, with its run."""
    found = [(r, p) for r in rows for p in r["plans"] if p["after"] is not None and p["no_action"] is not None]
    if not found:
        return None
    return max(found, key=lambda rp: (rp[1]["after"] - rp[1]["no_action"], rp[1]["after"]))


def _plan_text(rp: tuple[dict[str, Any], dict[str, Any]] | None) -> str:
    if rp is None:
        return "no decision moved"
    r, p = rp
    return (
        f"{p['after']:.3f} vs doing nothing {p['no_action']:.3f} ({r['scenario']}, seed {r['seed']}, "
        f"{_moves(p['moves'])} at minute {p['minute']})"
    )


def _strategy_line(rows: list[dict[str, Any]], strategy: str) -> str:
    runs = [r for r in rows if r["strategy"] == strategy]
    return f"{strategy} {_mean([r['peak'] for r in runs]):.3f}"


def render_headline(doc: dict[str, Any]) -> str:
    rows = doc["rows"]
    strategies = [s for s in _order(rows, "strategy") if s != NO_ACTION]
    variants = [v for v in _order(rows, "variant") if v != CONTROL]
    parts = []
    for v in variants:
        runs = [r for r in rows if r["variant"] == v and r["scenario"] == PLOT_SCENARIO and r["cadence"] == "minute"]
        if not runs:
            continue
        parts.append(
            f"{v}: " + ", ".join([_strategy_line(runs, NO_ACTION), *(_strategy_line(runs, s) for s in strategies)])
        )
    pushed = ", ".join(
        f"{s} {len(_pushed([r for r in rows if r['strategy'] == s and r['variant'] != CONTROL]))}" for s in strategies
    )
    total = sum(1 for r in rows if r["strategy"] == strategies[0] and r["variant"] != CONTROL) if strategies else 0
    planner = [r for r in rows if r["strategy"] == PLANNER and r["variant"] != CONTROL]
    text = (
        "A move's own cost on the broker it lands on (the *arrival cost* load models: topic loads, reconnections, "
        "redelivery and cold reads from the bookies for a few minutes after each arrival), measured minute by minute. "
    )
    if parts:
        text += (
            f"The worst broker's peak after a {PLOT_SCENARIO} at one decision a minute (means over seeds): "
            + "; ".join(parts)
            + ". "
        )
    text += f"Runs that push a broker above {HOT:.0%} where doing nothing stays below (of {total} each): {pushed}."
    if planner:
        text += f" The planner's largest rise right after a decision: {_plan_text(_largest_plan(planner))}."
    return text


def render(doc: dict[str, Any]) -> str:
    rows = doc["rows"]
    scenarios = _order(rows, "scenario")
    variants = _order(rows, "variant")
    cadences = _order(rows, "cadence")
    strategies = _order(rows, "strategy")
    movers = [s for s in strategies if s != NO_ACTION]
    after = doc.get("after_min", AFTER_MIN)
    out = [
        f"Scenarios {', '.join(scenarios)}; load models {', '.join(variants)}; cadences {', '.join(cadences)}; "
        f"seeds {doc['seeds']}; rate noise {doc['rate_noise']:.0%}; {len(rows)} runs, {doc['seconds']:.0f} s in all. "
        f"*Peak*: the worst broker's highest usage over the run (sampled every minute for the {after} minutes after "
        "each applied decision, and at every decision); *final*: its highest over the last 5 decisions. Means over "
        f"scenarios and seeds; *pushed > {HOT:.0%}*: runs where a broker goes above {HOT:.0%} while doing nothing "
        f"stays below; *after a move*: the worst broker's highest in the {after} minutes after a decision that "
        "moved bundles, minus doing nothing's over the same minutes (the largest, and the mean over such decisions).",
        "",
        figures.table(
            [
                "load model",
                "cadence",
                "strategy",
                "peak",
                "peak - no-action: mean / largest",
                "final - no-action",
                "moves",
                f"pushed > {HOT:.0%}",
                "after a move: largest / mean rise",
            ],
            [
                _summary_row(rows, v, c, s)
                for v in variants
                for c in cadences
                for s in strategies
                if any(r["variant"] == v and r["cadence"] == c and r["strategy"] == s for r in rows)
            ],
            "lllrllrrl",
        ),
        "",
    ]
    pushed = _pushed(rows)
    out.append(
        f"Runs that push a broker above {HOT:.0%} where doing nothing stays below: "
        + (
            "; ".join(
                f"{r['strategy']} on {r['scenario']} / {r['variant']} / {r['cadence']} / seed {r['seed']} "
                f"({r['peak']:.3f} at minute {r['peak_minute']}, doing nothing {r['na_peak']:.3f})"
                for r in pushed
            )
            if pushed
            else "none"
        )
        + "."
    )
    out += ["", "### Per scenario", ""]
    out.append(
        f"Cells: peak / final (moves), means over seeds; the planner's *after a move*: its worst broker's highest in "
        f"the {after} minutes after each decision that moved (largest rise over doing nothing's, with the decision's "
        "moves)."
    )
    out.append("")
    table_rows = []
    for v in variants:
        for c in cadences:
            for sc in scenarios:
                cell = [r for r in rows if r["variant"] == v and r["cadence"] == c and r["scenario"] == sc]
                if not cell:
                    continue
                line = [v, c, sc]
                for s in strategies:
                    runs = [r for r in cell if r["strategy"] == s]
                    line.append(
                        f"{_mean([r['peak'] for r in runs]):.3f} / {_mean([r['final_max'] for r in runs]):.3f} "
                        f"({_mean([r['moves'] for r in runs]):g})"
                        if runs
                        else "-"
                    )
                planner = [r for r in cell if r["strategy"] == PLANNER]
                rp = _largest_plan(planner)
                line.append(
                    "-"
                    if rp is None
                    else f"{rp[1]['after']:.3f} vs {rp[1]['no_action']:.3f} ({_moves(rp[1]['moves'])}, seed {rp[0]['seed']})"
                )
                table_rows.append(line)
    out.append(
        figures.table(
            ["load model", "cadence", "scenario", *strategies, f"{PLANNER} after a move"],
            table_rows,
        )
    )
    if movers:
        out += ["", f"Strategies compared with {NO_ACTION}: {', '.join(movers)}."]
    return "\n".join(out)


def _summary_row(rows: list[dict[str, Any]], variant: str, cadence: str, strategy: str) -> list[Any]:
    runs = [r for r in rows if r["variant"] == variant and r["cadence"] == cadence and r["strategy"] == strategy]
    name = f"**{strategy}**" if strategy == PLANNER else strategy
    peak = _mean([r["peak"] for r in runs])
    if strategy == NO_ACTION:
        return [variant, cadence, name, f"{peak:.3f}", "-", "-", sum(r["moves"] for r in runs), "-", "-"]
    with_base = [r for r in runs if r["na_peak"] is not None]
    excess = [r["peak"] - r["na_peak"] for r in with_base]
    worst = max(with_base, key=lambda r: r["peak"] - r["na_peak"], default=None)
    finals = [r["final_max"] - r["na_final"] for r in with_base]
    rises = [
        p["after"] - p["no_action"]
        for r in runs
        for p in r["plans"]
        if p["after"] is not None and p["no_action"] is not None
    ]
    return [
        variant,
        cadence,
        name,
        f"{peak:.3f}",
        f"{_mean(excess):+.3f} / {max(excess):+.3f} ({_cell(worst)})" if worst else "-",
        f"{_mean(finals):+.3f}" if finals else "-",
        sum(r["moves"] for r in runs),
        f"{len(_pushed(runs))} of {len(runs)}",
        f"{max(rises):+.3f} / {_mean(rises):+.3f} ({len(rises)} decision{'s' if len(rises) > 1 else ''})"
        if rises
        else "no move",
    ]


def plot(doc: dict[str, Any], out: Path) -> None:
    """Worst broker per minute on :data:`PLOT_SCENARIO` (first seed): a panel per load model and cadence, a line per
    strategy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = doc["series"]
    cadences = [c for c in CADENCES if c in data]
    variants = list(dict.fromkeys(v for c in cadences for v in data[c]))
    if not cadences or not variants:
        return
    fig, axes = plt.subplots(
        len(cadences), len(variants), figsize=(3.6 * len(variants), 3.0 * len(cadences) + 0.6), dpi=90, squeeze=False
    )
    handles: dict[str, Any] = {}
    for i, c in enumerate(cadences):
        for j, v in enumerate(variants):
            ax = axes[i][j]
            for strategy, pts in data[c].get(v, {}).items():
                xs, ys = [p[0] for p in pts], [p[1] for p in pts]
                (line,) = ax.plot(
                    xs,
                    ys,
                    label=strategy,
                    linewidth=2.2 if strategy == PLANNER else 1.1,
                    color="black" if strategy == PLANNER else None,
                    linestyle=":" if strategy == NO_ACTION else "-",
                    marker="." if c == "dag" else None,
                    markersize=3,
                )
                handles.setdefault(strategy, line)
            ax.axhline(HOT, color="red", linewidth=0.6, linestyle="--")
            ax.set_title(f"{v}, {c} cadence", fontsize=8)
            ax.set_xlabel("simulated minute", fontsize=7)
            ax.tick_params(labelsize=7)
            ax.grid(alpha=0.3)
    seed = min(doc["seeds"]) if doc.get("seeds") else 1
    fig.suptitle(
        f"{PLOT_SCENARIO} (two empty brokers join at minute 2), seed {seed}: the worst broker's usage per minute "
        f"(red: {HOT:.0%}); the DAG cadence's first {PLOT_DAG_MINUTES // 60} hours",
        fontsize=9,
    )
    fig.legend(list(handles.values()), list(handles), fontsize=7, ncol=len(handles), loc="lower center")
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)


BLOCKS = {"move-cost-report": render, "move-cost-headline": render_headline}
TARGETS = {"move-cost-report": [DOC], "move-cost-headline": [figures.BENCHMARKS_INDEX]}

if __name__ == "__main__":
    raise SystemExit(main())
