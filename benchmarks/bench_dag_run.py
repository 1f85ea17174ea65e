"""Where a quick-start DAG run's time goes: ``pulsar-rebalance demo`` (what ``scripts/quickstart.sh`` runs
after the install) on the default 5-broker simulated cluster.

Usage::

    .venv/bin/python benchmarks/bench_dag_run.py                              # this checkout, 3 runs; writes docs/benchmarks/dag_run.json
                                                                              # and its block in dag-run.md
    .venv/bin/python benchmarks/bench_dag_run.py --src /tmp/before --runs 3   # another checkout (before/after)
    .venv/bin/python benchmarks/bench_dag_run.py --src /tmp/before --src . --runs 3   # interleaved pairs

Each run is ``python -m pulsar_rebalance.cli demo --auto-approve --state-dir <fresh temp dir>`` with the
checkout's ``src/`` first on ``PYTHONPATH`` (so its ``dags/``, ``spark_jobs/`` and package are used):
a fresh embedded Postgres, the simulator, ``airflow db migrate``, then ``airflow dags test`` of the
``pulsar_rebalance`` DAG with ``local[*]`` Spark, every Spark task a cold ``spark-submit``, the plan
approved at the Airflow gate as soon as it waits there (``AUTO_APPROVE=1``). Printed per run, one JSON
line: the demo's wall time, the DAG run's wall time (``airflow dags test``: from the demo's "running DAG"
line to its result), each task's duration (Airflow's ``task_instance`` start/end), the plan's outcome
and the 1-minute load average before and after the run (2 cores: above 2 means waiting for a core).
With several ``--src``, runs alternate between them (before/after pairs under the same load).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import figures  # benchmarks/figures.py: JSON + marked blocks in the docs

ROOT = Path(__file__).resolve().parents[1]
JSON = ROOT / "docs" / "benchmarks" / "dag_run.json"
DOC = ROOT / "docs" / "benchmarks" / "dag-run.md"
SCRIPT = "benchmarks/bench_dag_run.py"
TASKS = ("collect_load", "compute_usage", "detect_overload", "plan_split", "await_approval", "execute_unload")
_SAY = re.compile(r"^\[demo (\d\d:\d\d:\d\d)\] (.*)$")


def _seconds(hms: str) -> int:
    h, m, s = (int(x) for x in hms.split(":"))
    return h * 3600 + m * 60 + s


def task_durations(state: Path) -> dict[str, float]:
    """Each task's duration from the Airflow metadata DB the demo left in ``state`` (embedded Postgres)."""
    import sqlalchemy as sa

    sys.path.insert(0, str(ROOT / "src"))
    from pulsar_rebalance.store.embedded import EmbeddedPostgres

    pg = EmbeddedPostgres(state / "pg")
    pg.start()
    try:
        engine = sa.create_engine(pg.url_for("airflow"), poolclass=sa.pool.NullPool)
        with engine.connect() as c:
            rows = c.execute(
                sa.text(
                    "SELECT task_id, start_date, end_date FROM task_instance "
                    "WHERE dag_id = 'pulsar_rebalance' AND start_date IS NOT NULL AND end_date IS NOT NULL"
                )
            )
            return {r.task_id: round((r.end_date - r.start_date).total_seconds(), 1) for r in rows}
    finally:
        pg.stop()


