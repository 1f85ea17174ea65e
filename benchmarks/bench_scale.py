"""Benchmark: the pipeline from collected data to stored plan at 100k, 1M and 10M topics.

Usage::

    .venv/bin/python benchmarks/bench_scale.py                       # writes docs/benchmarks/scale.json + its block in scale.md
    .venv/bin/python benchmarks/bench_scale.py --topics 100000 --cores 2 --no-write   # a quick look

Per size (``--topics``; the cluster grows with it: one broker per 10,000 topics, one namespace per
50,000, one bundle per 100 -> 1,000 brokers / 200 namespaces / 100,000 bundles at 10M topics) and per
Spark core count (``--cores``: ``local[2]`` and ``local[1]``), on a fresh migrated database of one
embedded Postgres:

1. ``spark_jobs/synthetic_snapshot.py`` writes the collected snapshot (what ``collect_load`` writes:
   ``topics.parquet``, ``bundle_stats.parquet``, runs/brokers/broker_load/bundle_ranges/ownership);
2. ``spark_jobs/compute_usage.py``, ``detect_overload.py``, ``plan_split.py`` run on it: the pipeline
   from collected data to stored plan.

Each job is a real ``spark-submit`` (the venv's) with the DAG operator's settings (UI off,
``spark.sql.shuffle.partitions=4``) and ``--driver-memory`` (default 1g). Measured per job: wall time
(``time.perf_counter`` around the process, JVM start included); peak RSS of the driver's process tree
(the Spark JVM, which in local mode also runs the executor's tasks, plus the Python driver), sampled
every 0.1 s with psutil; the executor's peak JVM heap and peak on-heap execution memory from Spark's
own executor metrics (event log, ``spark.eventLog.logStageExecutorMetrics``); Python worker RSS (0 when
no Python UDF runs); rows/s = topics / wall.

The single-process baseline (``--baseline-worker``, its own process, pandas + numpy): the same
topic-level computations as the Spark jobs -- read ``topics.parquet``, crc32 of every topic name,
map it onto the live ranges (``numpy.searchsorted`` per namespace), aggregate per bundle (topics,
rates, mismatches), write ``bundle_load.parquet``, and select the topics of the bundles the plan
splits. The bundle- and broker-level work (Postgres, the decision core) is the same Python code
whatever computes the topic level, so the side-by-side compares that code's share too: see the
"topic-level seconds" the Spark jobs report.

Everything started here (Postgres, spark-submits, temp dir) is stopped/removed on exit, also on error.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import figures  # benchmarks/figures.py: JSON + marked blocks in the docs

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "benchmarks" / "scale.md"
JSON = ROOT / "docs" / "benchmarks" / "scale.json"
SCRIPT = "benchmarks/bench_scale.py"
JOBS = ("synthetic_snapshot", "compute_usage", "detect_overload", "plan_split")
PIPELINE = ("compute_usage", "detect_overload", "plan_split")
sys.path.insert(0, str(ROOT / "src"))


def log(msg: str) -> None:
    print(f"[bench_scale {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


@dataclass
class Measured:
    wall_s: float
    driver_peak_mb: float  # JVM + Python driver, process-tree RSS
    jvm_peak_mb: float
    python_driver_peak_mb: float
    python_workers_peak_mb: float
    heap_peak_mb: float | None = None  # Spark executor metrics
    execution_peak_mb: float | None = None
    result: dict[str, Any] = field(default_factory=dict)
    load_avg: float = 0.0  # the machine's 1-minute load average when the job ended (2 cores: > 2 means contention)
    load_max: float = 0.0  # the highest 1-minute load average sampled while the job ran


class TreeSampler:
    """Peak RSS of a process and its descendants, by kind (JVM, Python driver, PySpark workers)."""

    def __init__(self, pid: int, interval: float = 0.1) -> None:
        import psutil

        self._root = psutil.Process(pid)
        self._interval = interval
        self._stop = threading.Event()
        self.peak = {"total": 0, "jvm": 0, "py": 0, "workers": 0}
        self.load_max = 0.0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> TreeSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        import psutil

        while not self._stop.is_set():
            try:
                procs = [self._root, *self._root.children(recursive=True)]
            except psutil.Error:
                procs = []
            now = {"total": 0, "jvm": 0, "py": 0, "workers": 0}
            for p in procs:
                try:
                    rss = p.memory_info().rss
                    cmd = " ".join(p.cmdline())
                    name = p.name()
                except psutil.Error:
                    continue
                if "java" in name:
                    now["jvm"] += rss
                elif "pyspark.daemon" in cmd or "pyspark.worker" in cmd:
                    now["workers"] += rss
                elif "python" in name:
                    now["py"] += rss
                else:
                    continue
                now["total"] += rss
            for k, v in now.items():
                self.peak[k] = max(self.peak[k], v)
            self.load_max = max(self.load_max, os.getloadavg()[0])
            self._stop.wait(self._interval)


def executor_metrics(event_dir: Path) -> tuple[float | None, float | None]:
    """Peak JVMHeapMemory and OnHeapExecutionMemory (MiB) from the event logs in ``event_dir``."""
    heap = execution = None
    for f in (p for p in event_dir.rglob("*") if p.is_file()):
        for line in f.read_text(errors="replace").splitlines():
            if "Executor Metrics" not in line:
                continue
            ev = json.loads(line)
            for key in ("Executor Metrics", "Task Executor Metrics"):
                m = ev.get(key) or {}
                if "JVMHeapMemory" in m:
                    heap = max(heap or 0, m["JVMHeapMemory"] / 2**20)
                if "OnHeapExecutionMemory" in m:
                    execution = max(execution or 0, m["OnHeapExecutionMemory"] / 2**20)
    return heap, execution


def run_measured(
    cmd: list[str], env: dict[str, str], timeout_s: float
) -> tuple[subprocess.CompletedProcess, TreeSampler, float]:
    t0 = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=err, text=True, start_new_session=True)
        try:
            with TreeSampler(proc.pid) as sampler:
                proc.wait(timeout=timeout_s)
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, 9)
            proc.wait()
            raise
        wall = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        done = subprocess.CompletedProcess(cmd, proc.returncode, out.read(), err.read())
    return done, sampler, wall


def spark_job(
    job: str, args: list[str], *, cores: int, env: dict[str, str], root: Path, driver_memory: str
) -> Measured:
    events = root / "events" / f"{job}-{uuid.uuid4().hex[:6]}"
    events.mkdir(parents=True)
    from pulsar_rebalance.pipeline.jvm import driver_java_options

    cmd = [
        str(Path(sys.executable).parent / "spark-submit"),
        "--master",
        f"local[{cores}]",
        "--driver-memory",
        driver_memory,
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        "spark.ui.showConsoleProgress=false",
        "--conf",
        "spark.sql.shuffle.partitions=4",
        "--conf",
        f"spark.local.dir={root / 'spark-local'}",
        "--conf",
        f"spark.driver.extraJavaOptions={driver_java_options()}",
        "--conf",
        "spark.eventLog.enabled=true",
        "--conf",
        "spark.eventLog.compress=false",
        "--conf",
        f"spark.eventLog.dir=file://{events}",
        "--conf",
        "spark.eventLog.logStageExecutorMetrics=true",
        "--conf",
        "spark.executor.metrics.pollingInterval=200",
        str(ROOT / "spark_jobs" / f"{job}.py"),
        *args,
    ]
    done, sampler, wall = run_measured(cmd, env, timeout_s=3600)
    if done.returncode != 0:
        raise RuntimeError(
            f"{job} failed (exit {done.returncode}):\n{done.stderr[-4000:]}\n--- stdout ---\n{done.stdout[-4000:]}"
        )
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith(f"RESULT {job} "))
    heap, execution = executor_metrics(events)
    mb, peak = 2**20, sampler.peak
    return Measured(
        wall,
        peak["total"] / mb,
        peak["jvm"] / mb,
        peak["py"] / mb,
        peak["workers"] / mb,
        heap,
        execution,
        json.loads(line.split(" ", 2)[2]),
        os.getloadavg()[0],
        sampler.load_max,
    )


# ----------------------------------------------------------------------------------- pandas baseline


def baseline_worker(work_dir: str, db_url: str, run_id: str, split_bundles: list[str]) -> dict[str, Any]:
    """The topic-level computations of compute_usage + plan_split, single process, pandas + numpy."""
    import zlib

    import numpy as np
    import pandas as pd

    from pulsar_rebalance.pipeline import context as C
    from pulsar_rebalance.store import repository as repo
    from pulsar_rebalance.store.engine import make_engine, session_scope

    t0 = time.perf_counter()
    engine = make_engine(db_url)
    with session_scope(engine) as s:
        run = repo.get_run(s, run_id=run_id)
        boundaries = repo.live_boundaries(s, cluster_id=run.cluster_id)
    ctx = C.JobContext(run_id, work_dir)
    df = pd.read_parquet(ctx.path(C.TOPICS))
    t_read = time.perf_counter()
    df["hash"] = np.fromiter((zlib.crc32(t.encode("utf-8")) for t in df["topic"]), dtype=np.int64, count=len(df))
    bundle = np.empty(len(df), dtype=object)
    for ns, idx in df.groupby("namespace").indices.items():
        bs = np.asarray(sorted(boundaries.get(ns, [])), dtype=np.int64)
        if len(bs) < 2:
            continue
        i = np.minimum(np.searchsorted(bs, df["hash"].to_numpy()[idx], side="right") - 1, len(bs) - 2)
        names = np.array([f"0x{a:08x}_0x{b:08x}" for a, b in zip(bs, bs[1:])], dtype=object)
        bundle[idx] = np.where(i >= 0, names[np.maximum(i, 0)], None)
    df["bundle"] = bundle
    df["mismatch"] = (df["bundle"].isna() | (df["bundle"] != df["reported_bundle"])).astype(np.int64)
    agg = (
        df.groupby(["namespace", "bundle"], dropna=False)
        .agg(
            topics=("topic", "nunique"),
            msg_rate_in=("msg_rate_in", "sum"),
            msg_rate_out=("msg_rate_out", "sum"),
            msg_throughput_in=("msg_throughput_in", "sum"),
            msg_throughput_out=("msg_throughput_out", "sum"),
            producer_count=("producer_count", "sum"),
            consumer_count=("consumer_count", "sum"),
            mismatched_topics=("mismatch", "sum"),
            brokers=("broker", lambda b: sorted(set(b))),
        )
        .reset_index()
    )
    agg["bundle_full"] = agg["namespace"] + "/" + agg["bundle"].fillna("")
    out = Path(work_dir) / "baseline" / "bundle_load.parquet"
    out.parent.mkdir(parents=True, exist_ok=True)
    agg.to_parquet(out)
    mismatches = int(agg["mismatched_topics"].sum())
    t_usage = time.perf_counter()
    full = df["namespace"] + "/" + df["bundle"].fillna("")
    split_topics = df[full.isin(split_bundles)]
    by_bundle: dict[str, dict[str, dict[str, float]]] = {}
    for r in split_topics.itertuples():
        by_bundle.setdefault(f"{r.namespace}/{r.bundle}", {})[r.topic] = {
            "msgRateIn": r.msg_rate_in,
            "msgRateOut": r.msg_rate_out,
            "msgThroughputIn": r.msg_throughput_in,
            "msgThroughputOut": r.msg_throughput_out,
        }
    t_plan = time.perf_counter()
    return {
        "read_s": t_read - t0,
        "usage_topics_s": t_usage - t0,
        "plan_topics_s": t_plan - t_usage,
        "bundles": len(agg),
        "mismatches": mismatches,
        "split_topics": sum(len(v) for v in by_bundle.values()),
    }


def run_baseline(work_dir: Path, db_url: str, run_id: str, split_bundles: list[str], env: dict[str, str]) -> Measured:
    cmd = [
        sys.executable,
        __file__,
        "--baseline-worker",
        json.dumps({"work_dir": str(work_dir), "run_id": run_id, "split_bundles": split_bundles}),
    ]
    done, sampler, wall = run_measured(cmd, env, timeout_s=3600)
    if done.returncode != 0:
        raise RuntimeError(f"baseline failed:\n{done.stderr[-4000:]}")
    mb = 2**20
    return Measured(
        wall,
        sampler.peak["total"] / mb,
        0.0,
        sampler.peak["py"] / mb,
        0.0,
        result=json.loads(done.stdout.splitlines()[-1]),
        load_avg=os.getloadavg()[0],
        load_max=sampler.load_max,
    )


# ----------------------------------------------------------------------------------- driver


def job_env(url: str) -> dict[str, str]:
    return {
        **os.environ,
        "PULSAR_REBALANCE_DATABASE_URL": url,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH")) if p),
    }


def clone_database(pg, template: str, name: str) -> str:
    """``CREATE DATABASE name TEMPLATE template`` (a file-level copy: the same snapshot, fast)."""
    import sqlalchemy as sa

    engine = sa.create_engine(pg.url_for("postgres"), poolclass=sa.pool.NullPool, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as c:
            c.execute(sa.text(f'CREATE DATABASE "{name}" TEMPLATE "{template}"'))
    finally:
        engine.dispose()
    return pg.url_for(name)


TARGET_TOPICS, TARGET_WALL_S, TARGET_DRIVER_MB = 10_000_000, 600.0, 2048
"""The issue's target: 10M topics from collected data to stored plan under 10 min, driver under 2 GiB."""
RUN_PARAMS: dict[str, Any] = {"config": {"loadBalancerNamespaceMaximumBundles": 4096}}
"""The run's DAG params: the DAG's defaults (its default shedding strategy unless ``--shedding``), and namespaces
allowed to grow past their 500 bundles, so the hottest bundles can be split (plan_split reads their topics)."""


