"""Secrets never on a spark-submit command line nor in a log line, for every master (issue #11, item 7).

The command is rendered by the Spark provider's own hook (``SparkSubmitHook._build_spark_submit_command``)
from the hook our operator prepares, with known secrets in the Airflow Connections, for local,
``spark://`` (client and cluster), YARN (client and cluster) and Kubernetes (client, cluster with the
shipped file, cluster with a Secret reference). A slow test runs a real ``collect_load`` spark-submit
through the operator against the simulator (which requires the token) and reads the task log.
"""

from __future__ import annotations

import json
import logging
import os
import stat

import pytest

from pulsar_rebalance.orchestration.operators import PulsarSparkJobOperator  # binds the hook's kube_client

TOKEN = "tok-S3cr3t-4dm1n-7f3a"
DB_PASSWORD = "pw-S3cr3t-db-91c2"
APP = "/opt/jobs/collect_load.py"

MASTERS = {
    "local": ({"conn_type": "spark", "host": "local[*]"}, False),
    "standalone-client": ({"conn_type": "spark", "host": "spark://master", "port": 7077}, False),
    "standalone-cluster": (
        {"conn_type": "spark", "host": "spark://master", "port": 7077, "extra": {"deploy-mode": "cluster"}},
        True,
    ),
    "yarn-client": ({"conn_type": "spark", "host": "yarn", "extra": {"deploy-mode": "client", "queue": "etl"}}, False),
    "yarn-cluster": ({"conn_type": "spark", "host": "yarn", "extra": {"deploy-mode": "cluster"}}, True),
    "k8s-client": (
        {"conn_type": "spark", "host": "k8s://https://kube:6443", "extra": {"deploy-mode": "client"}},
        False,
    ),
    "k8s-cluster": (
        {
            "conn_type": "spark",
            "host": "k8s://https://kube:6443",
            "extra": {"deploy-mode": "cluster", "namespace": "pulsar"},
        },
        True,
    ),
}


@pytest.fixture
def connections(monkeypatch, tmp_path):
    monkeypatch.setenv(
        "AIRFLOW_CONN_PULSAR_ADMIN_DEFAULT",
        json.dumps({"conn_type": "http", "host": "https://pulsar-broker:8443", "password": TOKEN}),
    )
    monkeypatch.setenv(
        "AIRFLOW_CONN_PULSAR_REBALANCE_DB",
        json.dumps(
            {"conn_type": "postgres", "host": "pg", "login": "rebalance", "password": DB_PASSWORD, "schema": "pr"}
        ),
    )
    monkeypatch.setenv("PULSAR_REBALANCE_WORK_DIR", str(tmp_path / "work"))


@pytest.fixture
def kube_client_present(monkeypatch):
    """Kubernetes masters need apache-airflow-providers-cncf-kubernetes, which this environment does not
    install; the hook only checks that its client module imported (it is used to track/kill driver
    pods, never to build the command), so a placeholder stands in for that module here."""
    from airflow.providers.apache.spark.hooks import spark_submit

    monkeypatch.setattr(spark_submit, "kube_client", object(), raising=False)


def _operator(**kwargs):
    return PulsarSparkJobOperator(
        task_id="collect_load", job="collect_load", pass_params=True, application=APP, **kwargs
    )


def _render(monkeypatch, capfd, name: str, **kwargs):
    """(command, secrets file path or None, its content or None, the job's environment, captured log text)."""
    conn, _ = MASTERS[name]
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps(conn))
    op = _operator(**kwargs)
    op.application_args = ["--run-id", "manual__2026-11-23"]
    records: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append(record.getMessage())  # type: ignore[method-assign]
    root = logging.getLogger()
    root.addHandler(handler)
    old_level = root.level
    root.setLevel(logging.DEBUG)
    try:
        with op.submission({"params": {"namespaces": []}, "run_id": "manual__2026-11-23"}) as hook:
            cmd = hook._build_spark_submit_command(op.application)
            env = {
                **dict(hook._env or {}),
                **{k: v for k, v in os.environ.items() if k.startswith("PULSAR_REBALANCE_SEC")},
            }
            path = next((p for p in (op.files or "").split(",") if p), None) or env.get("PULSAR_REBALANCE_SECRETS_FILE")
            content = None
            if path and os.path.isabs(path):
                assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
                assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
                with open(path) as fh:
                    content = json.load(fh)
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
    if path and os.path.isabs(path):
        assert not os.path.exists(path), "the secrets file is removed after the submission"
    assert "PULSAR_REBALANCE_SECRETS_FILE" not in os.environ, "the task's environment is restored"
    out, err = capfd.readouterr()
    return cmd, path, content, env, "\n".join([*records, out, err])


