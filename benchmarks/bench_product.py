"""The product in the loop: the DAG's own stages on a served scenario whose clock runs, next to the closed loop.

Usage::

    .venv/bin/python benchmarks/bench_product.py             # writes docs/benchmarks/product.json and its block
                                                             # in docs/benchmarks/product.md
    .venv/bin/python benchmarks/bench_product.py --scenarios one-hot-broker --decisions 4 --no-write

The balance benchmark measures the DAG's hourly cadence in the closed loop: the model's reports go straight
into the ``decide`` contract and the guard, and the loop applies the plan with the executor's checks. This
benchmark runs the product instead, on the same scenarios: each hourly decision is the DAG's five stages
in-process, exactly as ``bench_pipeline.py`` calls them (``stage_collect`` over real HTTP from the served
cluster, ``stage_compute_usage``, ``stage_detect``, ``stage_plan`` with the do-no-harm guard, approval with
``cli.plans.decide``, ``stage_execute`` unloading and splitting over real HTTP), with the DAG's default
parameters (``RunParams()``: the GlobalPlanner, its caps and drift check), one Postgres database per run
(the planner's state carried from run to run as the DAG carries it) and one SparkSession (``local[2]``).
The cluster is the scenario's closed-loop model served over HTTP with its clock running
(``simulator.live.LiveCluster``): the model advances ``--approval-delay`` minutes between plan and
execution and the rest of the hour after it, as the closed loop's ``dag`` cadence does, and what the
executor did over HTTP moves the model. The planner's clock is the model's (``stage_detect(now_ms=...)``,
the model's minute moved to today so that the database's wall-clock records are never ahead of it).

Next to each product run: the closed loop's ``dag`` cadence on a twin of the same model (same scenario,
seed, load model, decisions, approval delay; the GlobalPlanner and no-action). Both measure alike: CPU noise is
each scenario's own, and the reported bundle and topic rates carry ``--rate-noise`` (default 3 %, as the
balance benchmark runs), on each side from its own streams (the product run still makes the model's own CPU
noise draws, which share its random stream with the drift, so the traffic is the same on both sides until their
moves differ).
Final max = the worst broker's highest noise-free usage over the last 5 hourly samples, as in the balance
benchmark.

The defaults (9 scenarios x 2 load models, 12 hourly runs each) take about 15 minutes on the 2-core reference
machine.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import figures  # benchmarks/figures.py: JSON + marked blocks in the docs
from bench_pipeline import _quietly, log, open_run, prepare_process, start_postgres, start_spark

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "benchmarks" / "product.md"
TARGETS = {"product-report": [DOC], "product-headline": [figures.BENCHMARKS_INDEX]}
JSON = ROOT / "docs" / "benchmarks" / "product.json"
PNG = ROOT / "docs" / "benchmarks" / "product.png"
SCRIPT = "benchmarks/bench_product.py"

DEFAULT_SCENARIOS = (
    "steady-with-noise",
    "scale-up",
    "scale-down",
    "rolling-restart",
    "one-hot-broker",
    "hot-bundle-needs-split",
    "hot-single-topic-unsplittable",
    "heterogeneous",
    "periodic-jitter",
)
"""The balance benchmark's scenarios but large-zipf (100 brokers: 100 HTTP servers in this process)."""
DEFAULT_LOAD_MODELS = ("convex-cpu", "tls-crypto")
"""A seen model and a held-out one (the second held-out set's TLS-bound brokers on two CPU generations)."""
FINAL_WINDOW = 5
TIE = 0.005
"""Half a point: the balance benchmark's tie."""


def _twin(scenario: str, seed: int, load_model: str, rate_noise: float):
    from pulsar_rebalance.simulator.cluster import resolve_load_model
    from pulsar_rebalance.simulator.scenarios import build

    return build(scenario, seed, load_model=resolve_load_model(load_model), rate_noise=rate_noise)


def closed_loop(scenario: str, load_model: str, strategy: str, args: argparse.Namespace) -> dict[str, Any]:
    from pulsar_rebalance.simulator.closed_loop import run_closed_loop

    r = run_closed_loop(
        _twin(scenario, args.seed, load_model, args.rate_noise),
        strategy,
        cadence="dag",
        decisions=args.decisions,
        approval_delay_min=args.approval_delay,
    )
    return {"max_usage": list(r.max_usage), "moves": r.moves, "splits": r.splits}


