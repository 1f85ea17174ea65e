"""Install-level checks: the pyspark-client overlap trap, and the README's commands exist."""

from __future__ import annotations

import importlib.metadata as md
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def test_imported_pyspark_matches_installed_distribution():
    # pyspark-client (pulled in by the Spark provider) overwrites files of pyspark in the same folder;
    # scripts/install.sh force-reinstalls pyspark last. If that step is lost this fails.
    import pyspark

    assert pyspark.__version__ == md.version("pyspark")


def test_spark_submit_is_next_to_the_interpreter():
    assert (Path(sys.executable).parent / "spark-submit").exists()
    assert shutil.which("java"), "Spark needs Java 17+"


def test_console_script_help_lists_every_command():
    out = subprocess.run(
        [sys.executable, "-m", "pulsar_rebalance.cli", "--help"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    for cmd in ("decide", "split", "bundles", "plans", "history", "simulator", "demo", "standalone", "db"):
        assert cmd in out.stdout


def test_docker_compose_has_the_full_stack_and_no_inline_secrets():
    doc = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = doc["services"]
    for name in (
        "postgres",
        "airflow-apiserver",
        "airflow-scheduler",
        "airflow-dag-processor",
        "airflow-triggerer",
        "spark-master",
        "spark-worker",
        "simulator",
        "pulsar",
    ):
        assert name in services, name
    assert services["pulsar"]["image"].startswith("apachepulsar/pulsar")
    assert "airflow triggerer" in services["airflow-triggerer"]["command"]
    text = (ROOT / "docker-compose.yml").read_text()
    assert "POSTGRES_PASSWORD: ${POSTGRES_PASSWORD" in text  # taken from the environment, never inline
    env = services["airflow-scheduler"]["environment"]
    assert "spark://spark-master:7077" in env["AIRFLOW_CONN_SPARK_DEFAULT"]
    for worker in ("spark-worker", "spark-worker-2"):  # two workers sharing the work volume with Airflow
        assert "spark://spark-master:7077" in services[worker]["command"]
        assert "work:/shared/work" in services[worker]["volumes"]
    assert env["PULSAR_REBALANCE_WORK_DIR"] == "/shared/work"
    assert (ROOT / "Dockerfile").exists() and (ROOT / "docker" / "init-db.sql").exists()


def test_readme_quick_start_commands_exist():
    readme = (ROOT / "README.md").read_text()
    assert "AUTO_APPROVE=1 bash scripts/quickstart.sh" in readme
    assert "bash scripts/test.sh" in readme
    assert "bash scripts/test.sh" in (ROOT / ".ci" / "run").read_text()
