"""Benchmark of the rebalancing pipeline: the five DAG stages in-process, at several cluster sizes.

Usage::

    .venv/bin/python benchmarks/bench_pipeline.py               # defaults below, writes docs/benchmarks/pipeline.md
    .venv/bin/python benchmarks/bench_pipeline.py --sizes 5:3:24:4 --submit-repeats 1 --no-write

What is measured, per cluster size ``brokers:namespaces:topics_per_namespace:bundles_per_namespace``:

1. A simulated cluster (``generate_cluster`` + ``SimulatedPulsar(..., ephemeral=True)``, real HTTP on
   127.0.0.1) and a fresh, migrated database on one embedded Postgres (pgdata in a temp dir under /tmp).
2. ``stage_collect`` -> ``stage_compute_usage`` -> ``stage_detect`` -> ``stage_plan`` -> approval
   (``cli.plans.decide``) -> ``stage_execute``, each timed with ``time.perf_counter`` (seconds), all
   in ONE SparkSession (``local[2]``, UI off, ``spark.sql.shuffle.partitions=4`` as the DAG's operator
   sets). The simulator serves from threads of this same process, so admin-API time in collect and
   execute includes the simulator's own CPU time on the same two cores.
3. Once per benchmark: the fixed cost of ``spark-submit`` (the venv's, next to ``sys.executable``) of a
   trivial PySpark app (start a session, ``spark.range(1).count()``, stop), which every real DAG task
   pays because each task is its own ``spark-submit``. Also the same app plus ``import
   pulsar_rebalance.pipeline.stages`` (what our thin entry points import before any work).

The first size runs in a cold JVM (class loading, JIT); later sizes reuse the warm one. A real DAG task
is always cold, so ``--cold-repeat`` (on by default) runs the first size a second time, warm, to show
how much of its time was JVM warm-up.

Estimated DAG wall time per size = sum(stage seconds) + 5 x spark-submit fixed cost (Airflow
scheduling latency and the approval wait are not included).

Everything started here (Postgres, simulator, Spark, the temp dir) is stopped/removed on exit, also on
error, Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "benchmarks" / "pipeline.md"
STAGES = ("collect_load", "compute_usage", "detect_overload", "plan_split", "execute_unload")
DEFAULT_SIZES = "5:3:24:4,20:10:200:8,50:20:1000:16"

T = TypeVar("T")

TRIVIAL_APP = """\
from pyspark.sql import SparkSession
spark = SparkSession.builder.appName("bench-trivial").getOrCreate()
assert spark.range(1).count() == 1
spark.stop()
"""

IMPORTING_APP = """\
import pulsar_rebalance.pipeline.stages  # noqa: F401  (what spark_jobs/*.py import before working)
import pulsar_rebalance.pipeline.transforms  # noqa: F401
from pyspark.sql import SparkSession
spark = SparkSession.builder.appName("bench-trivial-imports").getOrCreate()
assert spark.range(1).count() == 1
spark.stop()
"""


@dataclass(frozen=True)
class Size:
    """One cluster size: the ``generate_cluster`` knobs that scale the work."""

    brokers: int
    namespaces: int
    topics_per_namespace: int
    bundles_per_namespace: int

    @classmethod
    def parse(cls, text: str) -> Size:
        parts = text.split(":")
        if len(parts) != 4 or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise argparse.ArgumentTypeError(
                f"size {text!r} must be brokers:namespaces:topics_per_namespace:bundles_per_namespace (positive ints)"
            )
        return cls(*(int(p) for p in parts))

    @property
    def label(self) -> str:
        return (f"{self.brokers} brokers / {self.namespaces} ns / {self.topics_per_namespace} topics per ns / "
                f"{self.bundles_per_namespace} bundles per ns")

    def namespace_names(self) -> list[str]:
        """``tenant-<i % 5>/ns-<i>``; the last one is the generator's hot namespace."""
        return [f"tenant-{i % 5}/ns-{i:03d}" for i in range(self.namespaces)]


