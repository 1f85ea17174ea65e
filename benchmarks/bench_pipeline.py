"""Benchmark of the rebalancing pipeline: the five DAG stages in-process, at several cluster sizes.

Usage::

    .venv/bin/python benchmarks/bench_pipeline.py               # defaults below, writes docs/benchmarks/pipeline.json
                                                                # and its block in docs/benchmarks/pipeline.md
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
is always cold, so by default the first size is run a second time, warm, to show how much of its time
was JVM warm-up (``--no-cold-repeat`` skips that).

The defaults take about 5 minutes on the 2-core reference machine.

Estimated DAG wall time per size = sum(stage seconds) + 5 x spark-submit fixed cost (Airflow
scheduling latency and the approval wait are not included).

Everything started here (Postgres, simulator, Spark, the temp dir) is stopped/removed on exit, also on
error, Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import json
import os
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

import figures  # benchmarks/figures.py: JSON + marked blocks in the docs

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "benchmarks" / "pipeline.md"
JSON = ROOT / "docs" / "benchmarks" / "pipeline.json"
SCRIPT = "benchmarks/bench_pipeline.py"
STAGES = ("collect_load", "compute_usage", "detect_overload", "plan_split", "execute_unload")
DEFAULT_SIZES = "5:3:24:4,20:10:200:16,50:20:1000:64,100:40:1000:64"

T = TypeVar("T")

SUBMIT_APP = """\
import json, time
t0 = time.perf_counter()
{imports}from pyspark.sql import SparkSession
t1 = time.perf_counter()
spark = SparkSession.builder.appName("bench-trivial").getOrCreate()
t2 = time.perf_counter()
assert spark.range(1).count() == 1
t3 = time.perf_counter()
spark.stop()
t4 = time.perf_counter()
print("PHASES " + json.dumps({{"imports": t1 - t0, "session": t2 - t1, "first_job": t3 - t2, "stop": t4 - t3}}))
"""
# what spark_jobs/*.py import before doing any work
PACKAGE_IMPORTS = "import pulsar_rebalance.pipeline.stages\nimport pulsar_rebalance.pipeline.transforms\n"


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
        return (
            f"{self.brokers} brokers / {self.namespaces} ns / {self.topics_per_namespace} topics per ns / "
            f"{self.bundles_per_namespace} bundles per ns"
        )

    def capacity_scale(self) -> float:
        """Factor on every broker capacity so average usage stays near the default cluster's.

        ``generate_cluster``'s per-topic load does not depend on the cluster size, so with its default
        broker (8 cores, 1 Gbit/s NIC, 4 GiB heap and direct memory) 400 topics per broker would read as
        ~30x overloaded everywhere. Scaling cores/NIC/memory by topics-per-broker relative to the default
        5-broker, 84-topic cluster keeps the workload shaped like the default one: one hot broker among
        normally loaded ones.
        """
        topics = self.namespaces * (self.topics_per_namespace + 4)  # + one 4-partition topic per namespace
        return max(1.0, (topics / self.brokers) / (84 / 5))

    def namespace_names(self) -> list[str]:
        """``tenant-<i % 5>/ns-<i>``; the last one is the generator's hot namespace."""
        return [f"tenant-{i % 5}/ns-{i:03d}" for i in range(self.namespaces)]


@dataclass
class Result:
    size: Size
    note: str = ""
    capacity_scale: float = 1.0  # factor on broker cores/NIC/memory, see Size.capacity_scale
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


def _quietly(fn: Callable[[], object], what: str) -> None:
    """Run a cleanup step; log (never raise) its failure so the original error stays visible."""
    try:
        fn()
    except Exception as exc:
        log(f"{what} failed: {type(exc).__name__}: {exc}")


def _raise_on_sigterm(signum: int, frame: object) -> None:
    log(f"signal {signum} received: cleaning up")
    raise SystemExit(128 + signum)  # unwinds through every ExitStack/finally, so cleanup runs


