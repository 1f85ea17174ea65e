"""What every stage needs: run identity, the run's work directory, and clients built from the environment.

Secrets never travel on argv: the admin token and the database URL are read from the environment,
which the Airflow operator fills from Airflow Connections at execute time.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from pulsar_rebalance.errors import ConfigError

# Environment variables (filled by orchestration.operators from Airflow Connections)
ENV_ADMIN_URL = "PULSAR_ADMIN_URL"
ENV_ADMIN_TOKEN = "PULSAR_ADMIN_TOKEN"
ENV_ADMIN_TLS_VERIFY = "PULSAR_ADMIN_TLS_VERIFY"  # "true" | "false" | path to a CA bundle
ENV_ADMIN_TIMEOUT = "PULSAR_ADMIN_TIMEOUT"

# Parquet datasets inside a run's work directory
TOPICS = "topics.parquet"
BUNDLE_STATS = "bundle_stats.parquet"
BUNDLE_LOAD = "bundle_load.parquet"
ACTIONS = "actions.parquet"
EXECUTION = "execution.parquet"


def check_run_id(run_id: str) -> str:
    """Refuse a run id that would leave the work root once used as a directory name.

    Airflow accepts run ids such as ``..``; the run's work directory is ``<work root>/<run id>``, so
    ``.``, ``..``, an empty id and ids with a path separator or NUL are refused before any path is built.
    """
    if not run_id or run_id.strip(".") == "" or any(c in run_id for c in "/\\\x00"):
        raise ConfigError(
            f"run id {run_id!r} cannot name a work directory (empty, only dots, or containing / \\ or NUL); "
            "trigger the DAG with another run id",
            key="run_id",
        )
    return run_id


def safe_run_dir_name(run_id: str) -> str:
    """Airflow run ids contain ':' and '+', which Hadoop paths reject; map them to '_'."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", check_run_id(run_id))


@dataclass(frozen=True)
class JobContext:
    run_id: str
    work_root: str

    def __post_init__(self) -> None:
        check_run_id(self.run_id)

    @property
    def work_dir(self) -> str:
        return f"{self.work_root.rstrip('/')}/{safe_run_dir_name(self.run_id)}"

    def path(self, name: str) -> str:
        return f"{self.work_dir}/{name}"


def admin_client_from_env(environ: Mapping[str, str] = os.environ):
    """Build the Pulsar admin client from PULSAR_ADMIN_* variables (never from argv)."""
    from pulsar_rebalance.pulsar_admin import PulsarAdminClient

    url = environ.get(ENV_ADMIN_URL)
    if not url:
        raise ConfigError(
            f"{ENV_ADMIN_URL} is not set: configure the Airflow Connection 'pulsar_admin_default' "
            "(or export PULSAR_ADMIN_URL when running a job by hand)",
            key=ENV_ADMIN_URL,
        )
    verify_raw = environ.get(ENV_ADMIN_TLS_VERIFY, "true")
    verify: bool | str
    if verify_raw.lower() in ("true", "1", "yes"):
        verify = True
    elif verify_raw.lower() in ("false", "0", "no"):
        verify = False
    else:
        verify = verify_raw
    raw_timeout = environ.get(ENV_ADMIN_TIMEOUT, "10")
    try:
        timeout = float(raw_timeout)
    except ValueError:
        timeout = math.nan
    if not 0 < timeout < math.inf:
        raise ConfigError(f"{ENV_ADMIN_TIMEOUT} must be a positive number of seconds, got {raw_timeout!r}",
                          key=ENV_ADMIN_TIMEOUT)
    try:
        return PulsarAdminClient.from_url(url, token=environ.get(ENV_ADMIN_TOKEN) or None, tls_verify=verify,
                                          timeout=timeout)
    except ValueError as exc:  # the message names the URL with its credentials redacted
        raise ConfigError(f"{ENV_ADMIN_URL}: {exc}", key=ENV_ADMIN_URL) from None
