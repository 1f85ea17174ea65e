"""Closed-loop balance benchmark: every Pulsar shedding strategy, the GlobalPlanner and doing nothing, on named
scenarios, across load models and at two cadences.

Usage::

    .venv/bin/python benchmarks/bench_balance.py --jobs 2   # everything: writes docs/benchmarks/balance.md + .json,
                                                            # PNGs and the headline table in README.md
    # quick mode (a developer tuning the planner; one seed, no files written, a verdict table at the end):
    .venv/bin/python benchmarks/bench_balance.py --quick --scenarios steady-with-noise heterogeneous \
        --models convex-cpu --cadences minute --strategies GlobalPlanner no-action ThresholdShedder
    # the held-out load models (simulator/held_out_models.py, nobody tuned on them): exactly those, written to
    # docs/benchmarks/balance-held-out.md + .json instead of the main files
    .venv/bin/python benchmarks/bench_balance.py --held-out --rate-noise 0.03
    # the second held-out set (tls-crypto, bookie-backpressure): docs/benchmarks/balance-held-out-2.md + .json;
    # the third (catch-up-reads, gc-pressure) likewise with --held-out 3: balance-held-out-3.md + .json, the
    # fourth (topic-features, bundle-housekeeping) with --held-out 4: balance-held-out-4.md + .json, the
    # fifth (batching-concave, cold-arrival) with --held-out 5: balance-held-out-5.md + .json, the
    # sixth (shared-hosts, cold-start) with --held-out 6: balance-held-out-6.md + .json, the
    # seventh (smt-knee, offload-bursts) with --held-out 7: balance-held-out-7.md + .json, the
    # eighth (geo-replication, bookie-writes) with --held-out 8: balance-held-out-8.md + .json, and the
    # ninth (key-shared, entry-filters) with --held-out 9: balance-held-out-9.md + .json
    .venv/bin/python benchmarks/bench_balance.py --held-out 2 --rate-noise 0.03
    # after a change to the planner only (src/pulsar_rebalance/core/planner/): re-run the GlobalPlanner's cells
    # and merge them into the committed report (about a tenth of the runs); refused, naming the files, when
    # anything else under src/ changed since the stored run, or when the flags differ from the stored run's
    .venv/bin/python benchmarks/bench_balance.py --merge --rate-noise 0.03 --jobs 2

For each scenario, load model (``simulator/load_models.py``), cadence and seed, each strategy runs in a
closed loop on the deterministic cluster model (``simulator/dynamics.py``, scenarios in
``simulator/scenarios.py``, the loop in ``simulator/closed_loop.py``): at the ``minute`` cadence one
decision per simulated minute applied at once; at the ``dag`` cadence one decision per simulated hour
(the DAG's schedule) applied after the approval delay with the executor's checks. ``no-action`` is the
baseline. Metrics are defined in ``simulator/closed_loop.py``. Pulsar's strategies run with Pulsar's
defaults (ThresholdShedder also with ``lowerBoundarySheddingEnabled``; ThresholdShedder and
UniformLoadShedder also with ``defaultNamespaceBundleSplitAlgorithm: flow_or_qps_equally_divide``); the
planner with its defaults. The planner's "Done when" criteria (:func:`done_when`) are checked per
scenario x load model x cadence. Not a timed test: results are committed under ``docs/benchmarks/``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import figures  # noqa: E402  (benchmarks/figures.py: JSON + marked blocks in the docs)

from pulsar_rebalance.simulator.closed_loop import CADENCES, NO_ACTION, STRATEGIES, run_closed_loop  # noqa: E402
from pulsar_rebalance.simulator.held_out_models import HELD_OUT_SETS as HELD_OUT_SETS_1_2  # noqa: E402
from pulsar_rebalance.simulator.held_out_models_3 import HELD_OUT_LOAD_MODELS_3  # noqa: E402
from pulsar_rebalance.simulator.held_out_models_4 import HELD_OUT_LOAD_MODELS_4  # noqa: E402
from pulsar_rebalance.simulator.held_out_models_5 import HELD_OUT_LOAD_MODELS_5  # noqa: E402
from pulsar_rebalance.simulator.held_out_models_6 import HELD_OUT_LOAD_MODELS_6  # noqa: E402
from pulsar_rebalance.simulator.held_out_models_7 import HELD_OUT_LOAD_MODELS_7  # noqa: E402
from pulsar_rebalance.simulator.held_out_models_8 import HELD_OUT_LOAD_MODELS_8  # noqa: E402
from pulsar_rebalance.simulator.held_out_models_9 import HELD_OUT_LOAD_MODELS_9  # noqa: E402
from pulsar_rebalance.simulator.load_models import LOAD_MODELS, LoadModel  # noqa: E402
from pulsar_rebalance.simulator.scenarios import SCENARIOS, build  # noqa: E402

PLANNER = "GlobalPlanner"
PULSAR = [s for s in STRATEGIES if s not in (PLANNER, NO_ACTION)]
LARGE = {"large-zipf"}
QUICK_STRATEGIES = [PLANNER, NO_ACTION, "ThresholdShedder"]
FORMAT = 2
OWN_MODULE_SETS: Mapping[str, tuple[str, Mapping[str, Callable[[], LoadModel]]]] = {
    "3": ("held_out_models_3.py", HELD_OUT_LOAD_MODELS_3),
    "4": ("held_out_models_4.py", HELD_OUT_LOAD_MODELS_4),
    "5": ("held_out_models_5.py", HELD_OUT_LOAD_MODELS_5),
    "6": ("held_out_models_6.py", HELD_OUT_LOAD_MODELS_6),
    "7": ("held_out_models_7.py", HELD_OUT_LOAD_MODELS_7),
    "8": ("held_out_models_8.py", HELD_OUT_LOAD_MODELS_8),
    "9": ("held_out_models_9.py", HELD_OUT_LOAD_MODELS_9),
}
"""The held-out sets that live in a module of their own (``--held-out`` key -> the module's file under
``simulator/``, its models by name), so that the first two sets' module, which every stored run imported, is
unchanged (``--merge`` compares it): this script resolves their names itself (:data:`OWN_MODULE_MODELS`)."""
OWN_MODULE_MODELS = {name: model for _, models in OWN_MODULE_SETS.values() for name, model in models.items()}
"""The models of :data:`OWN_MODULE_SETS` by name (``run_one`` builds them; the load-model registry does not)."""
HELD_OUT_SETS = {**HELD_OUT_SETS_1_2, **{key: tuple(models) for key, (_, models) in OWN_MODULE_SETS.items()}}
"""The held-out sets by ``--held-out`` key."""
HELD_OUT = [m for models in HELD_OUT_SETS.values() for m in models]
"""Every held-out load model, set by set."""
MODELS = [*LOAD_MODELS, *HELD_OUT]
"""Every load model ``--models`` accepts: the default set (the ones the planner was tuned on), then the held-out ones."""
"""balance.json's format: 1 (no ``format`` key) = one load model, minute cadence; 2 = models x cadences."""

# the planner's "Done when" criteria (per scenario x load model x cadence)
TIE = 0.005
"""final max may exceed no-action's by this much (ties within half a point)."""
HOT = 0.85
STEADY_NOISE_MAX = 0.05
JITTER_MOVES_PER_DAY = 2.0
MOVES_FACTOR = 1.5


def _mean(rows: list[dict[str, Any]], key: str) -> float:
    return statistics.fmean(r[key] for r in rows)