def prepare_process() -> None:
    """What an in-process Spark run needs: Python workers on this interpreter, a local address, the venv's
    ``spark-submit`` first on PATH, and SIGTERM unwinding through every cleanup."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    signal.signal(signal.SIGTERM, _raise_on_sigterm)


def open_run(stack: contextlib.ExitStack, pg, prefix: str, admin_url: str):
    """A fresh migrated database on ``pg`` (its URL and engine) and an admin client of ``admin_url``, both
    closed by ``stack``."""
    from pulsar_rebalance.pulsar_admin import PulsarAdminClient
    from pulsar_rebalance.store.engine import dispose_engines, make_engine, migrate

    url = pg.create_database(f"{prefix}_{uuid.uuid4().hex[:12]}")
    stack.callback(_quietly, lambda: dispose_engines(url), "closing DB connections")
    migrate(url)
    client = PulsarAdminClient.from_url(admin_url)
    stack.callback(_quietly, client.close, "closing the admin client")
    return url, make_engine(url), client


def start_postgres(stack: contextlib.ExitStack, root: Path):
    from pulsar_rebalance.store.embedded import EmbeddedPostgres

    pg = EmbeddedPostgres(root / "pg")
    stack.callback(
        _quietly, pg.stop, "stopping Postgres"
    )  # registered before start(): stop() is safe on a server that never started
    pg.start()
    return pg


def start_spark(stack: contextlib.ExitStack, root: Path):
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("pulsar-rebalance-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")  # keep stderr to one progress line per stage
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.local.dir", str(root / "spark-local"))
        .getOrCreate()
    )
    stack.callback(stop_spark, spark)
    spark.sparkContext.setLogLevel("WARN")
    return spark


def stop_spark(spark) -> None:
    """``spark.stop()``; if the py4j link is broken (a signal arrived mid-call), end our JVM directly.

    Never raises: a failed cleanup must not hide the error that caused it.
    """
    try:
        spark.stop()
        return
    except Exception as exc:
        log(f"spark.stop() failed ({type(exc).__name__}: {exc}); terminating the Spark JVM")
    gateway = getattr(spark.sparkContext, "_gateway", None)
    proc = getattr(gateway, "proc", None)  # the spark-submit launcher this process started
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def run_size(spark, pg, root: Path, size: Size, *, seed: int, scale_capacity: bool, note: str = "") -> Result:
    """Set up one cluster + database, run the five stages with approval in between, time everything."""
    from pulsar_rebalance.cli.plans import decide
    from pulsar_rebalance.pipeline import stages
    from pulsar_rebalance.pipeline.context import JobContext
    from pulsar_rebalance.simulator.generator import generate_cluster
    from pulsar_rebalance.simulator.server import SimulatedPulsar

    result = Result(size=size, note=note)
    result.capacity_scale = size.capacity_scale() if scale_capacity else 1.0
    log(f"size: {size.label}{f' ({note})' if note else ''}")
    with contextlib.ExitStack() as stack:
        t0 = time.perf_counter()
        names = size.namespace_names()
        f = size.capacity_scale() if scale_capacity else 1.0
        state = generate_cluster(
            cores=max(1, round(8 * f)),
            nic_speed_mbps=1000.0 * f,
            heap_mb=4096.0 * f,
            direct_memory_mb=4096.0 * f,
            seed=seed,
            brokers=size.brokers,
            namespaces=names,
            hot_namespace=names[-1],
            topics_per_namespace=size.topics_per_namespace,
            bundles_per_namespace=size.bundles_per_namespace,
            port_base=0,
        )
        sim = SimulatedPulsar(state, ephemeral=True)
        stack.callback(_quietly, sim.stop, "stopping the simulator")
        sim.start()
        url, engine, client = open_run(stack, pg, "bench", sim.admin_url)
        result.setup_s = time.perf_counter() - t0
        log(f"  {'setup':<16} {result.setup_s:8.2f} s")

        ctx = JobContext(f"bench__{uuid.uuid4().hex[:8]}", str(root / "work"))
        collected, result.stage_s["collect_load"] = timed(
            "collect_load", lambda: stages.stage_collect(spark, ctx, params_doc={}, engine=engine, client=client)
        )
        _, result.stage_s["compute_usage"] = timed(
            "compute_usage", lambda: stages.stage_compute_usage(spark, ctx, engine=engine)
        )
        detected, result.stage_s["detect_overload"] = timed(
            "detect_overload", lambda: stages.stage_detect(spark, ctx, engine=engine)
        )
        planned, result.stage_s["plan_split"] = timed(
            "plan_split", lambda: stages.stage_plan(spark, ctx, engine=engine)
        )
        result.brokers, result.namespaces = collected["brokers"], collected["namespaces"]
        result.bundles, result.topics = collected["bundles"], collected["topics"]
        result.detect_label = f"{detected['label']}: {detected['reason']}"
        summary = planned.get("summary", {})
        result.planned_unloads = int(summary.get("numBundleUnloads", 0))
        result.planned_splits = int(summary.get("numBundleSplits", 0))
        if planned["status"] != "pending":
            raise RuntimeError(
                f"{size.label}: the plan is {planned['status']!r}, nothing to approve/execute: {detected}"
            )

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
            "execute_unload", lambda: stages.stage_execute(spark, ctx, engine=engine, client=client)
        )
        if result.report.get("status") != "executed":
            raise RuntimeError(f"{size.label}: execution ended {result.report.get('status')!r}: {result.report}")
        log(
            f"  {'stages total':<16} {result.stages_total_s:8.2f} s  ({result.bundles} bundles, {result.topics} topics, "
            f"{result.planned_unloads} unloads, {result.planned_splits} splits, max usage "
            f"{_pct(result.report.get('max_usage_before'))} -> {_pct(result.report.get('max_usage_after'))})"
        )
    return result


@dataclass
class SubmitRun:
    """One spark-submit of the trivial app: wall seconds, and the app's own phases (seconds)."""

    total_s: float
    phases: dict[str, float]

    @property
    def launcher_s(self) -> float:
        """Launcher script + JVM start + Python start + py4j handshake + teardown: total minus the app's phases."""
        return self.total_s - sum(self.phases.values())


