"""PulsarSparkJobOperator: a SparkSubmitOperator that runs one of our ``spark_jobs/`` entry points.

It adds what every job needs and what the plain operator gets wrong by default:
* a missing Spark connection is an error (the provider silently falls back to ``--master yarn``);
* ``spark-submit`` from this Python environment (``spark_binary``) and ``PYSPARK_PYTHON`` = this
  interpreter, so driver and executors import the same ``pulsar_rebalance``;
* secrets (admin token, DB URL) are resolved from Airflow Connections at execute time, masked in every
  log, and reach the job in a 0600 file (or a Kubernetes Secret reference) - never argv, never a Spark
  property, never a rendered template field, for every master and deploy mode (see :meth:`submission`);
* ``--run-id`` and ``--work-dir`` on argv; the run params (no secrets) for ``collect_load``.

The Spark provider's hook forwards ``env_vars`` as ``--conf spark.yarn.appMasterEnv.NAME=value`` (YARN)
or ``spark.kubernetes.driverEnv.NAME=value`` (Kubernetes), i.e. on the spark-submit command line, and
refuses them in standalone cluster mode; so only non-secret variables go there.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.hooks import spark_submit as _spark_submit_hook
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from pulsar_rebalance.pipeline.context import ENV_SECRETS_FILE, SECRETS_FILE_NAME
from pulsar_rebalance.pipeline.jvm import QUIET, driver_java_options

SPARK_JOBS_DIR = Path(__file__).resolve().parents[3] / "spark_jobs"
DEFAULT_WORK_ROOT_ENV = "PULSAR_REBALANCE_WORK_DIR"

# The provider imports its Kubernetes client inside ``contextlib.suppress(ImportError, NameError)``
# without a fallback, so without apache-airflow-providers-cncf-kubernetes the name ``kube_client`` is
# never bound and SparkSubmitHook.__init__ raises ``NameError: name 'kube_client' is not defined`` for
# any ``k8s://`` master (it meant to raise "kubernetes dependencies are not installed"). Bind the name
# so the hook's own check runs and says what is missing.
if not hasattr(_spark_submit_hook, "kube_client"):
    _spark_submit_hook.kube_client = None


def default_work_root() -> str:
    return os.environ.get(DEFAULT_WORK_ROOT_ENV) or str(
        Path(os.environ.get("AIRFLOW_HOME", "/tmp")) / "pulsar-rebalance-work"
    )


@contextlib.contextmanager
def secrets_file(values: Mapping[str, str]) -> Iterator[str]:
    """A JSON file holding ``values``, mode 0600 in a fresh 0700 directory, removed afterwards."""
    directory = tempfile.mkdtemp(prefix="pulsar-rebalance-")  # 0700
    path = os.path.join(directory, SECRETS_FILE_NAME)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(dict(values), fh)
        yield path
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@contextlib.contextmanager
def _environ(values: Mapping[str, str]) -> Iterator[None]:
    """Set ``values`` in ``os.environ`` for the duration, then restore what was there."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class PulsarSparkJobOperator(SparkSubmitOperator):
    """Run ``spark_jobs/<job>.py``.

    Args:
        job: the entry point's name.
        pass_params: add ``--params-json`` (the DAG run's params; they hold no secrets).
        admin_conn_id: the Connection of the Pulsar admin API this job talks to (each cluster's DAG passes
            its own ``pulsar_admin_<name>``; default ``pulsar_admin_default``).
        run_key: the run id the job records its run under (a template; default ``{{ run_id }}``; a named
            cluster's DAG gives ``core.clusters.run_key_template(name)``), when ``application_args`` is not given.
        kubernetes_secret: for a ``k8s://`` master, the name of a Kubernetes Secret whose keys are
            ``PULSAR_ADMIN_URL``, ``PULSAR_ADMIN_TOKEN``, ``PULSAR_REBALANCE_DATABASE_URL`` (any subset):
            the driver gets them as ``secretKeyRef`` variables and no secrets file is shipped
            (``--files`` in Kubernetes cluster mode goes through ``spark.kubernetes.file.upload.path``,
            i.e. the file would rest in that shared storage).
    """

    ui_color = "#e8f0fe"

    def __init__(
        self,
        *,
        job: str,
        pass_params: bool = False,
        jobs_dir: str | None = None,
        kubernetes_secret: str | None = None,
        admin_conn_id: str | None = None,
        run_key: str = "{{ run_id }}",
        **kwargs: Any,
    ) -> None:
        jobs = Path(jobs_dir or os.environ.get("PULSAR_REBALANCE_SPARK_JOBS_DIR") or SPARK_JOBS_DIR)
        kwargs.setdefault("application", str(jobs / f"{job}.py"))
        kwargs.setdefault("name", f"pulsar-rebalance-{job}")
        kwargs.setdefault("conn_id", "spark_default")
        kwargs.setdefault("spark_binary", str(Path(sys.executable).parent / "spark-submit"))
        conf = {
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "4",
            "spark.executor.extraJavaOptions": QUIET,
        }  # Spark at WARN in task logs
        conf.update(kwargs.pop("conf", None) or {})
        # the driver's: WARN logging, C1 only and the class-data-sharing archive (pipeline.jvm), resolved at
        # execute time (the archive may be built after the DAG was parsed); a conf given here wins
        default_driver_options = "spark.driver.extraJavaOptions" not in conf
        kwargs["conf"] = conf
        kwargs.setdefault("application_args", ["--run-id", run_key])
        super().__init__(**kwargs)
        self.job = job
        self.pass_params = pass_params
        self.kubernetes_secret = kubernetes_secret
        self.admin_conn_id = admin_conn_id
        self._driver_java_options = default_driver_options

    def execute(self, context):
        with self.submission(context):
            return super().execute(context)

    @contextlib.contextmanager
    def submission(self, context) -> Iterator[Any]:
        """Prepare argv, environment and secrets for one spark-submit; yields the hook that will run it.

        Secrets are written to a 0600 file for the duration of the submission (removed afterwards):
        client deploy mode reads it in place (``PULSAR_REBALANCE_SECRETS_FILE`` = its path); cluster
        deploy mode ships it with ``--files``; a Kubernetes master with ``kubernetes_secret`` ships
        nothing and references the Secret instead.
        """
        from airflow.sdk import BaseHook
        from airflow.sdk.exceptions import AirflowNotFoundException

        from pulsar_rebalance.orchestration.connections import ADMIN_CONN_ID, job_environment

        try:
            BaseHook.get_connection(self._conn_id)
        except AirflowNotFoundException as exc:
            raise AirflowNotFoundException(
                f"Spark connection {self._conn_id!r} is not defined; without it spark-submit would silently use "
                '\'--master yarn\'. Define it, e.g. AIRFLOW_CONN_SPARK_DEFAULT=\'{"conn_type": "spark", "host": "local[*]"}\''
            ) from exc
        args = list(self.application_args or [])
        if "--work-dir" not in args:
            args += ["--work-dir", default_work_root()]
        if self.pass_params and "--params-json" not in args:
            args += ["--params-json", json.dumps(dict(context["params"]), default=str)]
        self.application_args = args
        secrets = job_environment(self.admin_conn_id or ADMIN_CONN_ID)
        env = {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
        env.update({k: v for k, v in (self.env_vars or {}).items() if k not in secrets})
        master, deploy_mode = self._master_and_deploy_mode()
        cluster_mode = deploy_mode == "cluster"
        is_k8s = master.startswith("k8s://")
        conf = dict(self.conf or {})
        if self._driver_java_options:
            conf["spark.driver.extraJavaOptions"] = driver_java_options()
        files = [f for f in (self.files or "").split(",") if f]
        original = (self.env_vars, self.conf, self.files)
        with contextlib.ExitStack() as stack:
            if is_k8s and cluster_mode and self.kubernetes_secret:  # a client-mode driver is not a pod
                for key in sorted(secrets):
                    conf[f"spark.kubernetes.driver.secretKeyRef.{key}"] = f"{self.kubernetes_secret}:{key}"
            elif secrets:
                path = stack.enter_context(secrets_file(secrets))
                if cluster_mode:
                    files.append(path)
                    env[ENV_SECRETS_FILE] = SECRETS_FILE_NAME  # the driver finds the shipped copy by name
                else:
                    env[ENV_SECRETS_FILE] = path
            if cluster_mode and not (is_k8s or master.startswith("yarn")):
                # standalone cluster: the hook refuses env_vars; the interpreter goes in Spark properties
                # and the driver looks for the shipped secrets file under its default name.
                conf.setdefault("spark.pyspark.python", env["PYSPARK_PYTHON"])
                conf.setdefault("spark.pyspark.driver.python", env["PYSPARK_DRIVER_PYTHON"])
                env = {}
            if not cluster_mode:
                # a client-mode driver is spark-submit's own child: give it the (non-secret) variables
                # through this process's environment too, since the hook turns env_vars into driverEnv
                # properties for k8s:// (which a client-mode driver never sees)
                stack.enter_context(_environ(env))
            self.env_vars, self.conf, self.files = env or None, conf, ",".join(files) or None
            self._hook = None  # rebuilt by the provider with the runtime args/env
            try:
                if self._hook is None:
                    self._hook = self._get_hook()
                yield self._hook
            finally:
                self.env_vars, self.conf, self.files = original

    def _master_and_deploy_mode(self) -> tuple[str, str | None]:
        """The master and deploy mode the provider's hook resolves from the Spark connection."""
        from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

        try:
            probe = SparkSubmitHook(
                conn_id=self._conn_id, deploy_mode=self._deploy_mode, spark_binary=self._spark_binary
            )
        except RuntimeError as exc:  # k8s:// without the cncf.kubernetes provider
            raise RuntimeError(
                f"{exc} Install apache-airflow-providers-cncf-kubernetes to submit to Kubernetes."
            ) from None
        return probe._connection["master"], probe._connection["deploy_mode"]
