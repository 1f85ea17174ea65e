"""Argument parsing, session set-up and result output shared by the thin Spark job entry points."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence


def parse_args(
    description: str, argv: Sequence[str] | None = None, *, with_params: bool = False,
    extra: Sequence[tuple[str, type, object]] = (),
) -> argparse.Namespace:
    """The common job arguments, plus ``extra`` options given as ``(flag, type, default)``."""
    p = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run-id", required=True, help="Airflow dag_run id (or any unique run id)")
    p.add_argument("--work-dir", required=True, help="root for run-scoped Parquet/JSON (local path or any Spark URL)")
    if with_params:
        p.add_argument("--params-json", default="{}", help="run parameters as JSON (no secrets)")
    for flag, kind, default in extra:
        p.add_argument(flag, type=kind, default=default, help=f"default: {default}")
    return p.parse_args(argv)


class LazySession:
    """The job's SparkSession, started on first use (any attribute): a job that needs no Spark -- detect_overload
    with a local work directory -- starts none, which saves the session start-up and first job (~8 s)."""

    def __init__(self, app: str) -> None:
        self._app = app
        self._spark = None

    @property
    def started(self) -> bool:
        return self._spark is not None

    def __getattr__(self, name: str):
        if self._spark is None:
            from pyspark.sql import SparkSession

            self._spark = SparkSession.builder.appName(self._app).getOrCreate()
            self._spark.sparkContext.setLogLevel("WARN")
        return getattr(self._spark, name)

    def stop(self) -> None:
        if self._spark is not None:
            self._spark.stop()


def session(app: str) -> LazySession:
    # Our modules at INFO (what the task did and why), everything else (py4j, urllib3...) at WARNING.
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        stream=sys.stdout)
    logging.getLogger("pulsar_rebalance").setLevel(logging.INFO)
    return LazySession(app)


def emit(stage: str, result: dict) -> None:
    """One JSON line the task log (and tests) can read: ``RESULT <stage> {...}``."""
    print(f"RESULT {stage} {json.dumps(result, sort_keys=True, default=str)}", flush=True)