def measure_submit(root: Path, name: str, repeats: int, *, with_imports: bool) -> list[SubmitRun]:
    """``spark-submit --master local[2] <trivial app>`` (the venv's), ``repeats`` times, timed from outside."""
    spark_submit = Path(sys.executable).parent / "spark-submit"
    if not spark_submit.exists():
        raise FileNotFoundError(f"spark-submit not found next to the interpreter: {spark_submit}")
    app = root / f"{name}.py"
    app.write_text(SUBMIT_APP.format(imports=PACKAGE_IMPORTS if with_imports else ""))
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    from pulsar_rebalance.pipeline.jvm import driver_java_options

    cmd = [
        str(spark_submit),
        "--master",
        "local[2]",
        "--driver-java-options",
        driver_java_options(),  # what every job's driver gets: WARN logging, the CDS archive if built
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        f"spark.local.dir={root / 'spark-local'}",
        str(app),
    ]
    runs = []
    for i in range(repeats):
        start = time.perf_counter()
        # own process group: on a timeout or a signal the JVM and the Python driver it started both go
        proc = subprocess.Popen(
            cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
        try:
            out, err = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        seconds = time.perf_counter() - start
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}:\n{err[-3000:]}")
        line = next((ln for ln in out.splitlines() if ln.startswith("PHASES ")), None)
        if line is None:
            raise RuntimeError(f"{app} printed no PHASES line; stdout:\n{out[-2000:]}")
        run = SubmitRun(seconds, json.loads(line.removeprefix("PHASES ")))
        log(
            f"  spark-submit {name} #{i + 1}: {seconds:.2f} s (launcher {run.launcher_s:.2f}, "
            + ", ".join(f"{k} {v:.2f}" for k, v in run.phases.items())
            + ")"
        )
        runs.append(run)
    return runs


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.1f}%"


