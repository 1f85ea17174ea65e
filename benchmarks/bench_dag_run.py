"""Where a DAG run's time goes: the whole ``pulsar_rebalance`` DAG on the default 5-broker simulated cluster.

Usage::

    .venv/bin/python benchmarks/bench_dag_run.py                        # this checkout, 2 runs
    .venv/bin/python benchmarks/bench_dag_run.py --src /tmp/old --runs 2 # another checkout (before/after)

Each run is a fresh process (so every Spark task is a real, cold ``spark-submit``) running
``dag.test()`` with Airflow's metadata DB in SQLite, a fresh embedded Postgres state DB, the default
simulated cluster (``generate_cluster(seed=42)``) over real HTTP, ``spark_default = local[*]`` and
the plan approved by a thread as soon as it is pending (the CLI's code path). Printed: the wall
time of ``dag.test()`` and each task's duration (Airflow's start/end dates), as one JSON line per run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

WORKER = r'''
import json, os, sys, tempfile, threading, time
from pathlib import Path
src = Path(sys.argv[1]); tmp = Path(tempfile.mkdtemp(prefix="bench-dag-"))
os.environ.update({"AIRFLOW_HOME": str(tmp / "airflow"), "AIRFLOW__CORE__DAGS_FOLDER": str(src / "dags"),
    "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{tmp}/airflow.db",
    "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[*]"}),
    "PULSAR_REBALANCE_WORK_DIR": str(tmp / "work"), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
    "PYTHONPATH": str(src / "src"), "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]})
sys.path.insert(0, str(src / "src"))
from pulsar_rebalance.simulator import SimulatedPulsar, generate_cluster
from pulsar_rebalance.store.embedded import EmbeddedPostgres
from pulsar_rebalance.store.engine import migrate
pg = EmbeddedPostgres(tmp / "pg"); pg.start()
try:
    url = pg.create_database("pr"); migrate(url)
    with SimulatedPulsar(generate_cluster(seed=42), ephemeral=True) as sim:
        os.environ["AIRFLOW_CONN_PULSAR_ADMIN_DEFAULT"] = json.dumps({"conn_type": "http", "host": sim.admin_url})
        os.environ["AIRFLOW_CONN_PULSAR_REBALANCE_DB"] = json.dumps({"conn_type": "postgres", "extra": {"url": url}})
        os.environ["PULSAR_REBALANCE_DATABASE_URL"] = url
        from airflow.utils import db
        db.initdb()
        from airflow.dag_processing.dagbag import DagBag
        import sqlalchemy as sa
        def approve():
            from pulsar_rebalance.cli import main
            engine = sa.create_engine(url); deadline = time.monotonic() + 900
            while time.monotonic() < deadline:
                with engine.connect() as c:
                    row = c.execute(sa.text("SELECT plan_id FROM plans WHERE status = 'pending'")).first()
                if row:
                    main(["plans", "approve", row[0], "--by", "bench", "-m", "bench"]); return
                time.sleep(0.5)
        threading.Thread(target=approve, daemon=True).start()
        dag = DagBag(dag_folder=str(src / "dags")).get_dag("pulsar_rebalance")
        t0 = time.perf_counter()
        dr = dag.test(run_conf={"approval_timeout_minutes": 30})
        wall = time.perf_counter() - t0
        tasks = {ti.task_id: round((ti.end_date - ti.start_date).total_seconds(), 1) for ti in dr.get_task_instances()
                 if ti.start_date and ti.end_date}
        print("RESULT " + json.dumps({"state": str(dr.state), "wall_s": round(wall, 1), "tasks": tasks,
                                      "load_avg": round(os.getloadavg()[0], 1)}))
finally:
    pg.stop()
    import shutil; shutil.rmtree(tmp, ignore_errors=True)
'''


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", default=str(ROOT), help="the checkout to run (its src/ and dags/)")
    ap.add_argument("--runs", type=int, default=2)
    args = ap.parse_args(argv)
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(WORKER)
    try:
        for _ in range(args.runs):
            proc = subprocess.run([sys.executable, f.name, args.src], capture_output=True, text=True, timeout=1800,
                                  env={k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "PULSAR"))})
            line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
            if line is None:
                print(proc.stderr[-3000:], file=sys.stderr)
                return 1
            print(line[len("RESULT "):], flush=True)
    finally:
        os.unlink(f.name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
