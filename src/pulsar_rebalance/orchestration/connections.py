"""Resolve our Airflow Connections into environment variables for the Spark jobs.

* ``pulsar_admin_default`` (or ``pulsar_admin_<name>``: one per cluster, see ``core.clusters``; any conn type, e.g. ``http``): host (``http(s)://host:port`` or a bare host
  with port and schema ``https``), password = admin token (optional), extra
  ``{"tls_verify": true|false|"/path/ca.pem", "timeout": 10}``. OAuth2 client credentials instead of
  a token: extra ``{"auth": "oauth2", "issuer_url": ..., "audience": ..., "scope": ...}`` (audience and
  scope optional), login = client id, password = client secret (``PULSAR_ADMIN_OAUTH2_*``).
* ``pulsar_rebalance_db`` (``postgres``): host/port/login/password/schema, or extra ``{"url": ...}``
  (any SQLAlchemy URL, e.g. a unix-socket one). Missing connection -> the worker's own
  ``PULSAR_REBALANCE_DATABASE_URL`` / ``DATABASE_URL`` environment is used.

Values are read at task run time, never at DAG parse time, and never put on a command line: every
value that could show up in a log line (token, OAuth2 client secret, DB password, the rendered DB URL,
userinfo of the admin URL) is registered with Airflow's secret masker (``airflow.sdk.log.mask_secret``) as it is read.
"""

from __future__ import annotations

import os
from typing import Any

from pulsar_rebalance.errors import ConfigError

ADMIN_CONN_ID = "pulsar_admin_default"
DB_CONN_ID = "pulsar_rebalance_db"


def _get(conn_id: str):
    from airflow.sdk import BaseHook
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        return BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        return None


def admin_env(conn, conn_id: str = ADMIN_CONN_ID) -> dict[str, str]:
    """``PULSAR_ADMIN_*`` of admin Connection ``conn`` (named ``conn_id`` in errors); {} for None."""
    if conn is None:
        return {}
    host = conn.host or ""
    if "://" not in host:
        scheme = conn.schema or "http"
        host = f"{scheme}://{host}" + (f":{conn.port}" if conn.port else "")
    env = {"PULSAR_ADMIN_URL": host.rstrip("/")}
    extra: dict[str, Any] = conn.extra_dejson or {}
    auth = str(extra.get("auth") or "token").strip().lower()
    if auth == "oauth2":
        env.update(_oauth2_env(conn, extra, conn_id))
    elif auth == "token":
        if conn.password:
            env["PULSAR_ADMIN_TOKEN"] = conn.password
    else:
        raise ConfigError(
            f"Connection {conn_id!r}: extra 'auth' must be 'token' or 'oauth2', got {extra.get('auth')!r}",
            key="auth",
        )
    if "tls_verify" in extra:
        env["PULSAR_ADMIN_TLS_VERIFY"] = (
            str(extra["tls_verify"]).lower() if isinstance(extra["tls_verify"], bool) else str(extra["tls_verify"])
        )
    if "timeout" in extra:
        env["PULSAR_ADMIN_TIMEOUT"] = str(extra["timeout"])
    return env


def _oauth2_env(conn, extra: dict[str, Any], conn_id: str) -> dict[str, str]:
    """``PULSAR_ADMIN_OAUTH2_*`` of an ``"auth": "oauth2"`` Connection: login = client id, password = secret."""
    where = f"Connection {conn_id!r} (extra 'auth': 'oauth2')"
    if "token" in extra:
        raise ConfigError(f"{where} has a 'token' in its extra too: give a token or OAuth2, not both", key="token")
    missing = [
        name
        for name, value in (
            ("extra 'issuer_url'", extra.get("issuer_url")),
            ("login (the client id)", conn.login),
            ("password (the client secret)", conn.password),
        )
        if not value
    ]
    if missing:
        raise ConfigError(f"{where} needs {', '.join(missing)}", key="issuer_url")
    env = {
        "PULSAR_ADMIN_OAUTH2_ISSUER_URL": str(extra["issuer_url"]),
        "PULSAR_ADMIN_OAUTH2_CLIENT_ID": str(conn.login),
        "PULSAR_ADMIN_OAUTH2_CLIENT_SECRET": str(conn.password),
    }
    for key in ("audience", "scope"):
        if extra.get(key):
            env[f"PULSAR_ADMIN_OAUTH2_{key.upper()}"] = str(extra[key])
    return env


def db_url_from_conn(conn) -> str | None:
    if conn is None:
        return None
    extra = conn.extra_dejson or {}
    if extra.get("url"):
        return str(extra["url"])
    import sqlalchemy as sa

    return sa.engine.URL.create(
        "postgresql+psycopg2",
        username=conn.login or None,
        password=conn.password or None,
        host=conn.host or None,
        port=conn.port or None,
        database=conn.schema or None,
    ).render_as_string(hide_password=False)


def job_environment(admin_conn_id: str = ADMIN_CONN_ID) -> dict[str, str]:
    """Secrets for a Spark job: admin URL/token (from Connection ``admin_conn_id``: each cluster's DAG
    passes its own) and the state DB URL, from Connections (masked)."""
    env = admin_env(_get(admin_conn_id), admin_conn_id)
    url = db_url_from_conn(_get(DB_CONN_ID))
    if url:
        env["PULSAR_REBALANCE_DATABASE_URL"] = url
    mask_secrets(env)
    return env


def mask_secrets(env: dict[str, str]) -> None:
    """Register with Airflow's masker every value of ``env`` that could leak: the admin token, the
    OAuth2 client secret, the DB URL and its password, the password of any URL's userinfo."""
    from urllib.parse import urlsplit

    from airflow.sdk.log import mask_secret

    for key, value in env.items():
        if not value:
            continue
        if key in ("PULSAR_ADMIN_TOKEN", "PULSAR_ADMIN_OAUTH2_CLIENT_SECRET", "PULSAR_REBALANCE_DATABASE_URL"):
            mask_secret(value)
        if "://" in value:
            try:
                parts = urlsplit(value)
                password = parts.password
            except ValueError:
                password = None
            if password:
                from urllib.parse import unquote

                mask_secret(password)
                mask_secret(unquote(password))
                mask_secret(value)


def database_url() -> str:
    """The state DB URL for code running inside Airflow (sensor): Connection first, then environment."""
    from pulsar_rebalance.store.engine import database_url as from_env

    return db_url_from_conn(_get(DB_CONN_ID)) or from_env(os.environ)


async def adatabase_url() -> str:
    """Async variant for the triggerer (Connections must be fetched with ``aget_connection`` there)."""
    from airflow.sdk import BaseHook
    from airflow.sdk.exceptions import AirflowNotFoundException

    from pulsar_rebalance.store.engine import database_url as from_env

    try:
        conn = await BaseHook.aget_connection(DB_CONN_ID)
    except AirflowNotFoundException:
        conn = None
    return db_url_from_conn(conn) or from_env(os.environ)


def server_database_url() -> str | None:
    """The state DB URL inside Airflow's own servers (api-server: the gate guard, the plan pages).

    There is no task context there, so the Connection is read from Airflow's secrets backends
    (``AIRFLOW_CONN_*``, the metadata DB, Vault, ...) directly; then the environment. None if neither.
    """
    conn = None
    try:
        from airflow.models.connection import Connection

        conn = Connection.get_connection_from_secrets(DB_CONN_ID)
    except Exception:
        conn = None
    url = db_url_from_conn(conn)
    if url:
        return url
    from pulsar_rebalance.errors import StoreError
    from pulsar_rebalance.store.engine import database_url as from_env

    try:
        return from_env(os.environ)
    except StoreError:
        return None