def product(spark, pg, root: Path, scenario: str, load_model: str, args: argparse.Namespace) -> dict[str, Any]:
    """The DAG's stages, hour after hour, on the scenario served live; what each hour did."""
    from pulsar_rebalance.cli.plans import decide
    from pulsar_rebalance.pipeline import stages
    from pulsar_rebalance.pipeline.context import JobContext
    from pulsar_rebalance.simulator.cluster import ClusterState
    from pulsar_rebalance.simulator.live import LiveCluster, move_to_today
    from pulsar_rebalance.simulator.server import SimulatedPulsar

    decisions, delay = args.decisions, args.approval_delay
    model = _twin(scenario, args.seed, load_model, args.rate_noise).model  # served with the model's rate noise
    move_to_today(model)
    out: dict[str, Any] = {"max_usage": [], "moves": 0, "splits": 0, "hours": []}
    with contextlib.ExitStack() as stack:
        sim = SimulatedPulsar(ClusterState.from_model(model, cluster="product"), ephemeral=True)
        stack.callback(_quietly, sim.stop, "stopping the simulator")
        sim.start()
        live = LiveCluster(sim, model)
        url, engine, client = open_run(stack, pg, "product", sim.admin_url)
        previous = os.environ.get("PULSAR_REBALANCE_DATABASE_URL")
        os.environ["PULSAR_REBALANCE_DATABASE_URL"] = url  # cli.plans.decide's database
        stack.callback(
            lambda: (
                os.environ.pop("PULSAR_REBALANCE_DATABASE_URL", None)
                if previous is None
                else os.environ.__setitem__("PULSAR_REBALANCE_DATABASE_URL", previous)
            )
        )
        for hour in range(decisions):
            started = time.perf_counter()
            out["max_usage"].append(max(model.true_usage().values()))
            model.load_reports()  # the closed loop's draws: its CPU noise shares the model's random stream with the
            # drift, so drawing it here too keeps the traffic of both sides the same, hour after hour
            ctx = JobContext(f"product__{scenario}__{hour}__{uuid.uuid4().hex[:6]}", str(root / "work"))
            stages.stage_collect(spark, ctx, params_doc={}, engine=engine, client=client)
            stages.stage_compute_usage(spark, ctx, engine=engine)
            detected = stages.stage_detect(spark, ctx, engine=engine, now_ms=model.now_ms)
            planned = stages.stage_plan(spark, ctx, engine=engine)
            if delay:
                live.advance(delay)
            done = {"hour": hour, "status": planned["status"], "label": detected.get("label"), "moves": 0, "splits": 0}
            if planned["status"] == "pending":
                decide(planned["plan_id"], "approved", by="bench")
                report = stages.stage_execute(spark, ctx, engine=engine, client=client)
                done["moves"], done["splits"] = report["unloads_executed"], report["splits_executed"]
                done["executed"], done["skipped"] = report["status"], report["skipped"]
            out["moves"] += done["moves"]
            out["splits"] += done["splits"]
            done["seconds"] = round(time.perf_counter() - started, 2)
            out["hours"].append(done)
            log(
                f"  {scenario} hour {hour}: worst broker {out['max_usage'][-1]:.3f}, plan {planned['status']}, "
                f"{done['moves']} move(s), {done['splits']} split(s) ({done['seconds']} s)"
            )
            live.advance(60 - delay)
    return out


def run_one(spark, pg, root: Path, scenario: str, load_model: str, args: argparse.Namespace) -> dict[str, Any]:
    """One scenario under one load model: the product, then the closed loop's DAG cadence and doing nothing."""
    log(f"{scenario} / {load_model} / seed {args.seed}: the product, {args.decisions} hourly runs")
    t0 = time.perf_counter()
    prod = product(spark, pg, root, scenario, load_model, args)
    seconds = time.perf_counter() - t0
    ref = closed_loop(scenario, load_model, "GlobalPlanner", args)
    none = closed_loop(scenario, load_model, "no-action", args)
    log(
        f"  final max: product {final_max(prod['max_usage']):.3f} ({prod['moves']} moves), closed loop "
        f"{final_max(ref['max_usage']):.3f} ({ref['moves']}), no action {final_max(none['max_usage']):.3f}"
    )
    return {
        "scenario": scenario,
        "load_model": load_model,
        "product": prod,
        "closed_loop": ref,
        "no_action": none,
        "seconds": seconds,
    }