def tools() -> dict[str, str]:
    java = subprocess.run(["java", "-version"], capture_output=True, text=True)
    java_line = (java.stderr or java.stdout).splitlines()[0] if (java.stderr or java.stdout) else "unknown"
    import pyspark

    from pulsar_rebalance.pipeline.jvm import driver_java_options

    return {"java": java_line.strip(), "pyspark": pyspark.__version__, "driver_java_options": driver_java_options()}


def run_defaults() -> dict[str, Any]:
    """What ``{}`` means for a run: ``RunParams``'s defaults (the DAG's), recorded with the results."""
    from pulsar_rebalance.pipeline.params import RunParams

    d = RunParams()
    return {"shedding_strategy": d.shedding_strategy, "placement_strategy": d.placement_strategy}


def result_doc(r: Result) -> dict[str, Any]:
    keys = ("status", "unloads_executed", "splits_executed", "skipped", "failed")
    keys += ("max_usage_before", "max_usage_after_predicted", "max_usage_after")
    return {
        "size": dataclasses.asdict(r.size),
        "label": r.size.label,
        "note": r.note,
        "capacity_scale": r.capacity_scale,
        "setup_s": r.setup_s,
        "stage_s": r.stage_s,
        "approve_s": r.approve_s,
        "brokers": r.brokers,
        "namespaces": r.namespaces,
        "bundles": r.bundles,
        "topics": r.topics,
        "detect_label": r.detect_label,
        "planned_unloads": r.planned_unloads,
        "planned_splits": r.planned_splits,
        "report": {k: r.report.get(k) for k in keys},
    }


def _total(r: dict[str, Any]) -> float:
    return sum(r["stage_s"][s] for s in STAGES)


def _submit_median(doc: dict[str, Any]) -> float:
    return statistics.median(r["total_s"] for r in doc["submit"]["trivial"])


def render_setup(doc: dict[str, Any]) -> str:
    d = doc["run_defaults"]
    placement = (
        "which places its own moves"
        if d["shedding_strategy"] == "GlobalPlanner"
        else f"placement {d['placement_strategy']}"
    )
    return (
        f"Java: {doc['tools']['java']}; PySpark {doc['tools']['pyspark']}. Benchmark wall time: "
        f"{doc['wall_s']:.0f} s.\n\n"
        "Set-up: each stage function of `pulsar_rebalance.pipeline.stages` is called in-process with ONE "
        "SparkSession (`local[2]`, UI off, `spark.sql.shuffle.partitions=4` as the DAG's operator sets), "
        "a simulated cluster served over real HTTP on 127.0.0.1 (`SimulatedPulsar(generate_cluster(...), "
        "ephemeral=True)`, in this same process) and an embedded Postgres (one fresh migrated database per "
        f"size). Run parameters are `{{}}`, i.e. the DAG's defaults (`RunParams()`): shedding strategy "
        f"{d['shedding_strategy']} ({placement}), Pulsar's default broker.conf; the plan is approved with "
        "`cli.plans.decide` between `plan_split` and `execute_unload`. Clusters come from "
        f"`generate_cluster(seed={doc['args']['seed']}, ...)` with namespaces `tenant-<i%5>/ns-<i>`, the last one "
        "hot (5x traffic, all its bundles on the first broker), one 4-partition topic per namespace on top of "
        "the plain topics; broker capacity (cores, NIC, heap, direct memory) is scaled by topics-per-broker "
        "relative to the default 5-broker cluster so that the average usage stays comparable across sizes. "
        "Times are `time.perf_counter` seconds. Usage is Pulsar's weighted max resource usage of the busiest "
        "broker."
    )