def verdict(by_strategy: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The planner's goals checked for one scenario (means over seeds)."""
    p = by_strategy[PLANNER]
    final = _mean(p, "final_max")
    pulsar_final = {s: _mean(by_strategy[s], "final_max") for s in PULSAR if s in by_strategy}
    closest = min(pulsar_final, key=lambda s: (pulsar_final[s], _mean(by_strategy[s], "moves")))
    ideal = _mean(p, "ideal")
    floor = _mean(p, "floor")
    return {
        "floor": floor,
        "at_floor": final <= floor + 0.01,
        "nobody_moves": all(_mean(by_strategy[s], "moves") == 0 for s in by_strategy),
        "lower_than_all": all(final < v - 1e-9 for v in pulsar_final.values()),
        "tied_or_lower": all(final <= v + 1e-9 for v in pulsar_final.values()),
        "closest": closest,
        "closest_final": pulsar_final[closest],
        "closest_moves": _mean(by_strategy[closest], "moves"),
        "closest_idle_seeds": sum(r["moves"] == 0 for r in by_strategy[closest]),
        "seeds": len(p),
        "moves_ok": _mean(p, "moves") <= _mean(by_strategy[closest], "moves") + 1e-9,
        "within_5pct": final <= ideal * 1.05,
        # per seed: within 5 % of the ideal, or at a floor above that (granularity: what cannot be split)
        "seeds_within": sum(r["final_max"] <= r["ideal"] * 1.05 for r in p),
        "seeds_at_floor": sum(
            r["final_max"] > r["ideal"] * 1.05
            and r["floor"] > r["ideal"] * 1.05
            and r["final_max"] <= r["floor"] + 0.01
            for r in p
        ),
        "ping_pong": sum(r["ping_pong"] for r in p),
        "churn": sum(r["churn"] for r in p),
        "final": final,
        "moves": _mean(p, "moves"),
        "ideal": ideal,
    }


def plot(title: str, panels: dict[str, tuple[dict[str, list[float]], list[float]]], out: Path, xlabel: str) -> None:
    """One figure: a panel per scenario (worst broker usage per strategy, first seed; the ideal dashed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(panels)
    cols = min(5, n)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 2.9 * rows + 0.8), dpi=90, squeeze=False)
    handles: dict[str, Any] = {}
    for ax, (scenario, (series, ideal)) in zip(axes.flat, panels.items()):
        for strategy, ys in series.items():
            (line,) = ax.plot(
                range(len(ys)),
                ys,
                label=strategy,
                linewidth=2.2 if strategy == PLANNER else 1.0,
                color="black" if strategy == PLANNER else None,
                linestyle=":" if strategy == NO_ACTION else "-",
            )
            handles.setdefault(strategy, line)
        (line,) = ax.plot(range(len(ideal)), ideal, "--", color="grey", label="ideal (load / capacity)")
        handles.setdefault("ideal (load / capacity)", line)
        ax.set_title(scenario, fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    fig.suptitle(f"{title}; y: worst broker usage (capacity-normalised), x: {xlabel}", fontsize=9)
    fig.legend(list(handles.values()), list(handles), fontsize=7, ncol=min(6, len(handles)), loc="lower center")
    fig.tight_layout(rect=(0, 0.02 + 0.035 * ((len(handles) + 5) // 6), 1, 1))  # room for the legend's rows
    fig.savefig(out)
    plt.close(fig)


def plot_figures(series: dict[str, Any], img_dir: Path, models: Sequence[str], scenarios: Sequence[str]) -> None:
    """One figure per load model and cadence of ``series`` (model -> cadence -> scenario -> ``max_usage`` per
    strategy and ``ideal``, the first seed's), ``img_dir/<model>-<cadence>.png``: a panel per scenario (:func:`plot`)."""
    img_dir.mkdir(parents=True, exist_ok=True)
    for model in _by_order(series, models):
        for cadence in _by_order(series[model], CADENCES):
            by_scenario = series[model][cadence]
            xlabel = "decision (1 per simulated minute)" if cadence == "minute" else "decision (1 per simulated hour)"
            plot(
                f"load model {model}, cadence {cadence} (first seed)",
                {
                    sc: (
                        {
                            st: by_scenario[sc]["max_usage"][st]
                            for st in _by_order(by_scenario[sc]["max_usage"], STRATEGIES)
                        },
                        by_scenario[sc]["ideal"],
                    )
                    for sc in _by_order(by_scenario, scenarios)
                },
                img_dir / f"{model}-{cadence}.png",
                xlabel,
            )


Task = tuple[str, str, str, str, int, "float | None", float, int, "float | None", "int | None", bool]


def run_one(task: Task) -> tuple[Task, dict[str, Any], list[float], list[float], float]:
    """One closed-loop run (a process pool's unit of work): summary, worst-broker and ideal series, seconds."""
    scenario, model, cadence, strategy, seed, noise, rate_noise, delay, drift, per_run, guard = task
    logging.getLogger("pulsar_rebalance").setLevel(logging.ERROR)
    t0 = time.perf_counter()
    # the held-out sets in a module of their own are resolved here, not by the load-model registry (OWN_MODULE_SETS)
    load_model = OWN_MODULE_MODELS[model]() if model in OWN_MODULE_MODELS else model
    run = build(scenario, seed, load_model=load_model, noise=noise, rate_noise=rate_noise)
    r = run_closed_loop(
        run,
        strategy,
        cadence=cadence,
        approval_delay_min=delay,
        drift_tolerance=drift,
        max_unloads_per_run=per_run,
        guard=guard,
    )
    summary = r.summary()
    # decisions that moved at least one bundle (one relief in several moves, or churn), counted here rather than in
    # the closed loop's summary so that its source, which every stored run's digests name, stays as they ran it
    summary["plans"] = sum(1 for n in r.moves_per_cycle if n)
    summary["noise"] = run.model.noise
    summary["rate_noise"] = run.model.rate_noise
    return task, summary, r.max_usage, r.ideal, time.perf_counter() - t0


Series = dict[str, dict[str, dict[str, dict[str, Any]]]]
"""model -> cadence -> scenario -> {"ideal": [...], "max_usage": {strategy: [...]}}: the first seed's worst-broker
series, what the plots draw (stored in the JSON so that ``--merge`` can redraw every strategy's lines)."""

PLANNER_SOURCES = "pulsar_rebalance/core/planner/"
"""The planner's own code: the only sources ``--merge`` lets differ from the stored run's."""


def _rel(path: Path) -> str:
    """``path`` as the docs' markers name it: relative to the repository (absolute when outside it)."""
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)


def _series(values: Sequence[float]) -> list[float]:
    return [round(v, 5) for v in values]


def _by_order(keys: Any, order: Any) -> list[str]:
    """``keys`` in their defined ``order`` (the JSON stores them sorted), unknown ones last."""
    return [k for k in order if k in keys] + sorted(k for k in keys if k not in order)


def run_params(args: argparse.Namespace, seeds: list[int]) -> dict[str, Any]:
    """What a run's results depend on besides the code: stored with the results, compared by ``--merge``."""
    return {
        "seeds": seeds,
        "large_seeds": args.large_seeds,
        "noise": args.noise,
        "rate_noise": args.rate_noise,
        "approval_delay_min": args.approval_delay_min,
        "drift_tolerance": args.drift_tolerance,
        "max_unloads_per_run": args.max_unloads_per_run,
        "guard": not args.no_guard,
    }


def source_digests() -> dict[str, str]:
    """SHA-256 of every Python source of the package the runs import (``pulsar_rebalance/...`` -> hex)."""
    import pulsar_rebalance

    package = Path(pulsar_rebalance.__file__).resolve().parent
    return {
        f"pulsar_rebalance/{p.relative_to(package).as_posix()}": hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(package.rglob("*.py"))
    }


def imported_sources(*scripts: Path) -> set[str]:
    """The package's sources (``pulsar_rebalance/...``) that ``scripts`` (default: this benchmark) can import,
    followed statically and conservatively: every import statement anywhere in a module (function-level
    ones too), the packages around each imported module, the sibling scripts a script imports
    (``benchmarks/figures.py``, ``bench_balance.py``), and every module under a ``"pulsar_rebalance.<...>"``
    string constant a module holds (the strategy registry, ``core/strategies.py``, imports its classes by
    name). A source outside this set cannot change a run's result."""
    import ast

    import pulsar_rebalance

    package = Path(pulsar_rebalance.__file__).resolve().parent
    modules: dict[str, Path] = {}
    for p in sorted(package.rglob("*.py")):
        rel = p.relative_to(package.parent).with_suffix("").parts
        modules[".".join(rel[:-1] if rel[-1] == "__init__" else rel)] = p

    def names(path: Path, module: str | None) -> set[str]:
        out: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                out.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level and module:  # relative: from the module's package, one level up per extra dot
                    pkg = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
                    pkg = pkg[: len(pkg) - node.level + 1]
                    base = ".".join([*pkg, base] if base else pkg)
                out.add(base)
                out.update(f"{base}.{a.name}" for a in node.names)  # `from package import module`
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                prefix = node.value.split(":")[0].rstrip(".")  # "pulsar_rebalance.core.pulsar.shedders." + name
                if prefix.startswith("pulsar_rebalance."):  # not the bare package name: that is every module
                    out.update(m for m in modules if m == prefix or m.startswith(prefix + "."))
        return out

    seen: set[str] = set()
    todo = [(s.resolve(), None) for s in scripts or (Path(__file__),)]
    parsed: set[Path] = set()
    while todo:
        path, module = todo.pop()
        if path in parsed:
            continue
        parsed.add(path)
        for name in names(path, module):
            if module is None and (path.parent / f"{name}.py").is_file():  # a sibling script
                todo.append(((path.parent / f"{name}.py").resolve(), None))
            parts = name.split(".")
            for k in range(1, len(parts) + 1):  # importing a.b.c runs a and a.b as well
                m = ".".join(parts[:k])
                if m in modules and m not in seen:
                    seen.add(m)
                    todo.append((modules[m], m))
    return {f"pulsar_rebalance/{modules[m].relative_to(package).as_posix()}" for m in seen}


def unreferenced_sources(*scripts: Path) -> set[str]:
    """The package's sources that nothing ``scripts`` (default: this benchmark) run can import
    (:func:`imported_sources`), so a change to one cannot change a result: e.g.
    ``simulator/random_models.py`` for this benchmark (only ``bench_random_models.py`` and tests import
    it), or the Airflow pipeline's modules, which the closed loop never imports."""
    return set(source_digests()) - imported_sources(*scripts)


def merge_problems(
    stored: dict[str, Any],
    params: dict[str, Any],
    models: Sequence[str],
    digests: dict[str, str],
    unreferenced: Collection[str] | None = None,
) -> list[str]:
    """Why the planner's new cells cannot be merged into ``stored`` (empty: they can): the stored run must
    carry its series and source digests, have run with the same flags and load models, and only the
    planner's sources may differ from the ones it ran (else the other strategies' results would be stale) -
    or ``unreferenced`` ones (:func:`unreferenced_sources`), which nothing the runs execute imports."""
    if "series" not in stored or "sources" not in stored:
        return [
            f"the stored run ({stored.get('meta', {}).get('date', 'undated')}) has no per-run series or source "
            "digests (it predates --merge): run the full benchmark once"
        ]
    problems = [
        f"{key}: the stored run used {stored.get(key)!r}, this command {value!r} (pass the stored run's flags: "
        f"`{stored.get('merged', {}).get('base', stored['meta'])['command']}`)"
        for key, value in params.items()
        if stored.get(key) != value
    ]
    if set(stored["results"]) != set(models):
        problems.append(f"load models: the stored run has {sorted(stored['results'])}, this set is {sorted(models)}")
    stale = stale_sources(stored["sources"], digests, unreferenced or ())
    if stale:
        problems.append(stale)
    return problems


def merge_flags_problem(args: argparse.Namespace) -> str | None:
    """Why ``--merge`` cannot run with these flags (None: it can): it writes the merged report (no ``--quick`` nor
    ``--no-write``), re-runs every scenario, load model and cadence of the stored run (no ``--models``,
    ``--scenarios`` nor ``--cadences``) and the planner only (``--strategies`` the planner at most). Shared with
    ``bench_held_out_scenarios.py``, whose flags of those names mean the same."""
    unwritten = [
        flag for flag, given in (("--quick", getattr(args, "quick", False)), ("--no-write", args.no_write)) if given
    ]
    if unwritten:
        return f"--merge writes the merged report: leave out {' and '.join(unwritten)}"
    if args.models is not None or args.scenarios is not None or args.cadences != list(CADENCES):
        return (
            "--merge re-runs every scenario, load model and cadence of the stored run: leave out "
            "--models, --scenarios and --cadences"
        )
    if args.strategies not in (None, [PLANNER]):
        return f"--merge re-runs the {PLANNER} only (the other strategies' code must not have changed)"
    return None


def refused(json_path: Path, problems: Sequence[str]) -> bool:
    """Whether there are ``problems`` (:func:`merge_problems`'), printed under the stored JSON's name if so."""
    if problems:
        print(f"cannot merge into {json_path}:", file=sys.stderr)
        for problem in problems:
            print(f"  - {problem}", file=sys.stderr)
    return bool(problems)


def stale_sources(before: dict[str, str], digests: dict[str, str], unreferenced: Collection[str]) -> str | None:
    """The problem (None: none) with sources that changed since a stored run outside the planner's and
    ``unreferenced``: the other strategies' stored results would be stale. A file added since is left out:
    nothing imports it unless a file the stored run had changed too (the package imports modules by fixed
    names), and that change is caught here."""
    outside = sorted(
        f for f in before if before[f] != digests.get(f) and not f.startswith(PLANNER_SOURCES) and f not in unreferenced
    )
    if not outside:
        return None
    return (
        f"changed since the stored run outside {PLANNER_SOURCES} (the other strategies' results would be "
        f"stale; run the full benchmark): {', '.join(outside)}"
    )


def merge_doc(
    stored: dict[str, Any],
    results: Results2,
    series: Series,
    strategies: Sequence[str],
    elapsed: float,
    meta: dict[str, Any],
    digests: dict[str, str],
) -> dict[str, Any]:
    """``stored`` with ``strategies``' cells and series replaced by this run's (every cell of the stored run
    must be re-run), the current source ``digests``, and provenance naming both runs."""
    doc = json.loads(json.dumps(stored))
    cells = {(m, c, sc) for m, by_c in stored["results"].items() for c, by_sc in by_c.items() for sc in by_sc}
    rerun = {(m, c, sc) for m, by_c in results.items() for c, by_sc in by_c.items() for sc in by_sc}
    if cells != rerun:
        raise ValueError(f"the re-run does not cover the stored run's cells: missing {sorted(cells - rerun)[:5]}")
    for m, c, sc in cells:
        for st in strategies:
            doc["results"][m][c][sc][st] = results[m][c][sc][st]
            doc["series"][m][c][sc]["max_usage"][st] = series[m][c][sc]["max_usage"][st]
    doc["results"] = ordered_v2(doc["results"])
    doc["sources"] = digests
    base = stored.get("merged", {}).get("base") or {
        "date": stored["meta"]["date"],
        "command": stored["meta"]["command"],
        "elapsed_s": stored["elapsed_s"],
    }
    doc["merged"] = {"strategies": list(strategies), "elapsed_s": round(elapsed), "base": base}
    doc["meta"] = {
        **meta,
        "note": f"{', '.join(strategies)} re-run by this command ({round(elapsed)} s) and merged: every other "
        f"strategy's results are from the full run of {base['date']} (`{base['command']}`), whose sources differ "
        f"from these only in the planner's ({PLANNER_SOURCES}) and in modules nothing the runs execute imports",
    }
    return doc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenarios", nargs="*", default=None, help="default: all (quick mode: all but large-zipf)")
    parser.add_argument(
        "--models",
        nargs="*",
        default=None,
        help=f"load models (default: {', '.join(LOAD_MODELS)}; the held-out {', '.join(HELD_OUT)} only when named)",
    )
    parser.add_argument(
        "--held-out",
        nargs="?",
        const="1",
        default=None,
        choices=list(HELD_OUT_SETS),
        help="run exactly a held-out set of load models, written to its own report instead of the main files: "
        + "; ".join(
            f"{key} ({', '.join(models)}{', the default' if key == '1' else ''}): "
            f"docs/benchmarks/{HELD_OUT_OUTPUTS[key][0].stem}.md + .json"
            for key, models in HELD_OUT_SETS.items()
        ),
    )
    parser.add_argument("--cadences", nargs="*", default=list(CADENCES), help="minute, dag (default: both)")
    parser.add_argument(
        "--strategies", nargs="*", default=None, help="default: all (quick mode: " + " ".join(QUICK_STRATEGIES) + ")"
    )
    parser.add_argument("--seeds", nargs="*", type=int, default=None, help="default 1 2 3 (quick mode: 1)")
    parser.add_argument(
        "--large-seeds", nargs="*", type=int, default=[1], help="seeds for large-zipf (slower; default 1)"
    )
    parser.add_argument("--noise", type=float, default=None, help="CPU noise, 0-0.1 (default: each scenario's, 2-3 %%)")
    parser.add_argument("--rate-noise", type=float, default=0.0, help="noise on reported bundle/topic rates, 0-0.1")
    parser.add_argument(
        "--approval-delay-min", type=int, default=15, help="dag cadence: minutes from decision to apply"
    )
    parser.add_argument(
        "--drift-tolerance", type=float, default=0.5, help="dag cadence: the executor's drift_tolerance (<0: no check)"
    )
    parser.add_argument(
        "--max-unloads-per-run", type=int, default=None, help="dag cadence: the executor's cap (default: none)"
    )
    parser.add_argument(
        "--jobs", type=int, default=1, help=f"worker processes (this machine has {os.cpu_count() or 1} cores)"
    )
    parser.add_argument("--quick", action="store_true", help="one seed, small scenarios, 3 strategies, --no-write")
    parser.add_argument("--verbose", action="store_true", help="one line per run (per seed) as it finishes")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument(
        "--no-guard",
        action="store_true",
        help="the strategies' raw decisions, without the do-no-harm guard plan_split applies (default: with it)",
    )
    parser.add_argument(
        "--merge",
        action="store_true",
        help="re-run only the GlobalPlanner's cells with the stored run's seeds and flags and merge them into the "
        "committed JSON and report (every other strategy's results kept); refused when files outside "
        "src/pulsar_rebalance/core/planner/ changed since the stored run",
    )
    parser.add_argument(
        "--render",
        action="store_true",
        help="only re-render the report and the README headline from the committed docs/benchmarks/balance.json "
        "(with --held-out [SET]: that set's report from its JSON, e.g. balance-held-out.json)",
    )
    args = parser.parse_args(argv)
    if args.held_out and args.models is not None:
        parser.error("--held-out runs exactly the held-out load models: leave out --models")
    json_path, targets = HELD_OUT_OUTPUTS[args.held_out] if args.held_out else (JSON, TARGETS)
    the_set = HELD_OUT_SETS[args.held_out] if args.held_out else tuple(LOAD_MODELS)
    if args.render:
        doc = json.loads(json_path.read_text(encoding="utf-8"))
        figures.update(SCRIPT, _rel(json_path), doc, targets)
        if args.held_out:
            write_sets()
        return 0
    if args.merge:
        flags = merge_flags_problem(args)
        if flags:
            parser.error(flags)
        args.strategies = [PLANNER]
    if args.models is None:
        args.models = list(the_set)
    if args.quick:
        args.no_write = True
    scenarios = args.scenarios or ([s for s in SCENARIOS if s not in LARGE] if args.quick else list(SCENARIOS))
    strategies = args.strategies or (QUICK_STRATEGIES if args.quick else list(STRATEGIES))
    seeds = args.seeds or ([1] if args.quick else [1, 2, 3])
    for name, given, known in (
        ("scenario", scenarios, SCENARIOS),
        ("load model", args.models, MODELS),
        ("cadence", args.cadences, CADENCES),
        ("strategy", strategies, STRATEGIES),
    ):
        unknown = [g for g in given if g not in known]
        if unknown:
            parser.error(f"unknown {name} {', '.join(unknown)}; known: {', '.join(known)}")
    for flag, value in (("--noise", args.noise), ("--rate-noise", args.rate_noise)):
        if value is not None and not 0.0 <= value <= 0.1:
            parser.error(f"{flag} must be in [0, 0.1], got {value}")
    params = run_params(args, seeds)
    digests = source_digests()  # before the runs: what they import
    stored: dict[str, Any] | None = None
    if args.merge:
        if not json_path.exists():
            print(f"cannot merge: {json_path} does not exist; run the full benchmark first", file=sys.stderr)
            return 2
        stored = json.loads(json_path.read_text(encoding="utf-8"))
        if refused(json_path, merge_problems(stored, params, the_set, digests, unreferenced_sources())):
            return 2
    # Pulsar's split trigger logs every refused split (namespace at its bundle limit): not news here
    logging.getLogger("pulsar_rebalance").setLevel(logging.ERROR)

    tasks: list[Task] = [
        (
            sc,
            model,
            cadence,
            strategy,
            seed,
            args.noise,
            args.rate_noise,
            args.approval_delay_min,
            None if args.drift_tolerance < 0 else args.drift_tolerance,
            args.max_unloads_per_run,
            not args.no_guard,
        )
        for sc in scenarios
        for model in args.models
        for cadence in args.cadences
        for seed in (args.large_seeds if sc in LARGE else seeds)
        for strategy in strategies
    ]
    tasks.sort(key=lambda t: t[0] not in LARGE)  # the long ones first: the pool ends together
    results: dict[str, dict[str, dict[str, dict[str, list[dict[str, Any]]]]]] = {}
    series: Series = {}
    load = figures.LoadSampler()
    load.__enter__()
    started = time.perf_counter()
    done: list[tuple[Task, dict[str, Any], list[float], list[float], float]] = []
    print(f"{len(tasks)} runs on {max(1, args.jobs)} worker(s)", file=sys.stderr, flush=True)
    progress = figures.Progress(len(tasks))
    if args.jobs > 1:
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            for item in pool.map(run_one, tasks):
                done.append(item)
                _progress(item, args.verbose, progress)
    else:
        for task in tasks:
            done.append(run_one(task))
            _progress(done[-1], args.verbose, progress)
    elapsed = time.perf_counter() - started
    load.__exit__(None, None, None)
    order = {t: i for i, t in enumerate(sorted(tasks, key=lambda t: (t[1], t[2], scenarios.index(t[0]), t[4])))}
    for task, summary, max_usage, ideal, _ in sorted(done, key=lambda d: order[d[0]]):
        sc, model, cadence, strategy, seed = task[:5]
        results.setdefault(model, {}).setdefault(cadence, {}).setdefault(sc, {}).setdefault(strategy, []).append(
            summary
        )
        first = args.large_seeds[0] if sc in LARGE else seeds[0]
        if seed == first:
            panel = series.setdefault(model, {}).setdefault(cadence, {}).setdefault(sc, {"ideal": _series(ideal)})
            panel.setdefault("max_usage", {})[strategy] = _series(max_usage)
    results = ordered_v2(results)
    merged = (
        None if stored is None else merge_doc(stored, results, series, strategies, elapsed, figures.meta(load), digests)
    )
    if merged is not None:  # the verdicts below are the merged report's: the planner against everyone stored
        results = merged["results"]
    print(
        f"\n{len(tasks)} runs in {elapsed:.0f} s (means over seeds {seeds}"
        + (f", large-zipf {args.large_seeds}" if any(s in LARGE for s in scenarios) else "")
        + ")"
    )
    for line in summary_lines(results):
        print(line)
    print()
    for line in verdict_lines(results):
        print(line)
    if args.no_write:
        return 0
    full = (
        set(scenarios) == set(SCENARIOS)
        and set(args.models) == set(the_set)
        and set(args.cadences) == set(CADENCES)
        and {PLANNER, NO_ACTION} <= set(strategies)
    )
    if merged is not None:
        doc = merged
    elif not full:
        print(
            "partial run (not every scenario, load model of the set and cadence, or no planner / no-action): "
            "nothing written; the docs are written by a full run only (--held-out: of the held-out models)",
            file=sys.stderr,
        )
        return 0
    else:
        doc = {
            "format": FORMAT,
            "meta": figures.meta(load),
            **params,
            "elapsed_s": round(elapsed),
            "results": results,
            "series": series,
            "sources": digests,
        }
    plot_figures(doc["series"], json_path.parent / "balance", MODELS, SCENARIOS)
    if args.held_out:
        doc["held_out"] = True
    if args.held_out not in (None, "1"):
        doc["held_out_set"] = args.held_out
    figures.write_json(json_path, doc)
    for name, paths in targets.items():
        for path in paths:
            _ensure_report(path, name, _rel(json_path))
    figures.update(
        SCRIPT,
        _rel(json_path),
        doc,
        targets,
    )
    if args.held_out:
        write_sets()
    return 0


def _ensure_report(path: Path, name: str, json_rel: str) -> None:
    """A held-out set's report that does not exist yet: its title, a line on what it is and the (empty) marked
    block the run then fills."""
    if path.exists():
        return
    models = HELD_OUT_SETS[HELD_OUT_SET_OF_BLOCK[name]]
    path.write_text(
        "# Benchmark: closed-loop balance on held-out load models (set "
        + HELD_OUT_SET_OF_BLOCK[name]
        + ")\n\nThe main balance benchmark ([balance.md](balance.md)) runs the load models the GlobalPlanner was tuned "
        "on. This report runs the same scenarios, strategies, cadences and criteria on load models nobody tuned on "
        f"(`src/pulsar_rebalance/simulator/{held_out_module(HELD_OUT_SET_OF_BLOCK[name])}`: "
        + ", ".join(f"*{m}*" for m in models)
        + "; their formulas are in that module's docstring).\n\n"
        f"<!-- {name}:start (written by {SCRIPT} from {json_rel}) -->\n<!-- {name}:end -->\n",
        encoding="utf-8",
    )
    print(f"created {path}", file=sys.stderr)


def _progress(
    item: tuple[Task, dict[str, Any], list[float], list[float], float], verbose: bool, progress: figures.Progress
) -> None:
    """A line per run with ``--verbose``; else every 20 runs, how many are done and about how long is left."""
    task, s, _, _, seconds = item
    if verbose:
        print(
            f"{task[0]:29s} {task[1]:22s} {task[2]:6s} seed {task[4]} {task[3]:28s} final {s['final_max']:.3f} "
            f"worst {s['worst_max']:.3f} moves {s['moves']:4d} ideal {s['ideal']:.3f} ({seconds:.1f} s)",
            flush=True,
        )
    else:
        progress.tick()


# ---------------------------------------------------------------- format 2: load models x cadences

Results2 = dict[str, dict[str, dict[str, dict[str, list[dict[str, Any]]]]]]
"""load model -> cadence -> scenario -> strategy -> one summary per seed."""


def ordered_v2(results: Results2) -> Results2:
    """Models, cadences, scenarios and strategies in their defined order (the JSON stores them sorted)."""
    return {
        m: {
            c: {
                sc: {st: results[m][c][sc][st] for st in _by_order(results[m][c][sc], STRATEGIES)}
                for sc in _by_order(results[m][c], SCENARIOS)
            }
            for c in _by_order(results[m], CADENCES)
        }
        for m in _by_order(results, MODELS)
    }


def closest_pulsar(by: dict[str, list[dict[str, Any]]]) -> str | None:
    """The Pulsar strategy ending closest to the ideal (lowest mean final max; fewer moves on ties)."""
    pulsar = [s for s in by if s not in (PLANNER, NO_ACTION)]
    if not pulsar:
        return None
    return min(pulsar, key=lambda s: (round(_mean(by[s], "final_max"), 9), _mean(by[s], "moves"), s))


def _steady_detail(r: dict[str, Any], base: dict[str, Any] | None) -> str:
    """A steady run the planner moved in, with how far from balanced doing nothing left that cluster (a load model
    whose brokers differ in ways their reports do not show leaves a "steady" cluster unbalanced) and where the
    planner ended."""
    out = f"seed {r['seed']}: {r['moves']} moves"
    if base is not None:
        out += (
            f" (doing nothing ends {base['final_max'] - base['ideal']:+.3f} from the ideal,"
            f" the planner {r['final_max'] - r['ideal']:+.3f})"
        )
    return out


def _jitter_detail(r: dict[str, Any], base: dict[str, Any] | None) -> str:
    """A run over the jitter budget, with what tells one relief from churn where the run recorded it: in how many
    decisions the moves came, and where it ended against doing nothing."""
    out = f"seed {r['seed']}: {r['moves']} moves = {r['moves_per_day']:.1f}/day"
    plans = r.get("plans")
    if plans is not None:
        out += f" in {plans} plan{'' if plans == 1 else 's'}"
    if base is not None:
        diff = r["final_max"] - base["final_max"]
        side = "level with" if abs(diff) < 0.0005 else f"{abs(diff):.3f} {'below' if diff < 0 else 'above'}"
        out += f", ending {side} no-action"
    return out


def done_when(scenario: str, by: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The planner's "Done when" criteria on one scenario x load model x cadence (seeds paired by seed).

    Each criterion: ``{"key", "name", "ok": True | False | None (not applicable / not measured), "detail"}``."""
    out: list[dict[str, Any]] = []

    def add(key: str, name: str, ok: bool | None, detail: str) -> None:
        out.append({"key": key, "name": name, "ok": ok, "detail": detail})

    p = by.get(PLANNER)
    if not p:
        return [{"key": k, "name": n, "ok": None, "detail": "planner not run"} for k, n in CRITERIA]
    na = {r["seed"]: r for r in by.get(NO_ACTION, [])}
    pairs = [(r, na[r["seed"]]) for r in p if r["seed"] in na]
    if pairs:
        worse = [(r, n) for r, n in pairs if r["final_max"] > n["final_max"] + TIE]
        add(
            "not_worse",
            CRITERIA[0][1],
            not worse,
            "; ".join(f"seed {r['seed']}: {r['final_max']:.3f} > {n['final_max']:.3f} + {TIE}" for r, n in worse)
            or f"{_mean(p, 'final_max'):.3f} vs no-action {_mean([n for _, n in pairs], 'final_max'):.3f}",
        )
        hot = [(r, n) for r, n in pairs if r["worst_max"] > HOT and n["worst_max"] <= HOT]
        add(
            "no_hot",
            CRITERIA[1][1],
            not hot,
            "; ".join(f"seed {r['seed']}: worst {r['worst_max']:.3f} (no-action {n['worst_max']:.3f})" for r, n in hot)
            or f"worst {max(r['worst_max'] for r in p):.3f}",
        )
    else:
        add("not_worse", CRITERIA[0][1], None, "no-action not run")
        add("no_hot", CRITERIA[1][1], None, "no-action not run")
    quiet = all(r.get("noise", 0.0) <= STEADY_NOISE_MAX and r.get("rate_noise", 0.0) <= STEADY_NOISE_MAX for r in p)
    if scenario == "steady-with-noise" and quiet:
        moved = [r for r in p if r["moves"]]
        add(
            "steady",
            CRITERIA[2][1],
            not moved,
            "; ".join(_steady_detail(r, na.get(r["seed"])) for r in moved) or "0 moves",
        )
    else:
        add("steady", CRITERIA[2][1], None, "n/a")
    if scenario == "periodic-jitter":
        busy = [r for r in p if r["moves_per_day"] > JITTER_MOVES_PER_DAY]
        add(
            "jitter",
            CRITERIA[3][1],
            not busy,
            "; ".join(_jitter_detail(r, na.get(r["seed"])) for r in busy) or f"{_mean(p, 'moves_per_day'):.1f}/day",
        )
    else:
        add("jitter", CRITERIA[3][1], None, "n/a")
    closest = closest_pulsar(by)
    if closest is None:
        add("moves", CRITERIA[4][1], None, "no Pulsar strategy: not run")
    else:
        pf, cf = _mean(p, "final_max"), _mean(by[closest], "final_max")
        pm, cm = _mean(p, "moves"), _mean(by[closest], "moves")
        if pf < cf - 1e-9:
            # what each bought with its moves: how far below doing nothing it ended (the criterion's trade-off)
            nf = _mean(by[NO_ACTION], "final_max") if by.get(NO_ACTION) else None
            gained = "" if nf is None else f"; below no-action's {nf:.3f} by {nf - pf:.3f} vs {nf - cf:.3f}"
            add(
                "moves",
                CRITERIA[4][1],
                pm <= MOVES_FACTOR * cm + 1e-9,
                f"{pm:.1f} moves vs {closest} {cm:.1f} (final {pf:.3f} < {cf:.3f}{gained})",
            )
        else:
            add("moves", CRITERIA[4][1], None, f"not lower than {closest} ({pf:.3f} vs {cf:.3f})")
    return out


CRITERIA = [
    ("not_worse", f"final max <= no-action's + {TIE}"),
    ("no_hot", f"no broker above {HOT:.0%} where no-action stays below"),
    ("steady", f"0 moves at steady state (noise <= {STEADY_NOISE_MAX:.0%})"),
    ("jitter", f"<= {JITTER_MOVES_PER_DAY:g} moves per simulated day under periodic jitter"),
    ("moves", f"<= {MOVES_FACTOR:g}x the moves of the closest Pulsar strategy where lower"),
]


def _cell(c: dict[str, Any]) -> str:
    return {True: "ok", False: "**FAIL**", None: "-"}[c["ok"]]


def cases(results: Results2) -> list[dict[str, Any]]:
    """Per scenario x load model x cadence where the planner and no-action both ran: the planner's mean final
    max minus no-action's (positive: the planner ends worse than doing nothing)."""
    out = []
    for m, by_c in results.items():
        for c, by_sc in by_c.items():
            for sc, by in by_sc.items():
                if PLANNER in by and NO_ACTION in by:
                    pf, nf = _mean(by[PLANNER], "final_max"), _mean(by[NO_ACTION], "final_max")
                    pw, nw = _mean(by[PLANNER], "worst_max"), _mean(by[NO_ACTION], "worst_max")
                    out.append(
                        {
                            "model": m,
                            "cadence": c,
                            "scenario": sc,
                            "planner": pf,
                            "no_action": nf,
                            "delta": pf - nf,
                            "planner_worst": pw,
                            "no_action_worst": nw,
                            "delta_worst": pw - nw,
                        }
                    )
    return out


def worst_run(results: Results2) -> dict[str, Any] | None:
    """The single run (one seed) where the planner ends furthest above no-action on the same seed: means over
    seeds can hide one seed where it ended worse."""
    worst: dict[str, Any] | None = None
    for m, by_c in results.items():
        for c, by_sc in by_c.items():
            for sc, by in by_sc.items():
                na = {r["seed"]: r for r in by.get(NO_ACTION, [])}
                for r in by.get(PLANNER, []):
                    n = na.get(r["seed"])
                    if n is not None and (worst is None or r["final_max"] - n["final_max"] > worst["delta"]):
                        worst = {
                            "model": m,
                            "cadence": c,
                            "scenario": sc,
                            "seed": r["seed"],
                            "planner": r["final_max"],
                            "no_action": n["final_max"],
                            "delta": r["final_max"] - n["final_max"],
                        }
    return worst


def _run_text(k: dict[str, Any]) -> str:
    return f"{k['scenario']} / {k['model']} / {k['cadence']}, seed {k['seed']}: planner {k['planner']:.3f} vs no-action {k['no_action']:.3f} ({k['delta']:+.3f})"


def _transient_text(k: dict[str, Any]) -> str:
    return (
        f"{k['scenario']} / {k['model']} / {k['cadence']}: worst max planner {k['planner_worst']:.3f} vs no-action "
        f"{k['no_action_worst']:.3f} ({k['delta_worst']:+.3f})"
    )


def _case_text(k: dict[str, Any]) -> str:
    return (
        f"{k['scenario']} / {k['model']} / {k['cadence']}: planner {k['planner']:.3f} vs no-action "
        f"{k['no_action']:.3f} ({k['delta']:+.3f})"
    )


def summary_lines(results: Results2) -> list[str]:
    """Quick mode's table: one line per scenario x model x cadence x strategy (means over seeds)."""
    lines = [
        f"{'scenario':29s} {'load model':22s} {'cadence':7s} {'strategy':28s} {'final':>6s} {'worst':>6s} "
        f"{'moves':>6s} {'ideal':>6s}"
    ]
    for m, by_c in results.items():
        for c, by_sc in by_c.items():
            for sc, by in by_sc.items():
                for st, rows in by.items():
                    lines.append(
                        f"{sc:29s} {m:22s} {c:7s} {st:28s} {_mean(rows, 'final_max'):6.3f} "
                        f"{_mean(rows, 'worst_max'):6.3f} {_mean(rows, 'moves'):6.1f} {_mean(rows, 'ideal'):6.3f}"
                    )
    return lines


def verdict_lines(results: Results2) -> list[str]:
    """One line per scenario x model x cadence: PASS, or FAIL with the failed criteria; then worst/best case."""
    lines = ["verdict (GlobalPlanner; criteria: " + "; ".join(f"{k} = {n}" for k, n in CRITERIA) + ")"]
    for m, by_c in results.items():
        for c, by_sc in by_c.items():
            for sc, by in by_sc.items():
                crit = done_when(sc, by)
                failed = [x for x in crit if x["ok"] is False]
                unknown = [x["key"] for x in crit if x["ok"] is None and "not run" in x["detail"]]
                head = f"{'FAIL' if failed else 'PASS'} {sc} / {m} / {c}"
                parts = [f"{x['key']}: {x['detail']}" for x in failed]
                if not failed:
                    parts = [f"{x['key']} {x['detail']}" for x in crit if x["ok"] is True]
                if unknown:
                    parts.append("not checked: " + ", ".join(unknown))
                lines.append(head + (" - " + "; ".join(parts) if parts else ""))
    ks = cases(results)
    if ks:
        worst = max(ks, key=lambda k: k["delta"])
        best = min(ks, key=lambda k: k["delta"])
        lines.append(f"worst case: {_case_text(worst)}")
        lines.append(f"best case:  {_case_text(best)}")
        lines.append(f"worst transient: {_transient_text(max(ks, key=lambda k: k['delta_worst']))}")
    one = worst_run(results)
    if one is not None:
        lines.append(f"worst single run: {_run_text(one)}")
    return lines


def safety(results: Results2) -> list[dict[str, Any]]:
    """Per strategy over every scenario x load model x cadence it ran with no-action: how often it ends above
    doing nothing (beyond the tie band), how often it drives a broker above HOT where no-action stays below,
    its largest excess over no-action, and its moves in all (means over seeds)."""
    out: dict[str, dict[str, Any]] = {}
    for m, by_c in results.items():
        for c, by_sc in by_c.items():
            for sc, by in by_sc.items():
                if NO_ACTION not in by:
                    continue
                nf, nw = _mean(by[NO_ACTION], "final_max"), _mean(by[NO_ACTION], "worst_max")
                for st, rows in by.items():
                    if st == NO_ACTION:
                        continue
                    f, w = _mean(rows, "final_max"), _mean(rows, "worst_max")
                    r = out.setdefault(
                        st, {"strategy": st, "cells": 0, "worse": 0, "hot": 0, "excess": None, "moves": 0.0}
                    )
                    r["cells"] += 1
                    r["worse"] += f > nf + TIE
                    r["hot"] += w > HOT >= nw
                    if r["excess"] is None or f - nf > r["excess"][0]:
                        r["excess"] = (f - nf, f"{sc} / {m} / {c}")
                    r["moves"] += _mean(rows, "moves")
    return sorted(out.values(), key=lambda r: (r["worse"] + r["hot"], r["excess"][0] if r["excess"] else 0.0))


def safety_table(results: Results2) -> list[str]:
    lines = [
        f"| strategy | cells | ends above no-action (> +{TIE}) | a broker above {HOT:.0%} where no-action stays below "
        "| largest excess over no-action | moves in all |",
        "|---|---:|---:|---:|---|---:|",
    ]
    for r in safety(results):
        name = f"**{r['strategy']}**" if r["strategy"] == PLANNER else r["strategy"]
        ex = f"{r['excess'][0]:+.3f} ({r['excess'][1]})" if r["excess"] else "-"
        lines.append(f"| {name} | {r['cells']} | {r['worse']} | {r['hot']} | {ex} | {r['moves']:.0f} |")
    return lines


def headline_v2(doc: dict[str, Any]) -> str:
    results = ordered_v2(doc["results"])
    ks = cases(results)
    lines = []
    if ks:
        worst = max(ks, key=lambda k: k["delta"])
        best = min(ks, key=lambda k: k["delta"])
        lines += [
            f"**Worst case** for the planner: {_case_text(worst)}. **Best case**: {_case_text(best)} "
            "(final max, means over seeds; scenario / load model / cadence). **Worst transient**: "
            f"{_transient_text(max(ks, key=lambda k: k['delta_worst']))}.",
        ]
        one = worst_run(results)
        if one is not None:
            lines[-1] += f" **Worst single run** (one seed, where means hide it): {_run_text(one)}."
        lines.append("")
    lines += [
        "| load model | cadence | scenarios meeting every criterion | failed criteria | worst case vs no-action | best case vs no-action |",
        "|---|---|---|---|---|---|",
    ]
    for m, by_c in results.items():
        for c, by_sc in by_c.items():
            verdicts = {sc: done_when(sc, by) for sc, by in by_sc.items()}
            passing = sum(all(x["ok"] is not False for x in v) for v in verdicts.values())
            failed = [
                f"{sc}: {', '.join(x['key'] for x in v if x['ok'] is False)}"
                for sc, v in verdicts.items()
                if any(x["ok"] is False for x in v)
            ]
            mine = [k for k in ks if k["model"] == m and k["cadence"] == c]
            w = max(mine, key=lambda k: k["delta"]) if mine else None
            b = min(mine, key=lambda k: k["delta"]) if mine else None
            lines.append(
                f"| {m} | {c} | {passing} of {len(verdicts)} | {'; '.join(failed) or '-'} | "
                + (f"{w['scenario']}: {w['planner']:.3f} vs {w['no_action']:.3f} | " if w else "- | ")
                + (f"{b['scenario']}: {b['planner']:.3f} vs {b['no_action']:.3f} |" if b else "- |")
            )
    lines += ["", "Criteria: " + "; ".join(f"*{k}*: {n}" for k, n in CRITERIA) + "."]
    lines += [
        "",
        "Do no harm, every strategy on the same cells (after the do-no-harm guard; final max, means over seeds):",
        "",
        *safety_table(results),
    ]
    return "\n".join(lines)


HELD_OUT_USAGES = {
    "1": [
        "Usages are noise-free and capacity-normalised under the load model (per broker the max over every",
        "resource the load model reports - CPU, NIC in, NIC out and, under *memory-bound*, heap and direct memory -",
        "as usage/limit); *ideal* is every broker carrying the same share.",
    ],
    "2": [
        "Usages are noise-free and capacity-normalised under the load model (per broker the max of CPU, NIC in and",
        "NIC out as usage/limit; under *tls-crypto* the older CPU generation reports more CPU for the same traffic",
        "at the same limit); *ideal* is every broker at the same usage carrying the cluster's traffic mix.",
    ],
    "3": [
        "Usages are noise-free and capacity-normalised under the load model (per broker the max of CPU, NIC in and",
        "NIC out as usage/limit; under *catch-up-reads* NIC in includes the bytes read back from the bookies);",
        "*ideal* is every broker carrying the cluster's traffic mix (under *gc-pressure* its topics and clients too)",
        "in proportion to its cores.",
    ],
    "4": [
        "Usages are noise-free and capacity-normalised under the load model (per broker the max of CPU, NIC in and",
        "NIC out as usage/limit; the CPU includes each topic's hidden cost, which the bundles' reported rates do not",
        "show - its features' per-message work under *topic-features*, the housekeeping of its stored bytes under",
        "*bundle-housekeeping*); *ideal* is every broker carrying the same share of the cluster's true CPU (the",
        "hidden cost moves with its bundle).",
    ],
    "5": [
        "Usages are noise-free and capacity-normalised under the load model (per broker the max of CPU, NIC in and",
        "NIC out as usage/limit; under *batching-concave* a message costs less on a busier broker, under",
        "*cold-arrival* a broker's CPU includes what the bundles that arrived in the last minutes still cost it -",
        "reconnections, topic loads, subscriptions catching up from the bookies - and their sources' release);",
        "*ideal* is every broker carrying the cluster's traffic in proportion to its cores (under *cold-arrival*",
        "the linear ideal: steady state is linear).",
    ],
    "6": [
        "Usages are noise-free and capacity-normalised under the load model (per broker the max of CPU, NIC in and",
        "NIC out as usage/limit; under *shared-hosts* a broker's traffic costs more CPU while the other brokers on",
        "its host - which no report shows - are busy, under *cold-start* a broker that joined or restarted spends",
        "more CPU on its traffic for the first minutes of it, JIT warm-up); *ideal* is every broker at the same",
        "usage with the contention its host-mates cause (under *cold-start* the linear ideal: steady state is",
        "linear).",
    ],
    "7": [
        "Usages are noise-free and capacity-normalised under the load model (per broker the max of CPU, NIC in and",
        "NIC out as usage/limit; under *smt-knee* the reported CPU counts hyperthreads, so past half the logical CPUs",
        "a unit of work costs 3.3x as much and a broker reads 100 % from 0.65 of linear's CPU on, under",
        "*offload-bursts* a broker's CPU and NICs include the offload and compaction bursts its topics' written bytes",
        "set off, which no bundle's rates show); *ideal* is every broker at the same work through the curve (under",
        "*offload-bursts* linear's plus the bursts' long-run average, spread evenly).",
    ],
    "8": [
        "Usages are noise-free and capacity-normalised under the load model (per broker the max of CPU, NIC in and",
        "NIC out as usage/limit; under *geo-replication* the CPU includes the replicators of a third of the",
        "namespaces re-sending every written message to a remote cluster, which the bundles' rates out show as a",
        "dispatch, at 3.2x its cost; under *bookie-writes* NIC out carries every written byte twice more, to the",
        "bookies, which no bundle's bytes out show); *ideal* is every broker carrying the same share of the",
        "cluster's true load on the binding resource (CPU with replication; NIC out with the bookie copies).",
    ],
    "9": [
        "Usages are noise-free and capacity-normalised under the load model (per broker the max of CPU, NIC in and",
        "NIC out as usage/limit; under *key-shared* the CPU includes the Key_Shared dispatch of a third of the",
        "namespaces, +1.5x linear's per-message CPU per message out, which no report's subscription type shows;",
        "under *entry-filters* a third of the namespaces' subscriptions read, filter and acknowledge k - 1 rejected",
        "entries per message out (k 2-4 per topic), in no bundle's msgRateOut); *ideal* is every broker carrying",
        "the same share of the cluster's true CPU.",
    ],
}
"""What a held-out set's report says its usages and ideal are (by set; a run of set 1 stores no ``held_out_set``)."""


def render_report_v2(doc: dict[str, Any]) -> str:
    results = ordered_v2(doc["results"])
    noise = "each scenario's own (2-3 %)" if doc.get("noise") is None else f"{doc['noise']:.0%}"
    held_out = bool(doc.get("held_out"))
    if held_out:
        module = held_out_module(doc.get("held_out_set", "1"))
        models = f"(`simulator/{module}`, held out: " + ", ".join(f"*{m}*" for m in results) + ")"
    else:
        models = "(`simulator/load_models.py`: " + ", ".join(f"*{m}*" for m in LOAD_MODELS) + ")"
    if held_out:
        usages = HELD_OUT_USAGES[doc.get("held_out_set", "1")]
    else:
        usages = [
            "Usages are noise-free and capacity-normalised under the load model (per broker the max of CPU, NIC in and",
            "NIC out as usage/limit); *ideal* is every broker carrying the same share (through the load model's curve).",
        ]
    lines = [
        f"Seeds {doc['seeds']}; large-zipf seeds {doc['large_seeds']}; CPU noise {noise}, rate noise "
        f"{doc.get('rate_noise', 0.0):.0%}; dag cadence: approval delay {doc['approval_delay_min']} min, "
        f"drift_tolerance {doc.get('drift_tolerance', 0.5)}, max_unloads_per_run {doc.get('max_unloads_per_run')}; "
        f"{doc['elapsed_s']:.0f} s in all (the results do not depend on the machine's load, only the time does).",
        "",
        "Each strategy runs in a closed loop on the deterministic cluster model under each load model",
        models + " and at two cadences:",
        "*minute* (decide every simulated minute, apply at once: Pulsar's shedding interval) and *dag* (decide every",
        "simulated hour as the DAG's schedule does, apply after the approval delay with the executor's checks:",
        "ownership, live destination, `drift_tolerance`). *no-action* decides nothing: the baseline.",
        *usages,
        "*final max* is the worst broker's highest usage over the last 5 decisions, *worst max* over the run after the",
        "first decision. Means over seeds.",
        "",
        "## Headline",
        "",
        headline_v2(doc),
        "",
    ]
    for m, by_c in results.items():
        for c, by_sc in by_c.items():
            lines += [
                f"## {m}, {c} cadence",
                "",
                f"![worst broker usage per scenario: {m}, {c}](balance/{m}-{c}.png)",
                "",
                "| scenario | ideal | no-action | GlobalPlanner (moves) | closest Pulsar strategy (moves) | "
                + " | ".join(k for k, _ in CRITERIA)
                + " |",
                "|---" * (5 + len(CRITERIA)) + "|",
            ]
            notes_: list[str] = []
            for sc, by in by_sc.items():
                crit = done_when(sc, by)
                lines.append("| " + " | ".join([sc, *outcome_cells(by, crit)]) + " |")
                notes_ += [f"* {sc}: {x['key']}: {x['detail']}" for x in crit if x["ok"] is False]
            lines.append("")
            if notes_:
                lines += ["Failed criteria:", "", *notes_, ""]
            strategies = list(next(iter(by_sc.values())))
            lines += [
                "final max (moves) per strategy:",
                "",
                "| scenario | " + " | ".join(strategies) + " |",
                "|---" * (len(strategies) + 1) + "|",
            ]
            for sc, by in by_sc.items():
                lines.append("| " + " | ".join([sc, *strategy_cells(by, strategies)]) + " |")
            lines.append("")
    return "\n".join(lines)


def outcome_cells(by: dict[str, list[dict[str, Any]]], crit: list[dict[str, Any]]) -> list[str]:
    """One cell's columns in a report's table of outcomes (after the columns naming the cell): the ideal, doing
    nothing's final max, the planner's and the closest Pulsar strategy's with their moves, then each criterion."""
    closest = closest_pulsar(by)
    p = by.get(PLANNER)
    return [
        f"{_mean(next(iter(by.values())), 'ideal'):.3f}",
        f"{_mean(by[NO_ACTION], 'final_max'):.3f}" if NO_ACTION in by else "-",
        f"{_mean(p, 'final_max'):.3f} ({_mean(p, 'moves'):.1f})" if p else "-",
        f"{closest}: {_mean(by[closest], 'final_max'):.3f} ({_mean(by[closest], 'moves'):.1f})" if closest else "-",
        *(_cell(x) for x in crit),
    ]


def strategy_cells(by: dict[str, list[dict[str, Any]]], strategies: list[str]) -> list[str]:
    """Each strategy's final max (moves) in one cell, means over seeds (- where it did not run)."""
    return [f"{_mean(by[s], 'final_max'):.3f} ({_mean(by[s], 'moves'):.1f})" if s in by else "-" for s in strategies]


# ---------------------------------------------------------------- format 1 (balance.json before load models)


COLUMNS = [
    ("final_max", "final max", "{:.3f}"),
    ("worst_max", "worst max", "{:.3f}"),
    ("final_spread", "spread", "{:.3f}"),
    ("gap", "gap to ideal", "{:+.3f}"),
    ("floor", "floor", "{:.3f}"),
    ("moves", "moves", "{:.1f}"),
    ("splits", "splits", "{:.1f}"),
    ("moves_to_steady", "moves to steady", "{:.1f}"),
    ("churn", "churn (last third)", "{:.1f}"),
    ("ping_pong", "ping-pong", "{:.1f}"),
    ("clients_disconnected", "clients disconnected", "{:.0f}"),
    ("warnings", "warnings", "{:.1f}"),
]


def ordered(results: dict[str, dict[str, list[dict[str, Any]]]]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Scenarios and strategies in their defined order (the JSON stores them sorted by name)."""

    def by_order(keys: list[str], order: list[str]) -> list[str]:
        return [k for k in order if k in keys] + sorted(k for k in keys if k not in order)

    return {
        sc: {st: results[sc][st] for st in by_order(list(results[sc]), list(STRATEGIES))}
        for sc in by_order(list(results), list(SCENARIOS))
    }


def headline(results: dict[str, dict[str, list[dict[str, Any]]]]) -> list[str]:
    results = ordered(results)
    lines = [
        "| scenario | ideal / floor | closest Pulsar strategy: final max (moves) | GlobalPlanner: final max (moves) | planner lower than all? | moves <= closest? | within 5 % of ideal? | ping-pong | churn |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for scenario, by in results.items():
        v = verdict(by)
        if v["lower_than_all"]:
            lower = "yes"
        elif v["tied_or_lower"] and v["nobody_moves"]:
            lower = "tie: balanced, nobody moves"
        elif v["tied_or_lower"]:
            lower = "tie" + (" at the floor" if v["at_floor"] else "")
        else:
            lower = "**no**" + (" (at the floor)" if v["at_floor"] else "")
        within = within_cell(v)
        lines.append(
            f"| {scenario} | {v['ideal']:.3f} / {v['floor']:.3f} | {v['closest']}: {v['closest_final']:.3f} ({v['closest_moves']:.1f}) | "
            f"{v['final']:.3f} ({v['moves']:.1f}) | {lower} | {'yes' if v['moves_ok'] else '**no**'} | "
            f"{within} | {v['ping_pong']} | {v['churn']} |"
        )
    return lines


def within_cell(v: dict[str, Any]) -> str:
    """Within 5 % of the ideal, per seed, where granularity allows (else at the floor above it)."""
    if v["seeds_within"] == v["seeds"]:
        return "yes"
    if v["seeds_within"] + v["seeds_at_floor"] == v["seeds"]:
        return f"at the floor above it ({v['seeds_at_floor']} of {v['seeds']} seeds)"
    return "**no**"


def notes(results: dict[str, dict[str, list[dict[str, Any]]]]) -> list[str]:
    """One line per scenario where a goal does not hold, saying why (from the numbers)."""
    results = ordered(results)
    out = []
    for scenario, by in results.items():
        v = verdict(by)
        why = []
        if not v["lower_than_all"]:
            if v["nobody_moves"]:
                why.append("lower than all: nothing to do, every strategy (the planner too) makes no move")
            elif v["tied_or_lower"] and v["at_floor"]:
                why.append(
                    f"lower than all: the planner ends at the floor ({v['floor']:.3f}: the hottest topic alone on a "
                    f"broker), which {v['closest']} reaches too; no plan can go below it"
                )
            else:
                why.append(
                    f"lower than all: {v['closest']} ends at {v['closest_final']:.3f}, the planner at {v['final']:.3f}"
                )
        if not v["moves_ok"]:
            idle = (
                f"; it makes no move at all in {v['closest_idle_seeds']} of {v['seeds']} seeds, where ending lower than it "
                "takes at least one move"
                if v["closest_idle_seeds"]
                else ""
            )
            per_seed = ", ".join(
                f"seed {c['seed']}: {c['moves']} moves to {c['final_max']:.3f} vs {p['moves']} to {p['final_max']:.3f}"
                for c, p in zip(by[v["closest"]], by[PLANNER])
            )
            why.append(
                f"moves: {v['closest']} (closest to ideal, {v['closest_final']:.3f}) makes {v['closest_moves']:.1f} moves "
                f"on average, the planner {v['moves']:.1f} to end at {v['final']:.3f}{idle} ({per_seed})"
            )
        if v["seeds_within"] < v["seeds"]:
            detail = ", ".join(
                f"seed {r['seed']}: {r['final_max']:.3f} vs ideal {r['ideal']:.3f}, floor {r['floor']:.3f}"
                for r in by[PLANNER]
                if r["final_max"] > r["ideal"] * 1.05
            )
            bound = v["seeds_within"] + v["seeds_at_floor"] == v["seeds"]
            why.append(
                (
                    "within 5 % where granularity allows: where not within, the planner is at a floor above it (what "
                    "cannot be split: the hottest topic, or a bundle of a namespace at loadBalancerNamespaceMaximumBundles, "
                    "alone on a broker)"
                    if bound
                    else "within 5 %: not met"
                )
                + f" ({detail})"
            )
        if v["ping_pong"] or v["churn"]:
            why.append(f"ping-pong {v['ping_pong']}, churn {v['churn']}")
        if why:
            out.append(f"* **{scenario}** - " + "; ".join(why) + ".")
    return out


def render_report(doc: dict[str, Any]) -> str:
    """balance.md's body, from the JSON the run wrote."""
    results = ordered(doc["results"])
    lines = [
        f"Seeds {doc['seeds']}; large-zipf seeds {doc['large_seeds']}; {doc['elapsed_s']:.0f} s in all (the results "
        "do not depend on the machine's load, only the time does).",
        "",
        "Each strategy runs in a closed loop (decide -> apply splits then unloads -> advance one simulated minute)",
        "on the deterministic cluster model; usages are noise-free and capacity-normalised (per broker the max of",
        "CPU, NIC in and NIC out as usage/limit); *ideal* is total load / total capacity. Means over seeds.",
        "*final max* is the worst broker's highest usage over the last 5 cycles (periodic swings count at their peak),",
        "*worst max* the worst broker over the run after the first",
        "decision, *moves to steady* the moves made until the worst broker stays within 0.02 of its final value,",
        "*churn* the moves in the last third, *ping-pong* a bundle moved again within 30 minutes.",
        "",
        "## Headline",
        "",
        *headline(results),
        "",
        "*closest Pulsar strategy* = the one ending closest to the ideal (fewest moves on ties), the one whose move",
        "count the planner must not exceed. *floor* = the ideal, or what cannot be split (the hottest topic, or the",
        "hottest bundle of a namespace at `loadBalancerNamespaceMaximumBundles`) alone on a broker, if that is higher",
        "(no plan can go below it). Pulsar's strategies run at the load manager's level (`executed`: what",
        "`doLoadShedding` does with the strategy's selection, destinations from `selectBroker`).",
        "",
        "The planner's goals, per scenario: end lower than every Pulsar strategy, with no more moves than the",
        "closest one, within 5 % of the ideal, without ping-pong or churn. Where one does not hold, and why:",
        "",
        *(notes(results) or ["* every goal holds on every scenario."]),
        "",
    ]
    for scenario, by in results.items():
        lines += [f"## {scenario}", "", f"![worst broker usage over time: {scenario}](balance/{scenario}.png)", ""]
        lines.append("| strategy | " + " | ".join(c[1] for c in COLUMNS) + " |")
        lines.append("|---" * (len(COLUMNS) + 1) + "|")
        for strategy, rows in by.items():
            cells = [fmt.format(_mean(rows, key)) for key, _, fmt in COLUMNS]
            name = f"**{strategy}**" if strategy == PLANNER else strategy
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


SCRIPT = "benchmarks/bench_balance.py"
JSON = ROOT / "docs" / "benchmarks" / "balance.json"
TARGETS = {
    "balance-report": [ROOT / "docs" / "benchmarks" / "balance.md"],
    "balance-headline": [figures.README, figures.BENCHMARKS_INDEX],
}
"""The files each block is written into."""


def held_out_module(key: str) -> str:
    """The module a held-out set's models live in (from the third on, each set has one of its own)."""
    return OWN_MODULE_SETS[key][0] if key in OWN_MODULE_SETS else "held_out_models.py"


def held_out_stem(key: str) -> str:
    """A held-out set's file stem under ``docs/benchmarks/`` (and its block's name, plus ``-report``):
    ``balance-held-out`` for set 1, ``balance-held-out-<key>`` for the others."""
    return "balance-held-out" if key == "1" else f"balance-held-out-{key}"


HELD_OUT_OUTPUTS = {
    key: (
        ROOT / "docs" / "benchmarks" / f"{held_out_stem(key)}.json",
        {f"{held_out_stem(key)}-report": [ROOT / "docs" / "benchmarks" / f"{held_out_stem(key)}.md"]},
    )
    for key in HELD_OUT_SETS
}
"""``--held-out [SET]``: each held-out set's JSON and report (the main report and the README are left alone); a
set's report is created by its first full run (:func:`_ensure_report`)."""
HELD_OUT_JSON, HELD_OUT_TARGETS = HELD_OUT_OUTPUTS["1"]
HELD_OUT_SET_OF_BLOCK = {f"{held_out_stem(key)}-report": key for key in HELD_OUT_SETS}

# blocks this script writes (figures.update); tests/test_docs_figures.py re-renders them from the JSON
# ---------------------------------------------------------------- every held-out set at a glance

SETS_JSON = ROOT / "docs" / "benchmarks" / "balance-held-out-sets.json"
"""One row per held-out set, each summing up that set's stored report (rebuilt whenever one is written)."""
SETS_TARGETS = {
    "balance-held-out-sets": [figures.BENCHMARKS_INDEX],
    "balance-held-out-sets-headline": [figures.README],
}
_WORDS = dict(enumerate("zero one two three four five six seven eight nine ten eleven twelve".split()))


def set_summary(key: str, doc: dict[str, Any]) -> dict[str, Any]:
    """What one held-out set's stored report says, counted as its own report counts it: every cell's criteria
    (per seed, :func:`done_when`) and every strategy's do-no-harm row (means over seeds, :func:`safety`)."""
    results = ordered_v2(doc["results"])
    cells = ok = 0
    failed: list[str] = []
    for m, by_c in results.items():
        for c, by_sc in by_c.items():
            for sc, by in by_sc.items():
                missed = [x["key"] for x in done_when(sc, by) if x["ok"] is False]
                cells += 1
                ok += not missed
                failed += [f"{k}: {sc} / {m} / {c}" for k in missed]
    rows = {r["strategy"]: r for r in safety(results)}
    planner = rows.pop(PLANNER)
    return {
        "set": key,
        "models": list(results),
        "date": doc["meta"]["date"],
        "command": doc["meta"]["command"],
        "core": figures.core_digest(doc.get("sources")),
        "cells": cells,
        "cells_met": ok,
        "failed": sorted(failed),
        "planner": {"above": planner["worse"], "pushed": planner["hot"], "moves": round(planner["moves"])},
        "pulsar": {st: {"above": r["worse"], "pushed": r["hot"]} for st, r in sorted(rows.items())},
    }


def sets_doc() -> dict[str, Any]:
    """The held-out sets' summary from every held-out report stored; its provenance is the newest run's."""
    docs = {
        key: json.loads(path.read_text(encoding="utf-8"))
        for key, (path, _) in HELD_OUT_OUTPUTS.items()
        if path.exists()
    }
    newest = max(docs.values(), key=lambda d: d["meta"]["date"])
    meta = dict(newest["meta"])
    meta["note"] = (
        "each row sums up one held-out set's stored report, each run by its own command (in that report's "
        "header); the line above is the newest's"
    )
    return {"meta": meta, "sets": [set_summary(key, doc) for key, doc in docs.items()]}


def write_sets() -> None:
    """Rebuild the held-out sets' summary and its blocks (after any held-out report is written)."""
    doc = sets_doc()
    figures.write_json(SETS_JSON, doc)
    figures.update(SCRIPT, _rel(SETS_JSON), doc, SETS_TARGETS)


def _span(values: Sequence[int]) -> str:
    lo, hi = min(values), max(values)
    return f"{lo}" if lo == hi else f"{lo}-{hi}"


def _criteria_counts(failed: Sequence[str]) -> str:
    counts = Counter(f.split(":", 1)[0] for f in failed)
    return ", ".join(f"*{k}* {n}" for k, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def render_sets(doc: dict[str, Any]) -> str:
    lines = [
        "| set | load models | planner: cells meeting every criterion | planner: ends above no-action / a broker "
        f"above {HOT:.0%} where no-action stays below | cells missed | Pulsar strategies: ends above no-action "
        f"/ above {HOT:.0%} (fewest-most) | decision core |",
        "|---|---|---:|---|---|---|---|",
    ]
    for s in doc["sets"]:
        pulsar = s["pulsar"].values()
        lines.append(
            f"| [{s['set']}]({held_out_stem(s['set'])}.md) | {', '.join(s['models'])} | {s['cells_met']} of "
            f"{s['cells']} | {s['planner']['above']} / {s['planner']['pushed']} | "
            + ("; ".join(s["failed"]) or "-")
            + f" | {_span([p['above'] for p in pulsar])} / {_span([p['pushed'] for p in pulsar])} | `{s['core']}` |"
        )
    lines += [
        "",
        "Cells are scenario x load model x cadence; *cells missed* names each criterion missed (judged per seed, as "
        "in each set's report); the two counts of ending above doing nothing and pushing a broker above "
        f"{HOT:.0%} are the do-no-harm table's (means over seeds). The decision core is a digest of the sources "
        "under `src/pulsar_rebalance/core/` the set's runs imported.",
    ]
    return "\n".join(lines)


def render_sets_headline(doc: dict[str, Any]) -> str:
    sets = doc["sets"]
    cells = sum(s["cells"] for s in sets)
    failed = [f for s in sets for f in s["failed"]]
    totals: dict[str, list[int]] = {}
    for s in sets:
        for st, r in s["pulsar"].items():
            t = totals.setdefault(st, [0, 0])
            t[0] += r["above"]
            t[1] += r["pushed"]
    clean = [st for st, (above, pushed) in totals.items() if above == pushed == 0]
    others = [t for st, t in totals.items() if st not in clean]
    cores = sorted({s["core"] for s in sets})
    text = (
        f"On the {_WORDS.get(len(sets), str(len(sets)))} held-out sets ({sum(len(s['models']) for s in sets)} load "
        f"models written without reading the planner, {cells} of its cells): **{sum(s['cells_met'] for s in sets)} "
        f"of {cells}** meet every criterion"
    )
    if failed:
        text += f" (missed: {_criteria_counts(failed)}; [every set](docs/benchmarks/README.md#held-out-load-models))"
    text += (
        f"; the planner ends above doing nothing in **{sum(s['planner']['above'] for s in sets)}** and pushes a broker "
        f"above {HOT:.0%} where doing nothing stays below in **{sum(s['planner']['pushed'] for s in sets)}** (means "
        "over seeds; the criteria judge each seed)."
    )
    if others:
        text += (
            " On the same cells, "
            + (f"{' and '.join(clean)} in none, every other Pulsar strategy" if clean else "each Pulsar strategy")
            + f" ends above doing nothing in {_span([t[0] for t in others])} and pushes a broker above {HOT:.0%} in "
            f"{_span([t[1] for t in others])}."
        )
    if len(cores) == 1:
        return text + f" Every set ran the same decision core (`{cores[0]}`)."
    return text + f" The sets ran {len(cores)} versions of the decision core (the table names each)."


BLOCKS = {
    "balance-headline": lambda doc: headline_v2(doc) if doc.get("format") == 2 else "\n".join(headline(doc["results"])),
    "balance-report": lambda doc: render_report_v2(doc) if doc.get("format") == 2 else render_report(doc),
    **dict.fromkeys(HELD_OUT_SET_OF_BLOCK, render_report_v2),
    "balance-held-out-sets": render_sets,
    "balance-held-out-sets-headline": render_sets_headline,
}


if __name__ == "__main__":
    raise SystemExit(main())