def _assert_no_secret(*texts: str) -> None:
    for text in texts:
        assert TOKEN not in text and DB_PASSWORD not in text, text


@pytest.mark.parametrize("name", sorted(MASTERS))
def test_spark_submit_command_and_log_carry_no_secret(monkeypatch, capfd, connections, kube_client_present, name):
    cmd, path, content, env, log_text = _render(monkeypatch, capfd, name)
    assert "Spark-Submit cmd:" in log_text
    line = " ".join(cmd)
    _assert_no_secret(line, log_text, json.dumps(env))
    assert cmd[cmd.index("--master") + 1] in line and APP in cmd
    # the secrets reach the job through the 0600 file: shipped with --files in cluster mode,
    # read in place (its path in PULSAR_REBALANCE_SECRETS_FILE) in client mode
    assert content == {
        "PULSAR_ADMIN_URL": "https://pulsar-broker:8443",
        "PULSAR_ADMIN_TOKEN": TOKEN,
        "PULSAR_REBALANCE_DATABASE_URL": f"postgresql+psycopg2://rebalance:{DB_PASSWORD}@pg/pr",
    }
    _, cluster_mode = MASTERS[name]
    if cluster_mode:
        assert cmd[cmd.index("--files") + 1] == path and "--deploy-mode" in cmd
    else:
        assert "--files" not in cmd and env.get("PULSAR_REBALANCE_SECRETS_FILE") == path


def test_driver_gets_the_lighter_start_up_options_unless_the_dag_sets_its_own(
    monkeypatch, capfd, connections, tmp_path
):
    from pulsar_rebalance.pipeline import jvm

    archive = tmp_path / "spark.jsa"
    archive.write_bytes(b"built")
    monkeypatch.setenv(jvm.ENV_CDS, str(archive))
    cmd, *_ = _render(monkeypatch, capfd, "local")
    assert f"spark.driver.extraJavaOptions={jvm.driver_java_options()}" in cmd
    assert f"-XX:SharedArchiveFile={archive}" in jvm.driver_java_options()
    cmd, *_ = _render(monkeypatch, capfd, "local", conf={"spark.driver.extraJavaOptions": "-Dmine=1"})
    assert "spark.driver.extraJavaOptions=-Dmine=1" in cmd


def test_kubernetes_cluster_mode_can_reference_a_secret_instead_of_shipping_a_file(
    monkeypatch, capfd, connections, kube_client_present
):
    cmd, path, content, env, log_text = _render(monkeypatch, capfd, "k8s-cluster", kubernetes_secret="pulsar-rebalance")
    _assert_no_secret(" ".join(cmd), log_text)
    assert path is None and content is None and "--files" not in cmd
    refs = sorted(c for c in cmd if c.startswith("spark.kubernetes.driver.secretKeyRef."))
    assert refs == [
        "spark.kubernetes.driver.secretKeyRef.PULSAR_ADMIN_TOKEN=pulsar-rebalance:PULSAR_ADMIN_TOKEN",
        "spark.kubernetes.driver.secretKeyRef.PULSAR_ADMIN_URL=pulsar-rebalance:PULSAR_ADMIN_URL",
        "spark.kubernetes.driver.secretKeyRef.PULSAR_REBALANCE_DATABASE_URL=pulsar-rebalance:PULSAR_REBALANCE_DATABASE_URL",
    ]


