"""`pulsar-rebalance standalone`: the local Airflow stack comes up wired to Postgres and the simulator,
serves the UI/API on loopback only, and stops cleanly (with every component's children) on SIGTERM."""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(pids: set[int]) -> list[tuple[int, str, str, int]]:
    """(pid, process name, ip, port) of every TCP socket in LISTEN state owned by ``pids``."""
    out = []
    for conn in psutil.net_connections(kind="inet"):
        if conn.status == psutil.CONN_LISTEN and conn.pid in pids:
            out.append((conn.pid, psutil.Process(conn.pid).name(), conn.laddr.ip, conn.laddr.port))
    return out


def _tree(pid: int) -> set[int]:
    root = psutil.Process(pid)
    return {pid, *(c.pid for c in root.children(recursive=True))}


def _postmaster_pid(state: Path) -> int:
    pid_file = next(state.glob("pg/**/postmaster.pid"))
    return int(pid_file.read_text().split()[0])


def test_standalone_stack_listens_on_loopback_only_and_stops_cleanly(tmp_path):
    port = _free_port()
    state = tmp_path / "state"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.pop("PULSAR_REBALANCE_DATABASE_URL", None)
    env.pop("DATABASE_URL", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "pulsar_rebalance.cli", "standalone", "--state-dir", str(state), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )
    lines = []
    ready = None
    try:
        deadline = time.monotonic() + 420
        while time.monotonic() < deadline and proc.poll() is None:
            line = proc.stdout.readline()  # blocks until the next line; the process prints progress
            lines.append(line)
            if line.startswith("{"):
                ready = json.loads(line)
                break
        assert ready, "".join(lines[-40:])
        assert ready["airflow_url"] == f"http://127.0.0.1:{port}"
        assert httpx.get(f"{ready['airflow_url']}/api/v2/monitor/health", timeout=10).status_code == 200
        assert httpx.get(f"{ready['admin_url']}/admin/v2/brokers", timeout=10).json()  # the simulator answers

        # Every listening socket of the stack - our process, the four Airflow components and all their
        # children (uvicorn workers, executor workers), the simulator, the Postgres server - is on loopback.
        pids = _tree(proc.pid) | {_postmaster_pid(state)}
        listening = _listening(pids)
        ports = {p for *_, p in listening}
        assert port in ports, listening  # the API server is among them (the check sees real sockets)
        assert len(ports) >= 6, listening  # API server + 5 simulated brokers
        exposed = [s for s in listening if not ipaddress.ip_address(s[2]).is_loopback]
        assert exposed == [], f"listening beyond loopback: {exposed}"

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == 0
        for _name, pid in ready["pids"].items():  # each component ran in its own process group: all gone
            with pytest.raises(ProcessLookupError):
                os.killpg(pid, 0)
        with pytest.raises(ProcessLookupError):  # nothing of our own process group is left behind
            os.killpg(proc.pid, 0)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for pid in (ready or {}).get("pids", {}).values():
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
