"""The decision core stays pure: importing all of pulsar_rebalance.core loads no heavy framework."""

from __future__ import annotations

import json
import subprocess
import sys

FORBIDDEN = ("airflow", "pyspark", "sqlalchemy", "httpx", "psycopg2", "alembic")

_PROBE = """
import importlib, json, pkgutil, sys
import pulsar_rebalance.core as core
names = sorted(m.name for m in pkgutil.walk_packages(core.__path__, core.__name__ + "."))
for name in names:
    importlib.import_module(name)
forbidden = %r
loaded = sorted({m.split(".")[0] for m in sys.modules if m.split(".")[0] in forbidden})
print(json.dumps({"modules": names, "loaded": loaded}))
"""


def test_core_modules_import_no_framework() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE % (FORBIDDEN,)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    for expected in (
        "pulsar.config",
        "pulsar.load",
        "pulsar.bundles",
        "pulsar.split_algorithms",
        "pulsar.split_trigger",
        "contract.split",
        "contract.json_input",
        "planner.global_planner",
    ):
        assert f"pulsar_rebalance.core.{expected}" in report["modules"]
    assert report["loaded"] == [], f"pulsar_rebalance.core pulled in {report['loaded']}"


def test_cli_dispatcher_for_core_commands_stays_light() -> None:
    # `pulsar-rebalance split` must not need the heavy stack either: import the command module and run it.
    probe = (
        "import sys, json\n"
        "from pulsar_rebalance.cli import core_commands\n"
        "from pulsar_rebalance.core.contract.split import split_scenario\n"
        "split_scenario({'bundle': '0x00000000_0xffffffff'})\n"
        f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({FORBIDDEN!r}))))\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []
