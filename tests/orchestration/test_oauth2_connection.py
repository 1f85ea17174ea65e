"""The ``pulsar_admin_default`` Connection with ``"auth": "oauth2"`` in its extra: parsed into
``PULSAR_ADMIN_OAUTH2_*`` (login = client id, password = client secret), the secret masked like the
token and carried by the secrets file; a token Connection is unchanged."""

from __future__ import annotations

import json
import os
import re

import pytest

from pulsar_rebalance.errors import ConfigError

SECRET = "oauth-S3cr3t-c0nn-5b8e"
EXTRA = {"auth": "oauth2", "issuer_url": "https://idp.example/", "audience": "urn:pulsar:prod", "scope": "admin"}


def _conn(monkeypatch, **fields):
    monkeypatch.setenv("AIRFLOW_CONN_PULSAR_ADMIN_DEFAULT", json.dumps({"conn_type": "http", **fields}))


def test_an_oauth2_connection_becomes_the_oauth2_environment(monkeypatch):
    from pulsar_rebalance.orchestration.connections import ADMIN_CONN_ID, _get, admin_env

    _conn(monkeypatch, host="https://pulsar:8443", login="rebalancer", password=SECRET, extra=EXTRA)
    assert admin_env(_get(ADMIN_CONN_ID)) == {
        "PULSAR_ADMIN_URL": "https://pulsar:8443",
        "PULSAR_ADMIN_OAUTH2_ISSUER_URL": "https://idp.example/",
        "PULSAR_ADMIN_OAUTH2_CLIENT_ID": "rebalancer",
        "PULSAR_ADMIN_OAUTH2_CLIENT_SECRET": SECRET,
        "PULSAR_ADMIN_OAUTH2_AUDIENCE": "urn:pulsar:prod",
        "PULSAR_ADMIN_OAUTH2_SCOPE": "admin",
    }
    # audience and scope are optional; no PULSAR_ADMIN_TOKEN from the password
    _conn(
        monkeypatch,
        host="pulsar",
        port=8080,
        login="c",
        password=SECRET,
        extra={"auth": "OAuth2", "issuer_url": "http://idp"},
    )
    env = admin_env(_get(ADMIN_CONN_ID))
    assert "PULSAR_ADMIN_TOKEN" not in env and "PULSAR_ADMIN_OAUTH2_AUDIENCE" not in env
    assert env["PULSAR_ADMIN_URL"] == "http://pulsar:8080"


def test_a_token_connection_is_unchanged(monkeypatch):
    from pulsar_rebalance.orchestration.connections import ADMIN_CONN_ID, _get, admin_env

    _conn(monkeypatch, host="http://pulsar:8080", password="tok", extra={"timeout": 5})
    assert admin_env(_get(ADMIN_CONN_ID)) == {
        "PULSAR_ADMIN_URL": "http://pulsar:8080",
        "PULSAR_ADMIN_TOKEN": "tok",
        "PULSAR_ADMIN_TIMEOUT": "5",
    }


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"login": "c", "password": SECRET, "extra": {"auth": "oauth2"}}, "extra 'issuer_url'"),
        ({"password": SECRET, "extra": EXTRA}, "login (the client id)"),
        ({"login": "c", "extra": EXTRA}, "password (the client secret)"),
        ({"login": "c", "password": SECRET, "extra": {**EXTRA, "token": "t"}}, "give a token or OAuth2"),
        ({"password": "t", "extra": {"auth": "kerberos"}}, "'token' or 'oauth2'"),
    ],
)
def test_an_incomplete_or_contradictory_oauth2_connection_is_refused(monkeypatch, fields, message):
    from pulsar_rebalance.orchestration.connections import ADMIN_CONN_ID, _get, admin_env

    _conn(monkeypatch, host="http://pulsar:8080", **fields)
    with pytest.raises(ConfigError, match=re.escape(message)) as info:
        admin_env(_get(ADMIN_CONN_ID))
    assert SECRET not in str(info.value)


def test_the_client_secret_is_masked_and_travels_in_the_secrets_file(monkeypatch):
    from airflow.sdk._shared.secrets_masker import redact

    from pulsar_rebalance.orchestration.connections import job_environment
    from pulsar_rebalance.orchestration.operators import secrets_file
    from pulsar_rebalance.pipeline.context import load_secrets, oauth2_from_env

    _conn(monkeypatch, host="http://pulsar:8080", login="rebalancer", password=SECRET, extra=EXTRA)
    env = job_environment()
    assert env["PULSAR_ADMIN_OAUTH2_CLIENT_SECRET"] == SECRET
    assert SECRET not in str(redact(f"secret={SECRET}"))
    with secrets_file(env) as path:
        assert os.stat(path).st_mode & 0o077 == 0
        environ = {"PULSAR_REBALANCE_SECRETS_FILE": path}
        assert "PULSAR_ADMIN_OAUTH2_CLIENT_SECRET" in load_secrets(environ)
    settings = oauth2_from_env(environ)
    assert (settings.issuer_url, settings.client_id, settings.client_secret) == (
        "https://idp.example/",
        "rebalancer",
        SECRET,
    )
    assert (settings.audience, settings.scope) == ("urn:pulsar:prod", "admin") and SECRET not in repr(settings)
