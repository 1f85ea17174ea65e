"""Argument parsing, session set-up and result output shared by the thin Spark job entry points."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence


def parse_args(description: str, argv: Sequence[str] | None = None, *, with_params: bool = False) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--run-id", required=True, help="Airflow dag_run id (or any unique run id)")
    p.add_argument("--work-dir", required=True, help="root for run-scoped Parquet/JSON (local path or any Spark URL)")
    if with_params:
        p.add_argument("--params-json", default="{}", help="run parameters as JSON (no secrets)")
    return p.parse_args(argv)


def session(app: str):
    from pyspark.sql import SparkSession

    # Our modules at INFO (what the task did and why), everything else (py4j, urllib3...) at WARNING.
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        stream=sys.stdout)
    logging.getLogger("pulsar_rebalance").setLevel(logging.INFO)
    spark = SparkSession.builder.appName(app).getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def emit(stage: str, result: dict) -> None:
    """One JSON line the task log (and tests) can read: ``RESULT <stage> {...}``."""
    print(f"RESULT {stage} {json.dumps(result, sort_keys=True, default=str)}", flush=True)