def set_run_params(url: str, run_id: str, doc: dict[str, Any]) -> None:
    """The run's params as the DAG run would have given them to collect_load (validated the same way)."""
    import sqlalchemy as sa

    from pulsar_rebalance.pipeline.params import RunParams

    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        with engine.begin() as c:
            c.execute(
                sa.text("UPDATE runs SET params = CAST(:p AS jsonb) WHERE run_id = :r"),
                {"p": json.dumps(RunParams.from_json(doc).to_json()), "r": run_id},
            )
    finally:
        engine.dispose()


def spec_for(topics: int):
    from pulsar_rebalance.pipeline.synthetic import SyntheticSpec

    return SyntheticSpec(
        brokers=max(2, topics // 10_000),
        namespaces=max(1, topics // 50_000),
        bundles=max(2, topics // 100),
        topics=topics,
    )


def machine() -> dict[str, str]:
    import psutil
    import pyspark

    java = subprocess.run(["java", "-version"], capture_output=True, text=True)
    cpu = next(
        (
            ln.split(":", 1)[1].strip()
            for ln in Path("/proc/cpuinfo").read_text().splitlines()
            if ln.startswith("model name")
        ),
        "unknown",
    )
    return {
        "nproc": str(os.cpu_count()),
        "cpu": cpu,
        "memory": f"{psutil.virtual_memory().total / 2**30:.1f} GiB",
        "python": platform.python_version(),
        "java": (java.stderr or java.stdout).splitlines()[0].strip(),
        "pyspark": pyspark.__version__,
        "platform": platform.platform(),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topics", default="100000,1000000,10000000", help="comma-separated topic counts")
    ap.add_argument("--cores", default="2,1", help="comma-separated local[N] core counts")
    ap.add_argument("--driver-memory", default="1g")
    ap.add_argument(
        "--shedding",
        help="the run's shedding_strategy (default: the DAG's default, core.strategies.DEFAULT_SHEDDER)",
    )
    ap.add_argument(
        "--no-write", action="store_true", help=f"do not write {JSON.relative_to(ROOT)} and {DOC.relative_to(ROOT)}"
    )
    ap.add_argument(
        "--cache",
        help="keep the embedded Postgres and the generated snapshots in this directory and "
        "reuse them (a 10M-topic snapshot is generated once)",
    )
    ap.add_argument("--baseline-worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    from pulsar_rebalance.core.strategies import DEFAULT_SHEDDER

    RUN_PARAMS["shedding_strategy"] = args.shedding or DEFAULT_SHEDDER
    if args.baseline_worker:
        a = json.loads(args.baseline_worker)
        print(
            json.dumps(
                baseline_worker(
                    a["work_dir"], os.environ["PULSAR_REBALANCE_DATABASE_URL"], a["run_id"], a["split_bundles"]
                )
            )
        )
        return 0

    from pulsar_rebalance.store.embedded import EmbeddedPostgres
    from pulsar_rebalance.store.engine import dispose_engines, migrate

    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))  # run the cleanup below

    sizes = [int(t) for t in args.topics.split(",")]
    cores_list = [int(c) for c in args.cores.split(",")]
    info = machine()
    load = figures.LoadSampler()
    load.__enter__()
    started = time.perf_counter()
    results: list[dict[str, Any]] = []
    # --cache: the embedded Postgres and each generated snapshot are kept there and reused by later runs
    root = Path(args.cache).resolve() if args.cache else Path(tempfile.mkdtemp(prefix="bench-scale-"))
    root.mkdir(parents=True, exist_ok=True)
    pg = EmbeddedPostgres(root / "pg")
    try:
        pg.start()
        for topics in sizes:
            spec = spec_for(topics)
            log(f"{topics:,} topics ({spec.brokers} brokers, {spec.namespaces} ns, {spec.bundles} bundles)")
            gen_db = f"scale_gen_{topics}"
            gen_work = root / f"gen-{topics}"
            marker = gen_work / "generated.json"  # written last: the snapshot (files and database) is complete
            run_id = f"scale__{topics}"
            common = ["--run-id", run_id]
            if marker.is_file():
                generated = Measured(**json.loads(marker.read_text()))
                generated.result["reused"] = True
                gen_url = pg.url_for(gen_db)
                migrate(gen_url)  # a snapshot cached by an older version: its schema brought up to date
                dispose_engines(gen_url)
                log(f"  synthetic_snapshot reused from {gen_work} (generated in {generated.wall_s:.1f} s)")
            else:
                shutil.rmtree(gen_work, ignore_errors=True)
                pg.drop_database(gen_db)
                gen_url = pg.create_database(gen_db)
                migrate(gen_url)
                dispose_engines(gen_url)
                generated = spark_job(
                    "synthetic_snapshot",
                    common
                    + [
                        "--work-dir",
                        str(gen_work),
                        "--brokers",
                        str(spec.brokers),
                        "--namespaces",
                        str(spec.namespaces),
                        "--bundles",
                        str(spec.bundles),
                        "--topics",
                        str(topics),
                    ],
                    cores=cores_list[0],
                    env=job_env(gen_url),
                    root=root,
                    driver_memory=args.driver_memory,
                )
                dispose_engines(gen_url)
                marker.write_text(json.dumps(dataclasses.asdict(generated)))
                log(
                    f"  {'synthetic_snapshot':<20} {generated.wall_s:7.1f} s  driver peak {generated.driver_peak_mb:6.0f} MiB"
                )
            for cores in cores_list:
                # the same collected snapshot for every core count: a template copy of the database, hard links of the files
                pg.drop_database(f"scale_{topics}_{cores}")
                url = clone_database(pg, gen_db, f"scale_{topics}_{cores}")
                set_run_params(url, run_id, RUN_PARAMS)
                work = root / f"work-{topics}-{cores}"
                shutil.rmtree(work, ignore_errors=True)
                subprocess.run(["cp", "-al", str(gen_work), str(work)], check=True)
                env = job_env(url)
                row: dict[str, Any] = {
                    "topics": topics,
                    "cores": cores,
                    "spec": spec,
                    "jobs": {"synthetic_snapshot": generated},
                }
                log(f"  local[{cores}]")
                for job in PIPELINE:
                    m = spark_job(
                        job,
                        common + ["--work-dir", str(work)],
                        cores=cores,
                        env=env,
                        root=root,
                        driver_memory=args.driver_memory,
                    )
                    row["jobs"][job] = m
                    log(
                        f"    {job:<18} {m.wall_s:7.1f} s  driver peak {m.driver_peak_mb:6.0f} MiB  "
                        f"heap peak {m.heap_peak_mb or 0:6.0f} MiB  load max {m.load_max:.1f}  {m.result.get('seconds', '')}"
                    )
                if cores == cores_list[0]:
                    decision = json.loads(
                        "".join(p.read_text() for p in sorted((work / run_id / "decision.json").glob("part-*")))
                    )
                    splits = [sp["bundle"] for sp in decision["cycle"].get("splits", [])]
                    m = run_baseline(work, url, run_id, splits, env)
                    row["baseline"] = m
                    log(f"    {'pandas baseline':<18} {m.wall_s:7.1f} s  peak {m.driver_peak_mb:6.0f} MiB  {m.result}")
                shutil.rmtree(work, ignore_errors=True)
                shutil.rmtree(root / "spark-local", ignore_errors=True)
                shutil.rmtree(root / "events", ignore_errors=True)
                dispose_engines(url)
                pg.drop_database(f"scale_{topics}_{cores}")
                results.append(row)
                if not args.no_write:  # after every row, so an interrupted run still leaves what it measured
                    write(results, info, time.perf_counter() - started, args, load)
            if not args.cache:
                shutil.rmtree(gen_work, ignore_errors=True)
                pg.drop_database(gen_db)
    finally:
        with contextlib.suppress(Exception):
            pg.stop()
        if not args.cache:
            shutil.rmtree(root, ignore_errors=True)
    load.__exit__(None, None, None)
    print(render(results, info, time.perf_counter() - started, args))
    if not args.no_write:
        write(results, info, time.perf_counter() - started, args, load)
        log(f"wrote {JSON.relative_to(ROOT)} and its block in {DOC.relative_to(ROOT)}")
    return 0


def write(
    results: list[dict[str, Any]],
    info: dict[str, str],
    total_s: float,
    args: argparse.Namespace,
    load: figures.LoadSampler,
) -> None:
    """scale.json (the raw measurements, and the report rendered from them) and its block in scale.md."""
    if not load.end:  # still running: the load so far
        load.end = os.getloadavg()
    report = render(results, info, total_s, args).split("\n", 2)[2]  # without the title line
    doc = {
        "meta": figures.meta(load),
        "results": json.loads(json.dumps(results, default=lambda o: dataclasses.asdict(o))),
        "report": report,
    }
    figures.write_json(JSON, doc)
    figures.update(SCRIPT, str(JSON.relative_to(ROOT)), doc, {"scale-report": [DOC]})


# blocks this script writes (figures.update); tests/test_docs_figures.py re-renders them from the JSON.
# The report is rendered from the Measured objects while they exist and stored in the JSON with them.
BLOCKS = {"scale-report": lambda doc: doc["report"]}


def _plan(m: Measured) -> str:
    summary = m.result.get("summary") or {}
    return f"{summary.get('numBundleUnloads', 0)} unloads, {summary.get('numBundleSplits', 0)} splits"


def render(results: list[dict[str, Any]], info: dict[str, str], total_s: float, args: argparse.Namespace) -> str:
    from pulsar_rebalance.pipeline.jvm import driver_java_options

    cmd = (
        "`PULSAR_REBALANCE_SPARK_CDS=... .venv/bin/python benchmarks/bench_scale.py"
        + (f" --topics {args.topics}" if args.topics != "100000,1000000,10000000" else "")
        + (f" --cores {args.cores}" if args.cores != "2,1" else "")
        + (f" --driver-memory {args.driver_memory}" if args.driver_memory != "1g" else "")
        + (" --cache DIR" if args.cache else "")
        + "`"
    )
    loads = [m.load_max for r in results for m in [*(r["jobs"][j] for j in PIPELINE), r.get("baseline")] if m]
    ends = [m.load_avg for r in results for m in [*(r["jobs"][j] for j in PIPELINE), r.get("baseline")] if m]
    out = [
        "# Benchmark: the pipeline at scale (100k to 10M topics)",
        "",
        f"Command: {cmd} (the class-data-sharing archive of `pipeline/jvm.py` built; `--cache` reuses each "
        "generated snapshot, so a 10M-topic snapshot is generated once).",
        "",
        "Machine: " + ", ".join(f"{k} {v}" for k, v in info.items()) + f". Benchmark wall time: {total_s:.0f} s.",
        "",
        f"Load: the 1-minute load average sampled while the measured jobs ran was at most {max(loads, default=0):.1f} "
        f"(at their ends: {min(ends, default=0):.1f} to {max(ends, default=0):.1f}); above the machine's "
        f"{os.cpu_count()} cores a job waited for a core (other work shared the machine), so wall times are upper "
        "bounds. Each job's own numbers are in the per-job table.",
        "",
        "What is measured: see the module docstring of `benchmarks/bench_scale.py`. Every Spark job is a real "
        f"`spark-submit --master local[N] --driver-memory {args.driver_memory}` with the DAG operator's settings "
        f"(driver options `{_generic(driver_java_options())}`); "
        "*wall* includes the JVM start. *Driver peak* is the peak RSS of the driver's whole process tree (the "
        "Spark JVM, which in local mode also runs the executor's tasks, plus the Python driver; the two parts "
        "peak at different moments, so their peaks do not add up). *Heap peak* / *exec mem* are Spark's own "
        "executor metrics (JVM heap used, on-heap execution memory); 0 = the job started no SparkSession. "
        "The cluster scales with the topics: one broker per 10,000 topics, one namespace per 50,000, one bundle "
        "per 100 (Zipf exponent 0.8); the run's params: `" + json.dumps(RUN_PARAMS) + "`.",
        "",
        "## Pipeline from collected data to stored plan (compute_usage + detect_overload + plan_split)",
        "",
        "| topics | brokers / ns / bundles | cores | wall (s) | topics/s | s per 1M topics | vs smallest | "
        "max driver peak (MiB) | max heap peak (MiB) | plan |",
        "|---:|---|---:|---:|---:|---:|---|---:|---:|---|",
    ]
    first: dict[int, tuple[int, float]] = {}
    for r in results:
        jobs = [r["jobs"][j] for j in PIPELINE]
        wall = sum(m.wall_s for m in jobs)
        base_topics, base_wall = first.setdefault(r["cores"], (r["topics"], wall))
        s = r["spec"]
        out.append(
            f"| {r['topics']:,} | {s.brokers:,} / {s.namespaces} / {s.bundles:,} | {r['cores']} | {wall:.1f} | "
            f"{r['topics'] / wall:,.0f} | {wall / r['topics'] * 1e6:.1f} | "
            f"x{wall / base_wall:.2f} time for x{r['topics'] / base_topics:.0f} topics | "
            f"{max(m.driver_peak_mb for m in jobs):,.0f} | {max(m.heap_peak_mb or 0 for m in jobs):,.0f} | "
            f"{_plan(r['jobs']['plan_split'])} |"
        )
    biggest = max((r["topics"] for r in results), default=0)
    for r in (r for r in results if r["topics"] == biggest and biggest >= TARGET_TOPICS):
        jobs = [r["jobs"][j] for j in PIPELINE]
        wall, peak = sum(m.wall_s for m in jobs), max(m.driver_peak_mb for m in jobs)
        met = wall < TARGET_WALL_S and peak < TARGET_DRIVER_MB
        out += [
            "",
            f"Target at {biggest:,} topics, local[{r['cores']}], with the run's strategy "
            f"({RUN_PARAMS.get('shedding_strategy')}): from collected data to stored plan under "
            f"{TARGET_WALL_S / 60:.0f} min and every job's driver peak under {TARGET_DRIVER_MB:,} MiB -> "
            f"{'met' if met else '**not met**'} ({wall:.1f} s, {peak:,.0f} MiB).",
        ]
    for cores in sorted({r["cores"] for r in results}, reverse=True):
        pts = [(r["topics"], sum(r["jobs"][j].wall_s for j in PIPELINE)) for r in results if r["cores"] == cores]
        if len(pts) < 2:
            continue
        fixed, per_topic = _linear_fit(pts)
        worst = max(abs(w - (fixed + per_topic * t)) / w for t, w in pts)
        out += [
            "",
            f"local[{cores}]: wall = {fixed:.1f} s + {per_topic * 1e6:.2f} s per million topics (least squares "
            f"over the sizes above; every size within {100 * worst:.0f} % of it): a fixed cost (three JVM "
            "starts, a session, the bundle-level work of the smallest cluster) plus time linear in the topics.",
        ]
    by = {(r["topics"], r["cores"]): r for r in results}
    pairs = [(t, by[(t, 1)], by[(t, 2)]) for t, c in sorted(by) if c == 2 and (t, 1) in by]
    if pairs:
        out += [
            "",
            "## Spark on 1 vs 2 local cores",
            "",
            "| topics | pipeline local[1] (s) | pipeline local[2] (s) | local[1] / local[2] | topic-level local[1] (s) "
            "| topic-level local[2] (s) | local[1] / local[2] |",
            "|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for t, one, two in pairs:
            w1, w2 = (sum(x["jobs"][j].wall_s for j in PIPELINE) for x in (one, two))
            s1, s2 = _spark_topics(one), _spark_topics(two)
            out.append(f"| {t:,} | {w1:.1f} | {w2:.1f} | {w1 / w2:.2f} | {s1:.1f} | {s2:.1f} | {s1 / s2:.2f} |")
    out += [
        "",
        "## Each Spark job",
        "",
        "| topics | cores | job | wall (s) | topics/s | driver peak (MiB) | of which JVM / Python | heap peak (MiB) "
        "| exec mem peak (MiB) | in-job seconds | load avg at end / max |",
        "|---:|---:|---|---:|---:|---:|---|---:|---:|---|---|",
    ]
    for r in results:
        for job in JOBS:
            m = r["jobs"][job]
            secs = m.result.get("seconds") or {
                k: m.result[k] for k in ("generateSeconds", "recordSeconds") if k in m.result
            }
            reused = " (generated once, reused)" if m.result.get("reused") else ""
            out.append(
                f"| {r['topics']:,} | {r['cores']} | {job}{reused} | {m.wall_s:.1f} | {r['topics'] / m.wall_s:,.0f} | "
                f"{m.driver_peak_mb:,.0f} | {m.jvm_peak_mb:,.0f} / {m.python_driver_peak_mb:,.0f} | "
                f"{m.heap_peak_mb or 0:,.0f} | {m.execution_peak_mb or 0:,.0f} | {json.dumps(secs) if secs else ''} | "
                f"{m.load_avg:.1f} / {m.load_max:.1f} |"
            )
    out += [
        "",
        "## Side by side: Spark vs a single-process pandas baseline",
        "",
        "The baseline does, in one Python process, the topic-level part of compute_usage (read, crc32, range "
        "lookup, per-bundle aggregation, mismatches, write) and of plan_split (topics of the bundles to split). "
        "Spark's numbers for the same part are the `seconds.topics` each job reports (inside the running job, "
        "JVM start excluded); the bundle- and broker-level work (Postgres, the decision core) is the same Python "
        "code whatever computes the topic level (compute_usage's `seconds.state`, detect_overload).",
        "",
        "| topics | pandas topic-level (s) | pandas peak RSS (MiB) | Spark topic-level local[2] (s) | Spark / pandas "
        "| Spark topic-level local[1] (s) | Spark local[1] / pandas |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        if "baseline" not in r:
            continue
        b = r["baseline"]
        pandas_s = b.result["usage_topics_s"] + b.result["plan_topics_s"]
        two, one = by.get((r["topics"], 2)), by.get((r["topics"], 1))
        s2 = _spark_topics(two) if two else None
        s1 = _spark_topics(one) if one else None
        out.append(
            f"| {r['topics']:,} | {pandas_s:.1f} | {b.driver_peak_mb:,.0f} | "
            f"{'' if s2 is None else f'{s2:.1f}'} | {'' if s2 is None else f'{s2 / pandas_s:.2f}'} | "
            f"{'' if s1 is None else f'{s1:.1f}'} | {'' if s1 is None else f'{s1 / pandas_s:.2f}'} |"
        )
    return "\n".join(out) + "\n"


def _linear_fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least-squares ``wall = a + b * topics``."""
    n = len(points)
    mx = sum(t for t, _ in points) / n
    my = sum(w for _, w in points) / n
    b = sum((t - mx) * (w - my) for t, w in points) / sum((t - mx) ** 2 for t, _ in points)
    return my - b * mx, b


def _generic(options: str) -> str:
    """The driver options without this machine's paths."""
    from pulsar_rebalance.pipeline.jvm import cds_archive

    archive = cds_archive()
    return options.replace(str(ROOT) + "/", "").replace(f"={archive}", "=<archive>" if archive else "")


def _spark_topics(row: dict[str, Any]) -> float:
    return (
        row["jobs"]["compute_usage"].result["seconds"]["topics"] + row["jobs"]["plan_split"].result["seconds"]["topics"]
    )


if __name__ == "__main__":
    raise SystemExit(main())
