"""Lighter Spark job start-up: the driver JVM's options, and its class-data-sharing archive.

A job on a small cluster spends most of its time starting Spark's JVM: loading, parsing and verifying
thousands of classes from Spark's jars and JIT-compiling the code that runs once. Two standard
HotSpot features cut that fixed cost (measured in ``benchmarks/bench_dag_run.py``):

* **Application class-data sharing** (JDK 13+ dynamic archive): the classes a representative job
  loads (``spark_jobs/warm_up.py``: session, Parquet, the broadcast range lookup, aggregation,
  Python tasks) are dumped once with ``-XX:ArchiveClassesAtExit``; later driver JVMs map the
  archive (``-XX:SharedArchiveFile``) instead of reading and verifying the jars. The JVM checks the
  archive against its own build and class path and silently ignores one that does not match or is
  missing, so it is an optimisation only, never a failure. ``scripts/install.sh`` builds it
  (``python -m pulsar_rebalance.pipeline.jvm``); ~180 MB.
* ``PULSAR_REBALANCE_SPARK_JIT=c1``: ``-XX:TieredStopAtLevel=1``, the C1 compiler only: far less
  compile work, for small clusters where every job is seconds long (the quick start sets it). Not
  the default: at 10M topics the C2-compiled code is much faster (``docs/benchmarks/scale.md``).

The archive lives at ``PULSAR_REBALANCE_SPARK_CDS`` (``off``: not used), by default under the Python
environment: ``<sys.prefix>/share/pulsar-rebalance/spark-<pyspark version>.jsa``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path

from pulsar_rebalance.errors import ConfigError

ENV_CDS = "PULSAR_REBALANCE_SPARK_CDS"
ENV_JIT = "PULSAR_REBALANCE_SPARK_JIT"
SPARK_JOBS_DIR = Path(__file__).resolve().parents[3] / "spark_jobs"
LOG4J2_PROPERTIES = Path(__file__).resolve().parent / "log4j2.properties"
QUIET = f"-Dlog4j2.configurationFile=file:{LOG4J2_PROPERTIES}"
"""Spark's JVM logging at WARN (our own INFO lines come from Python logging)."""


def cds_archive(environ: Mapping[str, str] = os.environ) -> Path | None:
    """Where the class-data-sharing archive is (or would be built); None when turned off."""
    value = environ.get(ENV_CDS, "")
    if value.lower() == "off":
        return None
    if value:
        return Path(value)
    return Path(sys.prefix) / "share" / "pulsar-rebalance" / f"spark-{metadata.version('pyspark')}.jsa"


def driver_java_options(environ: Mapping[str, str] = os.environ) -> str:
    """``spark.driver.extraJavaOptions`` of every job: WARN logging, the archive if it is built, C1 if asked."""
    jit = environ.get(ENV_JIT, "").lower()
    if jit not in ("", "c1", "tiered"):
        raise ConfigError(f"{ENV_JIT} must be c1 or tiered (the JVM's default), got {jit!r}", key=ENV_JIT)
    options = [QUIET]
    archive = cds_archive(environ)
    if archive is not None and archive.is_file():
        options.append(f"-XX:SharedArchiveFile={archive}")
    if jit == "c1":
        options.append("-XX:TieredStopAtLevel=1")
    return " ".join(options)


def release_heap(spark) -> None:
    """Ask the driver JVM to give its free heap back to the OS once a job's Spark part is done and a
    Python-heavy part follows (detect_overload: the topics of the split candidates, then the decision).

    ``System.gc()`` is a full collection for G1 (the JVM's default here), after which G1 shrinks the
    committed heap to ``MaxHeapFreeRatio`` (70 %) of what is live: the heap the topic scan committed
    (up to ``--driver-memory``) is returned instead of being held while the Python driver peaks. A
    session that never started (``LazySession``) is not started for this.
    """
    if getattr(spark, "started", True):
        spark.sparkContext._jvm.java.lang.System.gc()


def build_archive(path: Path | None = None, *, spark_submit: str | None = None, timeout_s: float = 900) -> Path:
    """Run ``spark_jobs/warm_up.py`` once with ``-XX:ArchiveClassesAtExit`` and put the archive at ``path``
    (written next to it, then renamed: a job starting meanwhile sees the old archive or the new one)."""
    path = path or cds_archive()
    if path is None:
        raise ValueError(f"{ENV_CDS}=off: no archive to build")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    submit = spark_submit or str(Path(sys.executable).parent / "spark-submit")
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", "127.0.0.1"),
    }
    try:
        with tempfile.TemporaryDirectory(prefix="pulsar-rebalance-warm-up-") as work:
            cmd = [
                submit,
                "--master",
                "local[2]",
                "--conf",
                "spark.ui.enabled=false",
                "--conf",
                "spark.sql.shuffle.partitions=4",
                "--conf",
                f"spark.driver.extraJavaOptions={QUIET} -XX:ArchiveClassesAtExit={tmp}",
                str(SPARK_JOBS_DIR / "warm_up.py"),
                "--run-id",
                "warm-up",
                "--work-dir",
                work,
            ]
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
        if done.returncode != 0 or not tmp.is_file():
            raise RuntimeError(f"the warm-up job failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description="Build the Spark driver's class-data-sharing archive (see the module "
        "docstring of pulsar_rebalance.pipeline.jvm)."
    )
    ap.add_argument("--if-missing", action="store_true", help="do nothing when the archive exists")
    args = ap.parse_args(argv)
    path = cds_archive()
    if path is None:
        print(f"{ENV_CDS}=off: nothing to build", file=sys.stderr)
        return 0
    if args.if_missing and path.is_file():
        return 0
    print(f"[install] building the Spark class-data-sharing archive {path} (about a minute, once)", file=sys.stderr)
    build_archive(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
