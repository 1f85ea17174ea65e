"""The fault-injection suite's harness: a simulated cluster, a real Postgres, an approved plan, the
invariants every case checks, and the figure table.

A *world* is one simulated Pulsar cluster (real HTTP servers) with its snapshot recorded in a fresh
database and one approved plan (splits and unloads of real bundles, built here the way plan_split
stores them, so no Spark is needed). Every case ends with :meth:`World.check`, which compares what the
simulator executed with what Postgres recorded:

* **duplicate actions**: a split or unload the simulator executed more than once, or one that is not
  in the plan at all;
* **lost records**: an action whose effect is on the cluster but whose record is not ``completed``
  (or the reverse), an action left ``pending``/``in_progress``, a plan not in a final status, a failed
  or skipped action without its reason.

Each case reports its figures (faults injected, survived, duplicates, lost) to a ledger
(``tests/faults/ledger.py``); the terminal summary prints them as a table, in a full-suite run too, and,
with ``PULSAR_REBALANCE_FAULT_REPORT=PATH`` set, writes them to ``docs/benchmarks/faults.json`` and renders
the marked table block in PATH from it (``bash scripts/fault-report.sh`` regenerates
``docs/fault-injection.md``).
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pulsar_rebalance.pipeline.collect import collect_snapshot, record_snapshot
from pulsar_rebalance.pipeline.params import RunParams, resource_weights
from pulsar_rebalance.pulsar_admin import PulsarAdminClient
from pulsar_rebalance.simulator.generator import generate_cluster
from pulsar_rebalance.simulator.server import SimulatedPulsar
from pulsar_rebalance.store import repository as repo
from pulsar_rebalance.store.engine import make_engine, session_scope
from tests.faults.ledger import LEDGER, WORKER_OUTPUT_KEY, Figures, to_rows
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
EXECUTE_JOB = ROOT / "spark_jobs" / "execute_unload.py"
FINAL_PLAN_STATUSES = ("executed", "partially_executed", "failed")


# ------------------------------------------------------------------------------------------ ledger


@pytest.fixture
def figures(request) -> Figures:
    """This case's row of the figure table (filled by the test, kept even if it fails)."""
    name = request.node.name.removeprefix("test_")
    row = LEDGER[name] = Figures(case=name)
    return row


def pytest_sessionfinish(session):
    """On a pytest-xdist worker: hand this worker's rows to the controller, which prints the table
    (``tests/conftest.py``)."""
    out = getattr(session.config, "workeroutput", None)
    if out is not None:
        out[WORKER_OUTPUT_KEY] = to_rows()


# ------------------------------------------------------------------------------------------- world


@dataclass
class Invariants:
    duplicates: int
    lost: int
    problems: list[str] = field(default_factory=list)
    states: Counter = field(default_factory=Counter)
    plan_status: str = ""

    @property
    def ok(self) -> bool:
        return not self.problems