def final_max(max_usage: list[float]) -> float:
    return max(max_usage[-FINAL_WINDOW:])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenarios", nargs="+", default=list(DEFAULT_SCENARIOS), metavar="NAME")
    parser.add_argument(
        "--load-models", nargs="+", default=list(DEFAULT_LOAD_MODELS), metavar="NAME", help="default: %(default)s"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--decisions", type=int, default=12, help="hourly DAG runs per scenario (default 12)")
    parser.add_argument("--approval-delay", type=int, default=15, help="minutes from plan to execution (default 15)")
    parser.add_argument(
        "--rate-noise", type=float, default=0.03, help="noise on reported bundle/topic rates, 0-0.1 (default 0.03)"
    )
    parser.add_argument("--no-write", action="store_true", help="print the report instead of writing the docs")
    args = parser.parse_args(argv)
    from pulsar_rebalance.simulator.scenarios import SCENARIOS

    unknown = [s for s in args.scenarios if s not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario(s) {unknown}; known: {', '.join(SCENARIOS)}")
    from pulsar_rebalance.simulator.cluster import resolve_load_model

    for name in args.load_models:
        try:
            resolve_load_model(name)
        except ValueError as exc:
            parser.error(f"--load-models: {exc}")
    if args.decisions < FINAL_WINDOW:
        parser.error(f"--decisions must be >= {FINAL_WINDOW} (the final max spans the last {FINAL_WINDOW} hours)")
    if not 0 <= args.rate_noise <= 0.1:
        parser.error("--rate-noise must be from 0 to 0.1")
    if not 0 <= args.approval_delay < 60:
        parser.error("--approval-delay must be from 0 to 59 minutes")

    prepare_process()
    started = time.perf_counter()
    load = figures.LoadSampler()
    load.__enter__()
    rows: list[dict[str, Any]] = []
    root = Path(tempfile.mkdtemp(prefix="pr-bench-product-", dir="/tmp"))
    try:
        with contextlib.ExitStack() as stack:
            pg = start_postgres(stack, root)
            spark = start_spark(stack, root)
            for load_model in args.load_models:
                for scenario in args.scenarios:
                    rows.append(run_one(spark, pg, root, scenario, load_model, args))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    load.__exit__(None, None, None)
    doc = {
        "meta": figures.meta(load),
        "wall_s": time.perf_counter() - started,
        "args": {
            "scenarios": args.scenarios,
            "load_models": args.load_models,
            "seed": args.seed,
            "decisions": args.decisions,
            "approval_delay": args.approval_delay,
            "rate_noise": args.rate_noise,
        },
        "rows": rows,
    }
    if args.no_write:
        print(render_report(doc))
    else:
        figures.write_json(JSON, doc)
        plot(doc, PNG)
        figures.update(
            SCRIPT,
            str(JSON.relative_to(ROOT)),
            doc,
            TARGETS,
        )
        log(f"wrote {JSON} and {DOC}")
    return 0


def _name(r: dict[str, Any]) -> str:
    return f"{r['scenario']} / {r['load_model']}"


def _verdict(doc: dict[str, Any]) -> str:
    a = doc["args"]
    rows = doc["rows"]
    above = [
        _name(r) for r in rows if final_max(r["product"]["max_usage"]) > final_max(r["no_action"]["max_usage"]) + TIE
    ]
    gaps = [abs(final_max(r["product"]["max_usage"]) - final_max(r["closed_loop"]["max_usage"])) for r in rows]
    moves = sum(r["product"]["moves"] for r in rows), sum(r["closed_loop"]["moves"] for r in rows)
    return (
        f"{len(rows)} runs ({len(a['scenarios'])} scenarios under {' and '.join(a['load_models'])}, seed {a['seed']}), "
        f"{a['decisions']} hourly DAG runs each, approved {a['approval_delay']} minutes after planning, "
        f"{a.get('rate_noise', 0.0):.0%} noise on the reported rates: the product "
        f"ends above doing nothing (by more than half a point) in **{len(above)}**"
        f"{': ' + ', '.join(above) if above else ''}; it ends within **{max(gaps):.3f}** of the closed loop's DAG "
        f"cadence in every run (final max; {sum(g <= TIE for g in gaps)} of {len(rows)} within half a point), with "
        f"{moves[0]} moves in all where the closed loop makes {moves[1]}."
    )


def render_headline(doc: dict[str, Any]) -> str:
    return _verdict(doc) + " Per run: [product.md](product.md)."


def render_report(doc: dict[str, Any]) -> str:
    rows = []
    for r in doc["rows"]:
        p, c, n = r["product"], r["closed_loop"], r["no_action"]
        fp, fc, fn = final_max(p["max_usage"]), final_max(c["max_usage"]), final_max(n["max_usage"])
        rows.append(
            [
                r["scenario"],
                r["load_model"],
                f"{fn:.3f}",
                f"{fc:.3f} ({c['moves']} moves, {c['splits']} splits)",
                f"{fp:.3f} ({p['moves']} moves, {p['splits']} splits)",
                f"{fp - fc:+.3f}",
                f"{r['seconds'] / len(p['hours']):.1f}",
            ]
        )
    lines = [
        _verdict(doc) + " The largest gap first:",
        "",
        figures.table(
            [
                "scenario",
                "load model",
                "no action",
                "closed loop, dag cadence (GlobalPlanner)",
                "the product (DAG stages, HTTP, Spark, Postgres)",
                "product - closed loop",
                "s per DAG run",
            ],
            sorted(rows, key=lambda row: (-abs(float(row[5])), row[0], row[1])),
            "ll" + "r" * 5,
        ),
        "",
        "Final max: the worst broker's highest noise-free usage over the last 5 hourly samples (capacity-normalised, "
        "the load model's own). A gap between the two is the product's path itself: the reports as collected over "
        "HTTP and aggregated in Spark (the closed loop hands the model's to `decide`), the database's carried state, "
        "the executor's own drift check and order, and the noise of the served reports (CPU and rates, the "
        "served cluster's own streams; the traffic is the same on both sides). Seconds per DAG run are the "
        "five stages in one warm SparkSession (a real DAG task also pays its `spark-submit`: "
        "[pipeline.md](pipeline.md)).",
        "",
        "![The worst broker before each hourly run: the product, the closed loop, doing nothing](product.png)",
    ]
    return "\n".join(lines)


def plot(doc: dict[str, Any], out: Path) -> None:
    """Per run, the worst broker hour by hour: the product, the closed loop's DAG cadence, doing nothing."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = doc["rows"]
    cols = min(3, len(rows))
    nrows = -(-len(rows) // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(4.0 * cols, 2.5 * nrows), dpi=80, squeeze=False)
    for ax, r in zip(axes.flat, rows):
        hours = range(len(r["product"]["max_usage"]))
        ax.plot(hours, r["no_action"]["max_usage"], color="grey", linestyle=":", label="doing nothing")
        ax.plot(hours, r["closed_loop"]["max_usage"], color="tab:blue", label="closed loop, dag cadence")
        ax.plot(hours, r["product"]["max_usage"], color="black", linestyle="--", marker=".", label="the product")
        ax.set_title(_name(r), fontsize=8)
        ax.set_xlabel("hourly DAG run", fontsize=7)
        ax.set_ylabel("worst broker usage", fontsize=7)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(rows) :]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=6)
    fig.suptitle(
        f"The product vs the closed loop (seed {doc['args']['seed']}): worst broker before each hourly run", fontsize=9
    )
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)


# blocks this script writes (figures.update); tests/test_docs_figures.py re-renders them from the JSON
BLOCKS = {"product-report": render_report, "product-headline": render_headline}


if __name__ == "__main__":
    raise SystemExit(main())
