"""The ``pulsar-rebalance simulator`` command as the tests start it: a child process on ephemeral ports."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Sequence

SIMULATOR = [sys.executable, "-m", "pulsar_rebalance.cli", "simulator", "--port-base", "0"]


def child_env() -> dict[str, str]:
    """This process's environment with its import path, so the child imports this checkout."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}


def start_simulator(args: Sequence[str]) -> subprocess.Popen[str]:
    """The simulator with ``args``; its first stdout line is the ready JSON (stop it with :func:`stop`)."""
    return subprocess.Popen(
        [*SIMULATOR, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env()
    )


def stop(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """SIGTERM, then its remaining (stdout, stderr)."""
    proc.send_signal(signal.SIGTERM)
    return proc.communicate(timeout=60)


def refusal(args: Sequence[str]) -> str:
    """The stderr of a simulator command that must fail at once (asserts it exits non-zero)."""
    done = subprocess.run([*SIMULATOR, *args], capture_output=True, text=True, env=child_env(), timeout=60)
    assert done.returncode != 0, done.stdout
    return done.stderr
