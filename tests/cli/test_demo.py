"""`pulsar-rebalance demo`, what the README's quick start runs after installing: one complete DAG run
(`airflow dags test` in its own process, real Spark, an embedded Postgres of its own, the simulated
cluster over HTTP) with the DAG's default strategy, approved automatically, ending in one JSON line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_the_quick_start_runs_the_dags_default_strategy_to_an_executed_plan(tmp_path):
    state = tmp_path / "state"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    for key in ("DATABASE_URL", "PULSAR_REBALANCE_DATABASE_URL", "AUTO_APPROVE"):
        env.pop(key, None)  # its own embedded Postgres, never a user's database
    proc = subprocess.Popen(
        [sys.executable, "-m", "pulsar_rebalance.cli", "demo", "--state-dir", str(state), "--auto-approve"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,  # `airflow dags test` ignores SIGTERM: on a timeout the group is killed
    )
    try:
        out, err = proc.communicate(timeout=840)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"demo did not finish in 840 s:\n{err[-4000:]}")
    assert proc.returncode == 0, err[-4000:]
    result = json.loads(out.strip().splitlines()[-1])
    assert result["status"] == "executed", result
    assert result["unloads_executed"] >= 1, result
    assert result["max_usage_after"] < result["max_usage_before"], result
    (dag_log,) = (state / "logs").glob("dag-run-*.log")
    assert "GlobalPlanner decided" in dag_log.read_text(), "detect_overload ran another strategy"
    plan_chart = state / "plans" / f"{result['plan_id']}.png"
    assert plan_chart.stat().st_size > 0
    assert f"plan {result['plan_id']}:" in err and "approved at the Airflow gate automatically" in err