def render_sizes(doc: dict[str, Any]) -> str:
    submit_med = _submit_median(doc)
    lines: list[str] = []
    for r in doc["results"]:
        title = r["label"] + (f" ({r['note']})" if r["note"] else "")
        rep = r["report"]
        scale = r["capacity_scale"]
        lines += [
            f"### {title}",
            "",
            f"Broker capacity x{scale:.2f} ({max(1, round(8 * scale))} cores, "
            f"{1000 * scale:.0f} Mbit/s NIC, {4096 * scale:.0f} MiB heap and direct memory). "
            f"Collected: {r['brokers']} brokers, {r['namespaces']} namespaces, {r['bundles']} bundles, "
            f"{r['topics']} topics. Detect: {r['detect_label']}. Plan: {r['planned_unloads']} unloads, "
            f"{r['planned_splits']} splits.",
            "",
            "| step | seconds |",
            "|---|---:|",
            f"| (setup: generate cluster, start simulator, create + migrate DB) | {r['setup_s']:.2f} |",
        ]
        lines += [f"| {s} | {r['stage_s'][s]:.2f} |" for s in STAGES]
        lines += [
            f"| (approval via `cli.plans.decide`, not a Spark task) | {r['approve_s']:.2f} |",
            f"| **sum of the five stages** | **{_total(r):.2f}** |",
            f"| 5 x spark-submit fixed cost ({submit_med:.2f} s each) | {5 * submit_med:.2f} |",
            f"| **estimated DAG run (stages + 5 x spark-submit)** | **{_total(r) + 5 * submit_med:.2f}** |",
            "",
            f"Executed: {rep.get('unloads_executed')} unloads, {rep.get('splits_executed')} splits, "
            f"{rep.get('skipped')} skipped, {rep.get('failed')} failed. Max usage before "
            f"{_pct(rep.get('max_usage_before'))}, predicted after {_pct(rep.get('max_usage_after_predicted'))}, "
            f"measured after {_pct(rep.get('max_usage_after'))}.",
            "",
        ]
    return "\n".join(lines)