def test_kubernetes_master_without_the_provider_is_a_clear_error_not_a_name_error(monkeypatch, connections):
    from airflow.providers.apache.spark.hooks import spark_submit

    assert spark_submit.kube_client is None  # bound by our operator module: this environment has no cncf provider
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps(MASTERS["k8s-cluster"][0]))
    with pytest.raises(RuntimeError, match="apache-airflow-providers-cncf-kubernetes"):
        with _operator().submission({"params": {}, "run_id": "r"}):
            pass


def test_every_secret_is_registered_with_airflows_masker(monkeypatch, connections):
    from airflow.sdk._shared.secrets_masker import redact

    from pulsar_rebalance.orchestration.connections import job_environment

    env = job_environment()
    text = f"token={TOKEN} url={env['PULSAR_REBALANCE_DATABASE_URL']} pw {DB_PASSWORD}"
    _assert_no_secret(str(redact(text)))


def test_the_job_reads_the_secrets_file_and_refuses_a_readable_one(tmp_path):
    from pulsar_rebalance.errors import ConfigError
    from pulsar_rebalance.orchestration.operators import secrets_file
    from pulsar_rebalance.pipeline.context import load_secrets

    with secrets_file({"PULSAR_ADMIN_TOKEN": TOKEN}) as path:
        environ = {"PULSAR_REBALANCE_SECRETS_FILE": path}
        assert load_secrets(environ) == ["PULSAR_ADMIN_TOKEN"] and environ["PULSAR_ADMIN_TOKEN"] == TOKEN
        os.chmod(path, 0o644)
        with pytest.raises(ConfigError, match="readable by others"):
            load_secrets({"PULSAR_REBALANCE_SECRETS_FILE": path})
    # cluster mode: the copy Spark shipped, found by name in the SparkFiles directory
    (tmp_path / "pulsar-rebalance-secrets.json").write_text(
        json.dumps({"PULSAR_REBALANCE_DATABASE_URL": "postgresql://x"})
    )
    environ = {}
    assert load_secrets(environ, spark_files_dir=str(tmp_path)) == ["PULSAR_REBALANCE_DATABASE_URL"]
    (tmp_path / "pulsar-rebalance-secrets.json").write_text(json.dumps({"AWS_SECRET": "x"}))
    with pytest.raises(ConfigError, match="unknown keys"):
        load_secrets({}, spark_files_dir=str(tmp_path))


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_real_submission_gets_its_secrets_from_the_file_and_logs_none(monkeypatch, capfd, db_url, tmp_path):
    """collect_load through the operator, local master, a simulator that demands the token: the job can
    only succeed if the token and DB URL reached it, and neither appears in the task's output."""
    from pulsar_rebalance.simulator.generator import generate_cluster
    from pulsar_rebalance.simulator.server import SimulatedPulsar

    with SimulatedPulsar(generate_cluster(seed=42), ephemeral=True, token=TOKEN) as sim:
        monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps(MASTERS["local"][0]))
        monkeypatch.setenv(
            "AIRFLOW_CONN_PULSAR_ADMIN_DEFAULT",
            json.dumps({"conn_type": "http", "host": sim.admin_url, "password": TOKEN}),
        )
        monkeypatch.setenv(
            "AIRFLOW_CONN_PULSAR_REBALANCE_DB", json.dumps({"conn_type": "postgres", "extra": {"url": db_url}})
        )
        for var in ("PULSAR_ADMIN_TOKEN", "PULSAR_ADMIN_URL", "PULSAR_REBALANCE_DATABASE_URL", "DATABASE_URL"):
            monkeypatch.delenv(var, raising=False)
        op = PulsarSparkJobOperator(task_id="collect_load", job="collect_load", pass_params=True)
        op.application_args = ["--run-id", "secrets-run", "--work-dir", str(tmp_path / "work")]
        op.execute({"params": {}, "run_id": "secrets-run"})
    out, err = capfd.readouterr()
    log_text = out + err
    assert "RESULT collect_load" in log_text and "secrets loaded from the operator's file" in log_text
    assert TOKEN not in log_text and db_url not in log_text
    import sqlalchemy as sa

    engine = sa.create_engine(db_url)
    with engine.connect() as c:
        assert c.execute(sa.text("SELECT count(*) FROM runs WHERE run_id = 'secrets-run'")).scalar_one() == 1
    engine.dispose()
