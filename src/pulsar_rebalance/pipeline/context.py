"""What every stage needs: run identity, the run's work directory, and clients built from the environment.

Secrets never travel on argv, in Spark properties or in a log line. The Airflow operator resolves
them from Airflow Connections at execute time and writes them to a JSON file readable only by its
user (mode 0600, in a 0700 directory), which reaches the job:

* client deploy mode (``local[*]``, ``spark://`` / YARN / Kubernetes client): the driver runs beside
  the operator and reads the file at the path in ``PULSAR_REBALANCE_SECRETS_FILE``;
* cluster deploy mode: the file is shipped with ``--files`` and read from the driver's working
  directory (or ``SparkFiles``) under its name ``pulsar-rebalance-secrets.json``;
* Kubernetes with a secret reference (``kubernetes_secret``): no file; Kubernetes injects the
  variables from the named Secret (``spark.kubernetes.driver.secretKeyRef.*``).

:func:`load_secrets` merges the file into the process environment (``PULSAR_ADMIN_*``,
``PULSAR_REBALANCE_DATABASE_URL``), where :func:`admin_client_from_env` and the store read them.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass

from pulsar_rebalance.errors import ConfigError

# Environment variables (filled by orchestration.operators from Airflow Connections)
ENV_ADMIN_URL = "PULSAR_ADMIN_URL"
ENV_ADMIN_TOKEN = "PULSAR_ADMIN_TOKEN"
ENV_ADMIN_TLS_VERIFY = "PULSAR_ADMIN_TLS_VERIFY"  # "true" | "false" | path to a CA bundle
ENV_ADMIN_TIMEOUT = "PULSAR_ADMIN_TIMEOUT"
# OAuth2 client credentials (instead of PULSAR_ADMIN_TOKEN); the secret is masked like the token
ENV_ADMIN_OAUTH2_ISSUER_URL = "PULSAR_ADMIN_OAUTH2_ISSUER_URL"
ENV_ADMIN_OAUTH2_AUDIENCE = "PULSAR_ADMIN_OAUTH2_AUDIENCE"
ENV_ADMIN_OAUTH2_SCOPE = "PULSAR_ADMIN_OAUTH2_SCOPE"
ENV_ADMIN_OAUTH2_CLIENT_ID = "PULSAR_ADMIN_OAUTH2_CLIENT_ID"
ENV_ADMIN_OAUTH2_CLIENT_SECRET = "PULSAR_ADMIN_OAUTH2_CLIENT_SECRET"
OAUTH2_ENV = (
    ENV_ADMIN_OAUTH2_ISSUER_URL,
    ENV_ADMIN_OAUTH2_AUDIENCE,
    ENV_ADMIN_OAUTH2_SCOPE,
    ENV_ADMIN_OAUTH2_CLIENT_ID,
    ENV_ADMIN_OAUTH2_CLIENT_SECRET,
)
ENV_SECRETS_FILE = "PULSAR_REBALANCE_SECRETS_FILE"  # path of the secrets file (client mode), not a secret
SECRETS_FILE_NAME = "pulsar-rebalance-secrets.json"  # its name when shipped with --files (cluster mode)
SECRET_KEYS = frozenset(
    {
        ENV_ADMIN_URL,
        ENV_ADMIN_TOKEN,
        ENV_ADMIN_TLS_VERIFY,
        ENV_ADMIN_TIMEOUT,
        *OAUTH2_ENV,
        "PULSAR_REBALANCE_DATABASE_URL",
    }
)

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
        raise ConfigError(
            f"{ENV_ADMIN_TIMEOUT} must be a positive number of seconds, got {raw_timeout!r}", key=ENV_ADMIN_TIMEOUT
        )
    oauth2 = oauth2_from_env(environ)
    try:
        return PulsarAdminClient.from_url(
            url, token=environ.get(ENV_ADMIN_TOKEN) or None, oauth2=oauth2, tls_verify=verify, timeout=timeout
        )
    except ValueError as exc:  # the message names the URL with its credentials redacted
        raise ConfigError(f"{ENV_ADMIN_URL}: {exc}", key=ENV_ADMIN_URL) from None


def oauth2_from_env(environ: Mapping[str, str] = os.environ):
    """OAuth2 client credentials from ``PULSAR_ADMIN_OAUTH2_*``, or None when none of them is set.

    Issuer URL, client id and client secret are required, audience and scope optional; any of them
    together with ``PULSAR_ADMIN_TOKEN`` is a configuration error naming both."""
    from pulsar_rebalance.pulsar_admin.oauth2 import OAuth2Settings

    given = sorted(k for k in OAUTH2_ENV if environ.get(k))
    if not given:
        return None
    if environ.get(ENV_ADMIN_TOKEN):
        raise ConfigError(
            f"{ENV_ADMIN_TOKEN} and OAuth2 client credentials ({', '.join(given)}) are both set; "
            "give one of them (the Connection's extra 'auth': 'oauth2' chooses OAuth2)",
            key=ENV_ADMIN_TOKEN,
        )
    missing = [
        k
        for k in (ENV_ADMIN_OAUTH2_ISSUER_URL, ENV_ADMIN_OAUTH2_CLIENT_ID, ENV_ADMIN_OAUTH2_CLIENT_SECRET)
        if not environ.get(k)
    ]
    if missing:
        raise ConfigError(
            f"OAuth2 client credentials are incomplete: {', '.join(missing)} not set (set: {', '.join(given)})",
            key=missing[0],
        )
    try:
        return OAuth2Settings(
            issuer_url=environ[ENV_ADMIN_OAUTH2_ISSUER_URL],
            client_id=environ[ENV_ADMIN_OAUTH2_CLIENT_ID],
            client_secret=environ[ENV_ADMIN_OAUTH2_CLIENT_SECRET],
            audience=environ.get(ENV_ADMIN_OAUTH2_AUDIENCE) or None,
            scope=environ.get(ENV_ADMIN_OAUTH2_SCOPE) or None,
        )
    except ConfigError as exc:
        raise ConfigError(f"PULSAR_ADMIN_OAUTH2_{(exc.key or '').upper()}: {exc}", key=exc.key) from None


def find_secrets_file(environ: Mapping[str, str] = os.environ, spark_files_dir: str | None = None) -> str | None:
    """Where this job's secrets file is: ``PULSAR_REBALANCE_SECRETS_FILE`` (absolute, or a name relative
    to the working directory / SparkFiles), else ``pulsar-rebalance-secrets.json`` shipped with --files."""
    name = environ.get(ENV_SECRETS_FILE) or SECRETS_FILE_NAME
    candidates = (
        [name] if os.path.isabs(name) else [name, *([os.path.join(spark_files_dir, name)] if spark_files_dir else [])]
    )
    for path in candidates:
        if os.path.isfile(path):
            return path
    if environ.get(ENV_SECRETS_FILE):
        raise ConfigError(
            f"{ENV_SECRETS_FILE} names {name!r}, which does not exist here (was it shipped with --files?)",
            key=ENV_SECRETS_FILE,
        )
    return None


def load_secrets(environ: MutableMapping[str, str] = os.environ, spark_files_dir: str | None = None) -> list[str]:
    """Merge the operator's secrets file (if any) into ``environ``; returns the names set (never values).

    The operator's file (an absolute ``PULSAR_REBALANCE_SECRETS_FILE``) that others can read is
    refused: the operator writes it 0600.
    """
    path = find_secrets_file(environ, spark_files_dir)
    if path is None:
        return []
    mode = os.stat(path).st_mode
    # the operator's own file (client mode) must be private; a copy Spark shipped is the cluster manager's
    if os.path.isabs(path) and path == environ.get(ENV_SECRETS_FILE) and mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigError(
            f"secrets file {path} is readable by others (mode {stat.S_IMODE(mode):o}); it must be 0600",
            key=ENV_SECRETS_FILE,
        )
    try:
        with open(path, encoding="utf-8") as fh:
            values = json.load(fh)
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"secrets file {path} is not readable JSON: {type(exc).__name__}", key=ENV_SECRETS_FILE
        ) from None
    if not isinstance(values, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in values.items()):
        raise ConfigError(f"secrets file {path} must be a JSON object of strings", key=ENV_SECRETS_FILE)
    unknown = sorted(set(values) - SECRET_KEYS)
    if unknown:
        raise ConfigError(f"secrets file {path} has unknown keys {unknown}", key=ENV_SECRETS_FILE)
    environ.update(values)
    return sorted(values)
