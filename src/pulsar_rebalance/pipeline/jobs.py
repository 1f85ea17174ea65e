"""Argument parsing, session set-up and result output shared by the thin Spark job entry points."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence


def parse_args(
    description: str, argv: Sequence[str] | None = None, *, with_params: bool = False, without_spark: bool = False
) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--run-id", required=True, help="Airflow dag_run id (or any unique run id)")
    p.add_argument("--work-dir", required=True, help="root for run-scoped Parquet/JSON (local path or any Spark URL)")
    if with_params:
        p.add_argument("--params-json", default="{}", help="run parameters as JSON (no secrets)")
    if without_spark:
        p.add_argument("--without-spark", action="store_true",
                       help="run the stage in this Python process without starting Spark (no Parquet copy of the outcome)")
    return p.parse_args(argv)


def setup_logging() -> None:
    """Our modules at INFO (what the task did and why), everything else (py4j, urllib3...) at WARNING."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        stream=sys.stdout)
    logging.getLogger("pulsar_rebalance").setLevel(logging.INFO)


def plain_process() -> None:
    """Set-up of a job run without Spark (``--without-spark``): logging, and the operator's secrets file."""
    from pulsar_rebalance.pipeline.context import load_secrets

    setup_logging()
    load_secrets()


def session(app: str):
    """The job's SparkSession, after which the operator's secrets file is merged into the environment
    (in cluster deploy mode the file arrives through ``--files``, i.e. SparkFiles)."""
    from pyspark import SparkFiles
    from pyspark.sql import SparkSession

    from pulsar_rebalance.pipeline.context import load_secrets

    setup_logging()
    spark = SparkSession.builder.appName(app).getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    names = load_secrets(spark_files_dir=SparkFiles.getRootDirectory())
    if names:
        logging.getLogger(__name__).info("secrets loaded from the operator's file: %s", ", ".join(names))
    return spark


def emit(stage: str, result: dict) -> None:
    """One JSON line the task log (and tests) can read: ``RESULT <stage> {...}``."""
    print(f"RESULT {stage} {json.dumps(result, sort_keys=True, default=str)}", flush=True)