def render_summary(doc: dict[str, Any]) -> str:
    submit_med = _submit_median(doc)
    lines = [
        "| size (brokers/ns/bundles/topics) | collect | usage | detect | plan | execute | stages sum | est. DAG run "
        "| unloads | splits | max usage before -> after |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in doc["results"]:
        name = f"{r['brokers']}/{r['namespaces']}/{r['bundles']}/{r['topics']}" + (
            f" ({r['note']})" if r["note"] else ""
        )
        cells = " | ".join(f"{r['stage_s'][s]:.2f}" for s in STAGES)
        lines.append(
            f"| {name} | {cells} | {_total(r):.2f} | {_total(r) + 5 * submit_med:.2f} | "
            f"{r['planned_unloads']} | {r['planned_splits']} | {_pct(r['report'].get('max_usage_before'))} -> "
            f"{_pct(r['report'].get('max_usage_after'))} |"
        )
    lines += [
        "",
        f"Shedding strategy: {doc['run_defaults']['shedding_strategy']} (the DAG's default). Estimated DAG run = "
        f"stages + 5 x the median `spark-submit` of a trivial app ({submit_med:.2f} s); Airflow's scheduling "
        "latency and the approval wait are not included.",
    ]
    return "\n".join(lines)


def render_submit(doc: dict[str, Any]) -> str:
    lines = [
        "`spark-submit --master local[2] --driver-java-options '...' --conf spark.ui.enabled=false app.py` (the "
        f"venv's spark-submit; driver options as every job gets them: `{doc['tools']['driver_java_options']}`), "
        "wall time of the whole process, median of the runs; the phases are timed inside the app (medians), "
        '"launcher" is the rest (launcher script, JVM start, Python driver start, py4j handshake, exit):',
        "",
        "| app | runs (s) | median (s) | launcher | imports | session start | first job | stop |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    labels = {
        "trivial": "trivial (session, `spark.range(1).count()`, stop)",
        "imports": "same + `import pulsar_rebalance.pipeline.stages, .transforms`",
    }
    for key in [k for k in labels if k in doc["submit"]]:
        runs = doc["submit"][key]
        med = {k: statistics.median(r["phases"][k] for r in runs) for k in ("imports", "session", "first_job", "stop")}
        launcher = statistics.median(r["total_s"] - sum(r["phases"].values()) for r in runs)
        each = ", ".join(f"{r['total_s']:.2f}" for r in runs)
        lines.append(
            f"| {labels[key]} | {each} | "
            f"{statistics.median(r['total_s'] for r in runs):.2f} | {launcher:.2f} | "
            f"{med['imports']:.2f} | {med['session']:.2f} | {med['first_job']:.2f} | {med['stop']:.2f} |"
        )
    return "\n".join(lines)


def dominance(doc: dict[str, Any]) -> str:
    """One paragraph, derived from the numbers (so it stays true when the benchmark is re-run)."""
    results = doc["results"]
    submit_med = _submit_median(doc)
    imports = [r["total_s"] for r in doc["submit"].get("imports") or []]
    warm = [r for r in results if not r["note"]] or results
    small, large = warm[0], warm[-1]
    fixed = 5 * submit_med
    share_small = fixed / (_total(small) + fixed)
    share_large = fixed / (_total(large) + fixed)
    crossover = next((r for r in warm if _total(r) > fixed), None)
    spark_only = sum(large["stage_s"][st] for st in ("compute_usage", "detect_overload", "plan_split"))
    actions = large["planned_unloads"] + large["planned_splits"]
    if crossover is None:
        text = "At every size measured the estimated run is dominated by Spark's fixed cost, not by work: "
    elif crossover is small:
        text = "Even at the smallest size the stages outweigh Spark's fixed cost: "
    else:
        text = (
            f"Below {crossover['bundles']} bundles / {crossover['topics']} topics (the first size measured where "
            f"the stages outgrow the start-ups) the estimated run is dominated by Spark's fixed cost, not by work: "
        )
    text += (
        f"at the smallest size the five spark-submit start-ups ({fixed:.1f} s) are {share_small:.0%} of the "
        f"estimated run while the stages take {_total(small):.1f} s. "
    )
    ranked = sorted(STAGES, key=lambda st: large["stage_s"][st], reverse=True)
    text += (
        f"At the largest size ({large['brokers']} brokers, {large['bundles']} bundles, {large['topics']} topics) "
        f"the start-ups are {share_large:.0%}; the biggest stages are {ranked[0]} "
        f"({large['stage_s'][ranked[0]]:.1f} s, {large['stage_s'][ranked[0]] / _total(large):.0%} of the stages) "
        f"and {ranked[1]} ({large['stage_s'][ranked[1]]:.1f} s), while the Spark/Postgres stages compute_usage + "
        f"detect_overload + plan_split take {spark_only:.1f} s together. execute_unload ran {actions} actions "
        f"({large['stage_s']['execute_unload'] / max(actions, 1):.2f} s per action: splits one at a time, each with "
        f"a bundles GET, an owned-namespaces GET, the admin call and two state commits, unloads 4 in parallel, "
        f"then a full re-read of the cluster); collect_load grows with the number of topics. Both walk the admin "
        f"API, answered here by the simulator in this same Python process, so they measure our client plus the "
        f"simulator on the same cores; against a real cluster they are bounded by Pulsar's own latency. "
    )
    cold = next((r for r in results if r["note"]), None)
    twin = next((r for r in warm if cold is not None and r["size"] == cold["size"]), None)
    if cold is not None and twin is not None:
        text += (
            f"The smallest cluster took {_total(cold):.1f} s in a cold JVM and {_total(twin):.1f} s "
            f"warm; every real task is a fresh JVM, so it pays part of that warm-up (first Parquet write/read, "
            f"class loading) beyond the trivial app's first job, and the estimate, built from warm stage times, is "
            f"a lower bound. "
        )
    if imports:
        text += (
            f"Importing our package in the submitted app (as every job entry point does) changes the start-up by "
            f"{statistics.median(imports) - submit_med:+.1f} s (see the phases above; this machine is shared, so "
            f"differences under ~1 s are noise). "
        )
    text += (
        "Airflow's own scheduling latency between tasks and the human approval wait come on top and are not "
        "measured here."
    )
    return text


def render_report(doc: dict[str, Any]) -> str:
    return "\n".join(
        [
            render_setup(doc),
            "",
            "## Summary",
            "",
            render_summary(doc),
            "",
            "## Per size",
            "",
            render_sizes(doc),
            "## spark-submit fixed cost",
            "",
            render_submit(doc),
            "",
            "## What dominates",
            "",
            dominance(doc),
        ]
    )


# blocks this script writes (figures.update); tests/test_docs_figures.py re-renders them from the JSON
BLOCKS: dict[str, Callable[[dict[str, Any]], str]] = {"pipeline-report": render_report}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes",
        default=DEFAULT_SIZES,
        help=f"comma-separated brokers:namespaces:topics_per_namespace:bundles_per_namespace (default {DEFAULT_SIZES})",
    )
    parser.add_argument("--seed", type=int, default=1, help="generate_cluster seed (default 1)")
    parser.add_argument(
        "--submit-repeats",
        type=int,
        default=3,
        help="spark-submit runs of each trivial app; the median is used (default 3)",
    )
    parser.add_argument(
        "--no-cold-repeat",
        dest="cold_repeat",
        action="store_false",
        help="do not re-run the first size warm (by default the first, cold-JVM run is kept "
        "as its own row and the size is run again)",
    )
    parser.add_argument(
        "--no-scale-capacity",
        dest="scale_capacity",
        action="store_false",
        help="keep generate_cluster's default broker capacity at every size (large sizes then "
        "read as many times overloaded)",
    )
    parser.add_argument(
        "--no-import-variant",
        dest="import_variant",
        action="store_false",
        help="skip the spark-submit variant that imports pulsar_rebalance",
    )
    parser.add_argument(
        "--no-write",
        action="store_true",
        help=f"do not write {JSON.relative_to(ROOT)} and {DOC.relative_to(ROOT)}; print the report",
    )
    args = parser.parse_args(argv)
    try:
        sizes = [Size.parse(s) for s in args.sizes.split(",") if s.strip()]
    except argparse.ArgumentTypeError as exc:
        parser.error(f"--sizes: {exc}")
    if not sizes:
        parser.error("--sizes is empty")
    if args.submit_repeats < 1:
        parser.error("--submit-repeats must be >= 1")

    prepare_process()

    started = time.perf_counter()
    load = figures.LoadSampler()
    load.__enter__()
    info = tools()
    results: list[Result] = []
    submit: dict[str, list[SubmitRun]] = {}
    root = Path(tempfile.mkdtemp(prefix="pr-bench-pipeline-", dir="/tmp"))
    try:
        log(f"temp dir {root}")
        with contextlib.ExitStack() as stack:  # Spark stops first, then Postgres (LIFO), also on error
            pg = start_postgres(stack, root)
            spark = start_spark(stack, root)
            plan = [sizes[0], *sizes] if args.cold_repeat else list(sizes)
            for i, size in enumerate(plan):
                note = "cold JVM, first in the session" if args.cold_repeat and i == 0 else ""
                results.append(
                    run_size(spark, pg, root, size, seed=args.seed, scale_capacity=args.scale_capacity, note=note)
                )
        # measured after Spark and Postgres stopped, so the start-ups do not compete with them for the cores
        log("spark-submit fixed cost")
        submit["trivial"] = measure_submit(root, "trivial", args.submit_repeats, with_imports=False)
        if args.import_variant:
            submit["imports"] = measure_submit(root, "trivial_imports", args.submit_repeats, with_imports=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    load.__exit__(None, None, None)
    total = time.perf_counter() - started
    doc = {
        "meta": figures.meta(load),
        "tools": info,
        "wall_s": total,
        "args": {"seed": args.seed, "sizes": args.sizes, "submit_repeats": args.submit_repeats},
        "run_defaults": run_defaults(),
        "results": [result_doc(r) for r in results],
        "submit": {k: [{"total_s": r.total_s, "phases": r.phases} for r in runs] for k, runs in submit.items()},
    }
    if args.no_write:
        print(render_report(doc))
    else:
        figures.write_json(JSON, doc)
        figures.update(SCRIPT, str(JSON.relative_to(ROOT)), doc, {"pipeline-report": [DOC]})
        log(f"wrote {JSON} and {DOC} ({total:.0f} s in all)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
