"""A real Spark standalone cluster on this machine: one master and N workers from the installed PySpark.

``spark-class org.apache.spark.deploy.master.Master`` / ``...worker.Worker`` (the venv's ``spark-class``,
no download), loopback only, ephemeral ports (read back from the daemons' logs). Used as a context
manager; every daemon is stopped on exit, also when start-up or the test fails.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

_MASTER_URL = re.compile(r"Starting Spark master at (spark://[\d.]+:\d+)")
_MASTER_UI = re.compile(r"MasterWebUI.*started at http://[\w.-]+:(\d+)")
_REGISTERED = "Successfully registered with master"


class StandaloneCluster:
    def __init__(
        self,
        root: Path,
        *,
        workers: int = 2,
        worker_cores: int = 1,
        worker_memory: str = "1g",
        env: dict[str, str] | None = None,
        start_timeout_s: float = 180.0,
    ) -> None:
        self.root = root
        self.workers = workers
        self.worker_cores = worker_cores
        self.worker_memory = worker_memory
        self.env = {
            **os.environ,
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PYSPARK_PYTHON": sys.executable,
            "SPARK_LOG_DIR": str(root / "logs"),
            # no fixed ports: the master's REST submission server would take 6066
            "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
            **(env or {}),
        }
        self.start_timeout_s = start_timeout_s
        self.procs: list[subprocess.Popen] = []
        self.master_url = ""
        self.ui_url = ""

    def _spawn(self, name: str, *args: str) -> Path:
        log = self.root / f"{name}.log"
        spark_class = str(Path(sys.executable).parent / "spark-class")
        with open(log, "wb") as out:
            self.procs.append(
                subprocess.Popen(
                    [spark_class, *args], env=self.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
                )
            )
        return log

    def _wait_for(self, log: Path, what: str, pattern: re.Pattern[str] | str, deadline: float) -> str:
        while time.monotonic() < deadline:
            text = log.read_text(errors="replace") if log.exists() else ""
            m = pattern.search(text) if isinstance(pattern, re.Pattern) else (pattern if pattern in text else None)
            if m:
                return m.group(1) if isinstance(m, re.Match) else m
            if any(p.poll() is not None for p in self.procs):
                raise RuntimeError(f"a Spark daemon exited while waiting for {what}:\n{text[-3000:]}")
            time.sleep(0.2)  # polling the log for a condition, bounded by the deadline
        raise TimeoutError(
            f"no {what} within {self.start_timeout_s:.0f} s; log {log}:\n{log.read_text(errors='replace')[-3000:]}"
        )

    def __enter__(self) -> StandaloneCluster:
        (self.root / "logs").mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + self.start_timeout_s
        try:
            log = self._spawn(
                "master",
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--webui-port",
                "0",
            )
            self.master_url = self._wait_for(log, "master URL", _MASTER_URL, deadline)
            self.ui_url = f"http://127.0.0.1:{self._wait_for(log, 'master web UI', _MASTER_UI, deadline)}"
            logs = []
            for i in range(self.workers):
                work = self.root / f"worker-{i}"
                work.mkdir(exist_ok=True)
                logs.append(
                    self._spawn(
                        f"worker-{i}",
                        "org.apache.spark.deploy.worker.Worker",
                        "--host",
                        "127.0.0.1",
                        "--port",
                        "0",
                        "--webui-port",
                        "0",
                        "--cores",
                        str(self.worker_cores),
                        "--memory",
                        self.worker_memory,
                        "--work-dir",
                        str(work),
                        self.master_url,
                    )
                )
            for log in logs:
                self._wait_for(log, "worker registration", _REGISTERED, deadline)
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        for p in reversed(self.procs):  # workers first, then the master
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=30)

    def status(self) -> dict:
        """The master's JSON status (workers, running and completed applications)."""
        import httpx

        return httpx.get(f"{self.ui_url}/json/", timeout=10).json()
