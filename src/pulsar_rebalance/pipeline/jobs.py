"""Argument parsing, session set-up and result output shared by the thin Spark job entry points."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def parse_args(
    description: str,
    argv: Sequence[str] | None = None,
    *,
    with_params: bool = False,
    without_spark: bool = False,
    extra: Sequence[tuple[str, type, object]] = (),
) -> argparse.Namespace:
    """The common job arguments, plus ``extra`` options given as ``(flag, type, default)``."""
    p = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run-id", required=True, help="Airflow dag_run id (or any unique run id)")
    p.add_argument("--work-dir", required=True, help="root for run-scoped Parquet/JSON (local path or any Spark URL)")
    if with_params:
        p.add_argument("--params-json", default="{}", help="run parameters as JSON (no secrets)")
    if without_spark:
        p.add_argument(
            "--without-spark",
            action="store_true",
            help="run the stage in this Python process without starting Spark (no Parquet copy of the outcome)",
        )
    for flag, kind, default in extra:
        p.add_argument(flag, type=kind, default=default, help=f"default: {default}")
    return p.parse_args(argv)


def setup_logging() -> None:
    """Our modules at INFO (what the task did and why), everything else (py4j, urllib3...) at WARNING."""
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stdout
    )
    logging.getLogger("pulsar_rebalance").setLevel(logging.INFO)


def plain_process() -> None:
    """Set-up of a job run without Spark (``--without-spark``): logging, and the operator's secrets file."""
    from pulsar_rebalance.pipeline.context import load_secrets

    setup_logging()
    load_secrets()


class LazySession:
    """The job's SparkSession, started on first use (any attribute): a job that needs no Spark --
    detect_overload with a local work directory -- starts none, which saves the session start-up
    and its first job (several seconds)."""

    def __init__(self, app: str) -> None:
        self._app = app
        self._spark: SparkSession | None = None

    @property
    def started(self) -> bool:
        return self._spark is not None

    def start(self) -> SparkSession:
        if self._spark is None:
            from pyspark.sql import SparkSession

            self._spark = spark = SparkSession.builder.appName(self._app).getOrCreate()
            spark.sparkContext.setLogLevel("WARN")
        return self._spark

    def __getattr__(self, name: str):
        return getattr(self.start(), name)

    def stop(self) -> None:
        if self._spark is not None:
            self._spark.stop()


def _cluster_deploy_mode() -> bool:
    """Whether spark-submit runs this driver in cluster deploy mode (read from the launcher's properties,
    without starting a SparkContext)."""
    from pyspark import SparkConf

    return SparkConf().get("spark.submit.deployMode", "client") == "cluster"


def session(app: str) -> LazySession:
    """The job's SparkSession (:class:`LazySession`), with the operator's secrets file merged into the
    environment first. In client deploy mode the file is read in place, so no session has to start;
    in cluster deploy mode it arrives through ``--files``: read from the working directory, or from
    ``SparkFiles`` once the session is up."""
    from pulsar_rebalance.pipeline.context import ENV_SECRETS_FILE, SECRETS_FILE_NAME, load_secrets

    setup_logging()
    spark = LazySession(app)
    name = os.environ.get(ENV_SECRETS_FILE)
    if (
        (name and os.path.isabs(name))
        or os.path.isfile(name or SECRETS_FILE_NAME)
        or not (name or _cluster_deploy_mode())
    ):
        names = load_secrets()
    else:
        from pyspark import SparkFiles

        spark.start()
        names = load_secrets(spark_files_dir=SparkFiles.getRootDirectory())
    if names:
        logging.getLogger(__name__).info("secrets loaded from the operator's file: %s", ", ".join(names))
    return spark


def emit(stage: str, result: dict) -> None:
    """One JSON line the task log (and tests) can read: ``RESULT <stage> {...}``."""
    print(f"RESULT {stage} {json.dumps(result, sort_keys=True, default=str)}", flush=True)