@dataclass
class Result:
    size: Size
    note: str = ""
    setup_s: float = 0.0  # generate cluster + start simulator + create/migrate the database
    stage_s: dict[str, float] = field(default_factory=dict)
    approve_s: float = 0.0
    brokers: int = 0
    namespaces: int = 0
    bundles: int = 0
    topics: int = 0
    detect_label: str = ""
    planned_unloads: int = 0
    planned_splits: int = 0
    report: dict[str, Any] = field(default_factory=dict)

    @property
    def stages_total_s(self) -> float:
        return sum(self.stage_s.values())


def log(message: str) -> None:
    print(f"[bench {dt.datetime.now().strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def timed(label: str, fn: Callable[[], T]) -> tuple[T, float]:
    """Run ``fn``, print one progress line (seconds) to stderr, return (result, seconds)."""
    start = time.perf_counter()
    out = fn()
    seconds = time.perf_counter() - start
    log(f"  {label:<16} {seconds:8.2f} s")
    return out, seconds


def _raise_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)  # unwinds through every ExitStack/finally, so cleanup runs


def start_postgres(stack: contextlib.ExitStack, root: Path):
    from pulsar_rebalance.store.embedded import EmbeddedPostgres

    pg = EmbeddedPostgres(root / "pg")
    stack.callback(pg.stop)  # registered before start(): stop() is safe on a server that never started
    pg.start()
    return pg


def start_spark(stack: contextlib.ExitStack, root: Path):
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("pulsar-rebalance-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.local.dir", str(root / "spark-local"))
        .getOrCreate()
    )
    stack.callback(spark.stop)
    spark.sparkContext.setLogLevel("WARN")
    return spark


def run_size(spark, pg, root: Path, size: Size, *, seed: int, note: str = "") -> Result:
    """Set up one cluster + database, run the five stages with approval in between, time everything."""
    from pulsar_rebalance.cli.plans import decide
    from pulsar_rebalance.pipeline import stages
    from pulsar_rebalance.pipeline.context import JobContext
    from pulsar_rebalance.pulsar_admin import PulsarAdminClient
    from pulsar_rebalance.simulator import SimulatedPulsar, generate_cluster
    from pulsar_rebalance.store.engine import dispose_engines, make_engine, migrate

    result = Result(size=size, note=note)
    log(f"size: {size.label}{f' ({note})' if note else ''}")
    with contextlib.ExitStack() as stack:
        t0 = time.perf_counter()
        names = size.namespace_names()
        state = generate_cluster(
            seed=seed, brokers=size.brokers, namespaces=names, hot_namespace=names[-1],
            topics_per_namespace=size.topics_per_namespace, bundles_per_namespace=size.bundles_per_namespace,
            port_base=0,
        )
        sim = SimulatedPulsar(state, ephemeral=True)
        stack.callback(sim.stop)
        sim.start()
        url = pg.create_database(f"bench_{uuid.uuid4().hex[:12]}")
        stack.callback(dispose_engines, url)
        migrate(url)
        engine = make_engine(url)
        client = PulsarAdminClient.from_url(sim.admin_url)
        stack.callback(client.close)
        result.setup_s = time.perf_counter() - t0
        log(f"  {'setup':<16} {result.setup_s:8.2f} s")

        ctx = JobContext(f"bench__{uuid.uuid4().hex[:8]}", str(root / "work"))
        collected, result.stage_s["collect_load"] = timed(
            "collect_load", lambda: stages.stage_collect(spark, ctx, params_doc={}, engine=engine, client=client))
        _, result.stage_s["compute_usage"] = timed(
            "compute_usage", lambda: stages.stage_compute_usage(spark, ctx, engine=engine))
        detected, result.stage_s["detect_overload"] = timed(
            "detect_overload", lambda: stages.stage_detect(spark, ctx, engine=engine))
        planned, result.stage_s["plan_split"] = timed(
            "plan_split", lambda: stages.stage_plan(spark, ctx, engine=engine))
        result.brokers, result.namespaces = collected["brokers"], collected["namespaces"]
        result.bundles, result.topics = collected["bundles"], collected["topics"]
        result.detect_label = f"{detected['label']}: {detected['reason']}"
        summary = planned.get("summary", {})
        result.planned_unloads = int(summary.get("numBundleUnloads", 0))
        result.planned_splits = int(summary.get("numBundleSplits", 0))
        if planned["status"] != "pending":
            raise RuntimeError(f"{size.label}: the plan is {planned['status']!r}, nothing to approve/execute: {detected}")

        def approve() -> None:
            previous = os.environ.get("PULSAR_REBALANCE_DATABASE_URL")
            os.environ["PULSAR_REBALANCE_DATABASE_URL"] = url
            try:
                decide(planned["plan_id"], "approved", by="bench")
            finally:
                if previous is None:
                    del os.environ["PULSAR_REBALANCE_DATABASE_URL"]
                else:
                    os.environ["PULSAR_REBALANCE_DATABASE_URL"] = previous

        _, result.approve_s = timed("approve", approve)
        result.report, result.stage_s["execute_unload"] = timed(
            "execute_unload", lambda: stages.stage_execute(spark, ctx, engine=engine, client=client))
        if result.report.get("status") != "executed":
            raise RuntimeError(f"{size.label}: execution ended {result.report.get('status')!r}: {result.report}")
        log(f"  {'stages total':<16} {result.stages_total_s:8.2f} s  ({result.bundles} bundles, {result.topics} topics, "
            f"{result.planned_unloads} unloads, {result.planned_splits} splits, max usage "
            f"{_pct(result.report.get('max_usage_before'))} -> {_pct(result.report.get('max_usage_after'))})")
    return result


