"""`pulsar-rebalance standalone`: the local Airflow stack comes up wired to Postgres and the simulator,
serves the UI/API, and stops cleanly (with all of airflow standalone's children) on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_standalone_stack_starts_and_stops_cleanly(tmp_path):
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.pop("PULSAR_REBALANCE_DATABASE_URL", None)
    env.pop("DATABASE_URL", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "pulsar_rebalance.cli", "standalone", "--state-dir", str(tmp_path / "state"),
         "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True,
    )
    lines = []
    try:
        ready = None
        deadline = time.monotonic() + 420
        while time.monotonic() < deadline and proc.poll() is None:
            line = proc.stdout.readline()  # blocks until the next line; the process prints progress
            lines.append(line)
            if line.startswith("{"):
                ready = json.loads(line)
                break
        assert ready, "".join(lines[-40:])
        assert ready["airflow_url"] == f"http://localhost:{port}"
        assert httpx.get(f"{ready['airflow_url']}/api/v2/monitor/health", timeout=10).status_code == 200
        assert httpx.get(f"{ready['admin_url']}/admin/v2/brokers", timeout=10).json()  # the simulator answers
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=90) == 0
        with pytest.raises(ProcessLookupError):  # nothing of the process group is left behind
            os.killpg(proc.pid, 0)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