def one_run(src: Path) -> dict:
    state = Path(tempfile.mkdtemp(prefix="bench-dag-", dir="/tmp"))
    env = {
        k: v
        for k, v in os.environ.items()  # no connection or database of the caller's; PULSAR_REBALANCE_SPARK_CDS stays
        if not k.startswith(("AIRFLOW", "PULSAR_ADMIN", "PULSAR_REBALANCE_DATABASE_URL", "DATABASE_URL"))
    }
    env.update(
        {
            "PYTHONPATH": str(src / "src"),
            "AUTO_APPROVE": "1",
            "PATH": os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", ""),
        }
    )
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "pulsar_rebalance.cli", "demo", "--auto-approve", "--state-dir", str(state)],
            env=env,
            cwd=src,
            capture_output=True,
            text=True,
            timeout=3600,
        )
        wall = time.perf_counter() - t0
        said = [m.groups() for m in map(_SAY.match, proc.stderr.splitlines()) if m]
        if proc.returncode != 0 or not proc.stdout.strip():
            raise RuntimeError(f"the demo failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        start = next(_seconds(t) for t, msg in said if msg.startswith("running DAG"))
        end = _seconds(said[-1][0])  # the demo's last line comes right after `airflow dags test` exits (the chart)
        return {
            "src": str(src),
            "demo_wall_s": round(wall, 1),
            "dag_run_s": (end - start) % 86400,
            "tasks": task_durations(state),
            "status": result["status"],
            "unloads": result["unloads_executed"],
            "splits": result["splits_executed"],
            "load_avg_before": round(load_before, 2),
            "load_avg_after": round(os.getloadavg()[0], 2),
        }
    finally:
        shutil.rmtree(state, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", action="append", help="a checkout to run (its src/, dags/, spark_jobs/); repeatable")
    ap.add_argument("--runs", type=int, default=3, help="runs per checkout")
    ap.add_argument("--no-write", action="store_true", help=f"do not write {JSON.relative_to(ROOT)} and {DOC.name}")
    args = ap.parse_args(argv)
    sources = [Path(s).resolve() for s in (args.src or [str(ROOT)])]
    runs = []
    with figures.LoadSampler() as load:
        for _ in range(args.runs):
            for src in sources:
                run = one_run(src)
                run["checkout"] = _label(src)
                runs.append(run)
                print(json.dumps(run), flush=True)
    if not args.no_write:
        doc = {"meta": figures.meta(load), "runs": runs}
        figures.write_json(JSON, doc)
        figures.update(SCRIPT, str(JSON.relative_to(ROOT)), doc, {"dag-run": [DOC]})
    return 0


def _label(src: Path) -> str:
    if src == ROOT:
        return "this checkout"
    head = subprocess.run(["git", "-C", str(src), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return f"{src.name} ({head.stdout.strip() or 'not a git checkout'})"


def render(doc: dict) -> str:
    """The runs as a table (one row per run, the median per checkout), from the JSON the run wrote."""
    runs = doc["runs"]
    seen = {t for r in runs for t in r["tasks"]}
    tasks = [t for t in TASKS if t in seen] + sorted(seen - set(TASKS))
    header = ["checkout", "run", "demo wall (s)", "DAG run (s)", *tasks, "plan", "load before / after"]
    rows = []
    for i, r in enumerate(runs, 1):
        rows.append(
            [r["checkout"], i, f"{r['demo_wall_s']:.1f}", r["dag_run_s"]]
            + [r["tasks"].get(t, "") for t in tasks]
            + [f"{r['status']}: {r['unloads']} unloads, {r['splits']} splits"]
            + [f"{r['load_avg_before']} / {r['load_avg_after']}"]
        )
    for checkout in dict.fromkeys(r["checkout"] for r in runs):
        mine = [r for r in runs if r["checkout"] == checkout]
        rows.append(
            [f"**{checkout}: median**", len(mine), f"{statistics.median(r['demo_wall_s'] for r in mine):.1f}"]
            + [f"**{statistics.median(r['dag_run_s'] for r in mine):g}**"]
            + [f"{statistics.median(r['tasks'][t] for r in mine if t in r['tasks']):.1f}" for t in tasks]
            + ["", ""]
        )
    return "\n".join(
        [
            "Each run: `pulsar-rebalance demo --auto-approve` on a fresh state directory (embedded Postgres, the "
            "default 5-broker simulated cluster, `airflow dags test` of the `pulsar_rebalance` DAG with "
            "`local[*]` Spark, every Spark task a cold `spark-submit`). *DAG run* is from the demo's "
            '"running DAG" line to its result (whole seconds); task columns are Airflow\'s task durations '
            "(seconds); the load average is the 1-minute value before and after each run.",
            "",
            figures.table(header, rows, "llrr" + "r" * len(tasks) + "ll"),
        ]
    )


# blocks this script writes (figures.update); tests/test_docs_figures.py re-renders them from the JSON
BLOCKS = {"dag-run": render}


if __name__ == "__main__":
    raise SystemExit(main())