def measure_submit(root: Path, source: str, name: str, repeats: int) -> list[float]:
    """Wall seconds of ``spark-submit --master local[2] <tiny app>``, ``repeats`` times."""
    spark_submit = Path(sys.executable).parent / "spark-submit"
    if not spark_submit.exists():
        raise FileNotFoundError(f"spark-submit not found next to the interpreter: {spark_submit}")
    app = root / f"{name}.py"
    app.write_text(source)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    cmd = [str(spark_submit), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
           "--conf", f"spark.local.dir={root / 'spark-local'}", str(app)]
    times = []
    for i in range(repeats):
        start = time.perf_counter()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        seconds = time.perf_counter() - start
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
        log(f"  spark-submit {name} #{i + 1}: {seconds:.2f} s")
        times.append(seconds)
    return times


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.1f}%"


def machine() -> dict[str, str]:
    java = subprocess.run(["java", "-version"], capture_output=True, text=True)
    java_line = (java.stderr or java.stdout).splitlines()[0] if (java.stderr or java.stdout) else "unknown"
    import pyspark

    return {
        "nproc": str(os.cpu_count()),
        "python": platform.python_version(),
        "java": java_line.strip(),
        "pyspark": pyspark.__version__,
        "platform": platform.platform(),
    }


def render(results: list[Result], submit: dict[str, list[float]], info: dict[str, str], args: argparse.Namespace,
           total_s: float) -> str:
    submit_med = statistics.median(submit["trivial"])
    lines = [
        "# Benchmark: the rebalancing pipeline (five DAG stages)",
        "",
        f"Command: `.venv/bin/python benchmarks/bench_pipeline.py"
        + (f" --sizes {args.sizes}" if args.sizes != DEFAULT_SIZES else "")
        + (f" --seed {args.seed}" if args.seed != 1 else "")
        + (f" --submit-repeats {args.submit_repeats}" if args.submit_repeats != 3 else "")
        + ("" if args.cold_repeat else " --no-cold-repeat") + "`",
        "",
        f"Machine: {info['nproc']} CPUs (nproc), Python {info['python']}, {info['java']}, "
        f"PySpark {info['pyspark']}, {info['platform']}. Benchmark wall time: {total_s:.0f} s.",
        "",
        "Set-up: each stage function of `pulsar_rebalance.pipeline.stages` is called in-process with ONE "
        "SparkSession (`local[2]`, UI off, `spark.sql.shuffle.partitions=4` as the DAG's operator sets), "
        "a simulated cluster served over real HTTP on 127.0.0.1 (`SimulatedPulsar(generate_cluster(...), "
        "ephemeral=True)`, in this same process) and an embedded Postgres (one fresh migrated database per "
        "size). Run parameters are the defaults (`{}`: ThresholdShedder, LeastLongTermMessageRate, Pulsar's "
        "default broker.conf); the plan is approved with `cli.plans.decide` between `plan_split` and "
        "`execute_unload`. Clusters come from `generate_cluster(seed=" + str(args.seed) + ", ...)` with "
        "namespaces `tenant-<i%5>/ns-<i>`, the last one hot (5x traffic, all its bundles on the first broker), "
        "one 4-partition topic per namespace on top of the plain topics. Times are `time.perf_counter` "
        "seconds. Usage is Pulsar's weighted max resource usage of the busiest broker.",
        "",
    ]
    for r in results:
        title = r.size.label + (f" ({r.note})" if r.note else "")
        rep = r.report
        lines += [
            f"## {title}",
            "",
            f"Collected: {r.brokers} brokers, {r.namespaces} namespaces, {r.bundles} bundles, {r.topics} topics. "
            f"Detect: {r.detect_label}. Plan: {r.planned_unloads} unloads, {r.planned_splits} splits.",
            "",
            "| step | seconds |",
            "|---|---:|",
            f"| (setup: generate cluster, start simulator, create + migrate DB) | {r.setup_s:.2f} |",
        ]
        lines += [f"| {s} | {r.stage_s[s]:.2f} |" for s in STAGES]
        lines += [
            f"| (approval via `cli.plans.decide`, not a Spark task) | {r.approve_s:.2f} |",
            f"| **sum of the five stages** | **{r.stages_total_s:.2f}** |",
            f"| 5 x spark-submit fixed cost ({submit_med:.2f} s each) | {5 * submit_med:.2f} |",
            f"| **estimated DAG run (stages + 5 x spark-submit)** | **{r.stages_total_s + 5 * submit_med:.2f}** |",
            "",
            f"Executed: {rep.get('unloads_executed')} unloads, {rep.get('splits_executed')} splits, "
            f"{rep.get('skipped')} skipped, {rep.get('failed')} failed. Max usage before "
            f"{_pct(rep.get('max_usage_before'))}, predicted after {_pct(rep.get('max_usage_after_predicted'))}, "
            f"measured after {_pct(rep.get('max_usage_after'))}.",
            "",
        ]
    lines += [
        "## Summary",
        "",
        "| size (brokers/ns/bundles/topics) | collect | usage | detect | plan | execute | stages sum | est. DAG run | unloads | splits | max usage before -> after |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        name = f"{r.brokers}/{r.namespaces}/{r.bundles}/{r.topics}" + (f" ({r.note})" if r.note else "")
        cells = " | ".join(f"{r.stage_s[s]:.2f}" for s in STAGES)
        lines.append(
            f"| {name} | {cells} | {r.stages_total_s:.2f} | {r.stages_total_s + 5 * submit_med:.2f} | "
            f"{r.planned_unloads} | {r.planned_splits} | {_pct(r.report.get('max_usage_before'))} -> "
            f"{_pct(r.report.get('max_usage_after'))} |"
        )
    imp = submit.get("imports") or []
    lines += [
        "",
        "## spark-submit fixed cost",
        "",
        "`spark-submit --master local[2] --conf spark.ui.enabled=false app.py` (the venv's spark-submit), "
        "wall time of the whole process:",
        "",
        "| app | runs (s) | median (s) |",
        "|---|---|---:|",
        f"| trivial (session, `spark.range(1).count()`, stop) | {', '.join(f'{t:.2f}' for t in submit['trivial'])} | "
        f"{submit_med:.2f} |",
    ]
    if imp:
        lines.append(f"| same + `import pulsar_rebalance.pipeline.stages, .transforms` | "
                     f"{', '.join(f'{t:.2f}' for t in imp)} | {statistics.median(imp):.2f} |")
    lines += ["", "## What dominates", "", dominance(results, submit_med, imp), ""]
    return "\n".join(lines)


def dominance(results: list[Result], submit_med: float, imports: list[float]) -> str:
    """One paragraph, derived from the numbers (so it stays true when the benchmark is re-run)."""
    warm = [r for r in results if not r.note] or results
    small, large = warm[0], warm[-1]
    share_small = 5 * submit_med / (small.stages_total_s + 5 * submit_med)
    share_large = 5 * submit_med / (large.stages_total_s + 5 * submit_med)
    top = max(STAGES, key=lambda s: large.stage_s[s])
    text = (
        f"At the smallest size the five spark-submit start-ups ({5 * submit_med:.1f} s) are "
        f"{share_small:.0%} of the estimated run, and the stages themselves take {small.stages_total_s:.1f} s. "
        f"At the largest size ({large.bundles} bundles, {large.topics} topics) the stages take "
        f"{large.stages_total_s:.1f} s and the start-ups are {share_large:.0%}; the largest stage there is "
        f"{top} ({large.stage_s[top]:.1f} s, {large.stage_s[top] / large.stages_total_s:.0%} of the stages)"
    )
    coll = large.stage_s["collect_load"] + large.stage_s["execute_unload"]
    text += (
        f", and collect_load + execute_unload (the two stages that walk the admin API; execute re-reads the "
        f"whole cluster afterwards) take {coll / large.stages_total_s:.0%} of it. "
    )
    cold = next((r for r in results if r.note), None)
    if cold is not None:
        twin = next((r for r in warm if r.size == cold.size), None)
        if twin is not None:
            text += (
                f"The same small cluster took {cold.stages_total_s:.1f} s in a cold JVM and "
                f"{twin.stages_total_s:.1f} s warm: each real task runs in a fresh spark-submit, so it pays "
                f"that warm-up too (first Parquet write/read, class loading), on top of the fixed start-up; the "
                f"estimate above uses warm stage times and so is a lower bound. "
            )
    if imports:
        text += (
            f"Importing our package in the submitted app adds "
            f"{statistics.median(imports) - submit_med:+.1f} s per task. "
        )
    text += ("Airflow's own scheduling latency between tasks and the human approval wait come on top and are not "
             "measured here.")
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=DEFAULT_SIZES,
                        help="comma-separated brokers:namespaces:topics_per_namespace:bundles_per_namespace "
                             f"(default {DEFAULT_SIZES})")
    parser.add_argument("--seed", type=int, default=1, help="generate_cluster seed (default 1)")
    parser.add_argument("--submit-repeats", type=int, default=3,
                        help="spark-submit runs of each trivial app; the median is used (default 3)")
    parser.add_argument("--no-cold-repeat", dest="cold_repeat", action="store_false",
                        help="do not re-run the first size warm (by default the first, cold-JVM run is kept "
                             "as its own row and the size is run again)")
    parser.add_argument("--no-import-variant", dest="import_variant", action="store_false",
                        help="skip the spark-submit variant that imports pulsar_rebalance")
    parser.add_argument("--no-write", action="store_true", help=f"do not write {DOC.relative_to(ROOT)}")
    args = parser.parse_args(argv)
    sizes = [Size.parse(s) for s in args.sizes.split(",") if s.strip()]
    if not sizes:
        parser.error("--sizes is empty")
    if args.submit_repeats < 1:
        parser.error("--submit-repeats must be >= 1")

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    signal.signal(signal.SIGTERM, _raise_on_sigterm)

    started = time.perf_counter()
    info = machine()
    results: list[Result] = []
    submit: dict[str, list[float]] = {}
    root = Path(tempfile.mkdtemp(prefix="pr-bench-pipeline-", dir="/tmp"))
    try:
        log(f"temp dir {root}")
        with contextlib.ExitStack() as stack:  # Spark stops first, then Postgres (LIFO), also on error
            pg = start_postgres(stack, root)
            spark = start_spark(stack, root)
            plan = [sizes[0], *sizes] if args.cold_repeat else list(sizes)
            for i, size in enumerate(plan):
                note = "cold JVM, first in the session" if args.cold_repeat and i == 0 else ""
                results.append(run_size(spark, pg, root, size, seed=args.seed, note=note))
        # measured after Spark and Postgres stopped, so the start-ups do not compete with them for the cores
        log("spark-submit fixed cost")
        submit["trivial"] = measure_submit(root, TRIVIAL_APP, "trivial", args.submit_repeats)
        if args.import_variant:
            submit["imports"] = measure_submit(root, IMPORTING_APP, "trivial_imports", args.submit_repeats)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    total = time.perf_counter() - started
    text = render(results, submit, info, args, total)
    if args.no_write:
        print(text)
    else:
        DOC.parent.mkdir(parents=True, exist_ok=True)
        DOC.write_text(text)
        log(f"wrote {DOC} ({total:.0f} s in all)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