class World:
    """One simulated cluster + database + approved plan (see the module docstring)."""

    def __init__(self, sim: SimulatedPulsar, db_url: str, work: Path, *, run_id: str = "run-faults") -> None:
        self.sim, self.db_url, self.work, self.run_id = sim, db_url, work, run_id
        self.engine = make_engine(db_url)
        self.client = PulsarAdminClient.from_url(sim.admin_url, retries=0, timeout=5)
        self.plan_id = ""

    # -- building

    def make_plan(
        self,
        *,
        splits: int = 1,
        unloads: int = 6,
        expires_in: dt.timedelta | None = None,
        max_parallel: int = 3,
        approve: bool = True,
        run_id: str | None = None,
    ) -> str:
        """Record a snapshot and store a plan: ``splits`` hot bundles split in two (unload=false), then
        ``unloads`` other bundles moved round-robin to other brokers; approved by ``carol``."""
        run_id = run_id or self.run_id
        params = RunParams.from_json({"max_parallel_unloads": max_parallel})
        snap = collect_snapshot(self.client)
        rates = Counter()
        for t in self.sim.state.topics():
            rates[self.sim.state.bundle_for_topic(t.name)] += t.msg_rate_in + t.msg_rate_out
        bundles = sorted(snap.ownership, key=lambda b: (-rates[b], b))
        brokers = sorted(snap.brokers)
        actions = []
        for bundle in bundles[:splits]:
            ns, rng = bundle.rsplit("/", 1)
            lo, hi = (int(x, 16) for x in rng.split("_"))
            actions.append(
                {
                    "kind": "split",
                    "bundle": bundle,
                    "source_broker": snap.ownership[bundle],
                    "boundaries": [lo + (hi - lo) // 2],
                    "split_algorithm": "range_equally_divide",
                    "reason": f"fault suite: split hot bundle {bundle}",
                }
            )
        for i, bundle in enumerate(bundles[splits : splits + unloads]):
            src = snap.ownership[bundle]
            others = [b for b in brokers if b != src]
            dest = others[i % len(others)]
            actions.append(
                {
                    "kind": "unload",
                    "bundle": bundle,
                    "source_broker": src,
                    "destination_broker": dest,
                    "reason": f"fault suite: move {bundle} {src} -> {dest}",
                }
            )
        now = dt.datetime.now(dt.UTC)
        with session_scope(self.engine) as s:
            cluster_id = record_snapshot(
                s,
                snap,
                run_id=run_id,
                params=params.to_json(),
                work_dir=str(self.work),
                weights=resource_weights(params.lb_config()),
            )
            plan_id = repo.create_plan(
                s,
                run_id=run_id,
                cluster_id=cluster_id,
                status="pending",
                expires_at=now + (expires_in or dt.timedelta(hours=1)),
                dry_run=False,
                strategies={"shedder": "fault-suite"},
                config={},
                summary={"numBundleUnloads": unloads},
                decision={},
                actions=actions,
            )
            if approve:
                repo.decide_plan(s, plan_id=plan_id, decision="approved", decided_by="carol", comment="fault suite")
        self.plan_id = plan_id
        return plan_id

    # -- reading

    def plan(self, plan_id: str | None = None):
        with session_scope(self.engine) as s:
            return repo.get_plan(s, plan_id=plan_id or self.plan_id)

    # -- executing

    def job_env(self, **extra: str) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            {
                "PULSAR_REBALANCE_DATABASE_URL": self.db_url,
                "PULSAR_ADMIN_URL": self.sim.admin_url,
                "PULSAR_ADMIN_TIMEOUT": "5",
                **extra,
            }
        )
        return env

    def start_job(self, *, run_id: str | None = None, **env: str) -> subprocess.Popen:
        """The execute stage in its own process (``spark_jobs/execute_unload.py --without-spark``)."""
        return subprocess.Popen(
            [
                sys.executable,
                str(EXECUTE_JOB),
                "--run-id",
                run_id or self.run_id,
                "--work-dir",
                str(self.work),
                "--without-spark",
            ],
            env=self.job_env(**env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def run_job(self, *, timeout: float = 90, **env: str) -> subprocess.CompletedProcess:
        proc = self.start_job(**env)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    def retry_to_the_end(self, figures: Figures, *, faults: int, note: str, **env: str):
        """The last retry: run the job, check the invariants, record the figures, then require both."""
        done = self.run_job(**env)
        inv = self.check()
        figures.record(faults, inv, ok=done.returncode == 0, note=note)
        assert done.returncode == 0, done.stderr[-2000:]
        assert inv.ok, inv.problems
        return done, inv

    def wait_idle(self, deadline_s: float = 30) -> None:
        """Wait until the simulator handles no request (e.g. one held by injected latency)."""
        wait_for(lambda: self.sim.in_flight == 0, deadline_s, "simulator requests to drain")

    # -- invariants

    def check(self, plan_id: str | None = None, *, final: bool = True, since: int = 0) -> Invariants:
        """Compare the simulator's executed calls (from the ``since``-th on) with the recorded actions
        (see the module docstring)."""
        plan = self.plan(plan_id)
        executed = Counter(self.sim.executed()[since:])
        planned = {(a.kind, a.bundle): a for a in plan.actions}
        problems: list[str] = []
        duplicates = 0
        for key, n in executed.items():
            if key not in planned:
                duplicates += n
                problems.append(f"{key[0]} {key[1]} executed {n}x but is not in plan {plan.plan_id}")
            elif n > 1:
                duplicates += n - 1
                problems.append(f"{key[0]} {key[1]} executed {n} times")
        lost = 0
        for key, a in planned.items():
            ran = executed.get(key, 0) > 0
            applied = self._applied(a)
            if a.state == "completed" and not applied:
                lost += 1
                problems.append(
                    f"action {a.seq} ({a.kind} {a.bundle}) is completed but its effect is not on the cluster"
                )
            if ran and a.state != "completed" and (final or a.state not in ("in_progress", "failed")):
                lost += 1
                problems.append(f"action {a.seq} ({a.kind} {a.bundle}) ran on the cluster but is recorded {a.state}")
            if final and a.state in ("pending", "in_progress"):
                lost += 1
                problems.append(f"action {a.seq} ({a.kind} {a.bundle}) left {a.state}")
            if a.state in ("failed", "skipped") and not (a.error or "").strip():
                problems.append(f"action {a.seq} is {a.state} without a reason")
        if final and plan.status not in FINAL_PLAN_STATUSES:
            problems.append(f"plan {plan.plan_id} ended {plan.status}, not a final execution status")
        if final and plan.status in FINAL_PLAN_STATUSES and not plan.result:
            problems.append(f"plan {plan.plan_id} is {plan.status} without a recorded result")
        return Invariants(duplicates, lost, problems, Counter(a.state for a in plan.actions), plan.status)

    def _applied(self, action) -> bool:
        state = self.sim.state
        if action.kind == "unload":
            return action.bundle in state.owners() and state.owner(action.bundle) == action.destination_broker
        ns = action.namespace
        lo, hi = (int(x, 16) for x in action.bundle_range.split("_"))
        bounds = {int(b, 16) for b in state.bundles_data(ns)["boundaries"]}
        return {lo, hi, *action.boundaries} <= bounds

    def close(self) -> None:
        self.client.close()

    @staticmethod
    def wait_for(condition, deadline_s: float, what: str) -> None:
        wait_for(condition, deadline_s, what)

    @staticmethod
    def kill(proc: subprocess.Popen) -> None:
        kill(proc)


@pytest.fixture
def world_factory(pg_server, tmp_path):
    """``make(seed=42, brokers=5, db_url=None)`` -> a started :class:`World` (closed at the end)."""
    import uuid

    from pulsar_rebalance.store.engine import dispose_engines, migrate

    made: list[tuple[World, SimulatedPulsar]] = []

    def make(*, seed: int = 42, brokers: int = 5, db_url: str | None = None) -> World:
        if db_url is None:
            db_url = pg_server.create_database(f"f_{uuid.uuid4().hex[:12]}")
            migrate(db_url)
        sim = SimulatedPulsar(generate_cluster(seed=seed, brokers=brokers), ephemeral=True).start()
        w = World(sim, db_url, tmp_path / f"work-{len(made)}")
        made.append((w, sim))
        return w

    yield make
    for w, sim in made:
        w.close()
        sim.stop()
        dispose_engines(w.db_url)


def kill(proc: subprocess.Popen) -> None:
    """SIGKILL a job we started (no-op if it already ended)."""
    try:
        os.kill(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
