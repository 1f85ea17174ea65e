"""PulsarSparkJobOperator: a SparkSubmitOperator that runs one of our ``spark_jobs/`` entry points.

It adds what every job needs and what the plain operator gets wrong by default:
* a missing Spark connection is an error (the provider silently falls back to ``--master yarn``);
* ``spark-submit`` from this Python environment (``spark_binary``) and ``PYSPARK_PYTHON`` = this
  interpreter, so driver and executors import the same ``pulsar_rebalance``;
* secrets (admin token, DB URL) are resolved from Airflow Connections at execute time and passed
  through the job's environment, never argv, never a rendered template field;
* ``--run-id`` and ``--work-dir`` on argv; the run params (no secrets) for ``collect_load``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

SPARK_JOBS_DIR = Path(__file__).resolve().parents[3] / "spark_jobs"
DEFAULT_WORK_ROOT_ENV = "PULSAR_REBALANCE_WORK_DIR"
LOG4J2_PROPERTIES = Path(__file__).resolve().parents[1] / "pipeline" / "log4j2.properties"


def default_work_root() -> str:
    return os.environ.get(DEFAULT_WORK_ROOT_ENV) or str(Path(os.environ.get("AIRFLOW_HOME", "/tmp")) / "pulsar-rebalance-work")


class PulsarSparkJobOperator(SparkSubmitOperator):
    ui_color = "#e8f0fe"

    def __init__(self, *, job: str, pass_params: bool = False, jobs_dir: str | None = None, **kwargs: Any) -> None:
        jobs = Path(jobs_dir or os.environ.get("PULSAR_REBALANCE_SPARK_JOBS_DIR") or SPARK_JOBS_DIR)
        kwargs.setdefault("application", str(jobs / f"{job}.py"))
        kwargs.setdefault("name", f"pulsar-rebalance-{job}")
        kwargs.setdefault("conn_id", "spark_default")
        kwargs.setdefault("spark_binary", str(Path(sys.executable).parent / "spark-submit"))
        quiet = f"-Dlog4j2.configurationFile=file:{LOG4J2_PROPERTIES}"  # Spark at WARN in task logs
        conf = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4",
                "spark.driver.extraJavaOptions": quiet, "spark.executor.extraJavaOptions": quiet}
        conf.update(kwargs.pop("conf", None) or {})
        kwargs["conf"] = conf
        kwargs.setdefault("application_args", ["--run-id", "{{ run_id }}"])
        super().__init__(**kwargs)
        self.job = job
        self.pass_params = pass_params

    def execute(self, context):
        from airflow.sdk import BaseHook
        from airflow.sdk.exceptions import AirflowNotFoundException

        from pulsar_rebalance.orchestration.connections import job_environment

        try:
            BaseHook.get_connection(self._conn_id)
        except AirflowNotFoundException as exc:
            raise AirflowNotFoundException(
                f"Spark connection {self._conn_id!r} is not defined; without it spark-submit would silently use "
                "'--master yarn'. Define it, e.g. AIRFLOW_CONN_SPARK_DEFAULT='{\"conn_type\": \"spark\", \"host\": \"local[*]\"}'"
            ) from exc
        args = list(self.application_args or [])
        if "--work-dir" not in args:
            args += ["--work-dir", default_work_root()]
        if self.pass_params:
            args += ["--params-json", json.dumps(dict(context["params"]), default=str)]
        self.application_args = args
        env = {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
        env.update(self.env_vars or {})
        env.update(job_environment())
        self.env_vars = env
        self._hook = None  # rebuild the hook with the runtime args/env
        return super().execute(context)
