"""Fixtures for the plan pages: a state DB holding plans made by the real planning code.

``seeded_db`` builds plans with ``pipeline.planning.build_plan`` (the function plan_split runs) on
hand-made load reports and stores them with the repository, so the pages render what planning
really stores, without Spark. The browser test (``test_browser.py``) makes its plan with the real
pipeline stages instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest


def _report(cpu: float, bw: float, bundles: dict[str, tuple[float, float, int]]) -> dict:
    last = {
        b: {
            "msgRateIn": r / 2,
            "msgRateOut": r / 2,
            "msgThroughputIn": t / 2,
            "msgThroughputOut": t / 2,
            "consumerCount": 2 * n,
            "producerCount": n,
            "topics": n,
            "cacheSize": 0,
        }
        for b, (r, t, n) in bundles.items()
    }
    rate = sum(r for r, _, _ in bundles.values())
    thr = sum(t for _, t, _ in bundles.values())
    return {
        "cpu": {"usage": cpu, "limit": 100.0},
        "memory": {"usage": 10.0, "limit": 100.0},
        "directMemory": {"usage": 5.0, "limit": 100.0},
        "bandwidthIn": {"usage": bw, "limit": 100.0},
        "bandwidthOut": {"usage": bw, "limit": 100.0},
        "msgRateIn": rate / 2,
        "msgRateOut": rate / 2,
        "msgThroughputIn": thr / 2,
        "msgThroughputOut": thr / 2,
        "lastStats": last,
        "numBundles": len(bundles),
        "bundles": list(bundles),
    }


# broker-1's moved bundle carries a quarter of its traffic (900 of 3600 msg/s, 9 of 36 MiB/s), so moving
# it to broker-2 (20 % -> about 41 %) passes the do-no-harm guard. Had it carried three quarters,
# broker-2 would end at 84 %, above the target band: the guard would cut the move and the plan be empty.
REPORTS = {
    "broker-1:8080": _report(
        85.0,
        80.0,
        {"t/ns/0x00000000_0x40000000": (900.0, 9 * 2**20, 12), "t/ns/0x40000000_0x80000000": (2700.0, 27 * 2**20, 4)},
    ),
    "broker-2:8080": _report(20.0, 15.0, {"t/ns/0x80000000_0xc0000000": (200.0, 2**20, 3)}),
    "broker-3:8080": _report(25.0, 20.0, {"t/ns/0xc0000000_0xffffffff": (250.0, 2**20, 3)}),
}


@dataclass(frozen=True)
class Seeded:
    url: str
    pending: str  # a pending plan: one unload
    executed: str  # an executed plan with an approval and measured usage


def planned_move():
    """``(params, decision, draft)``: the plan the real planning code (``build_plan``) makes of ``REPORTS``
    for one unload of broker-1's bundle to broker-2, as plan_split would store it."""
    from pulsar_rebalance.pipeline.params import RunParams
    from pulsar_rebalance.pipeline.planning import build_plan

    params = RunParams.from_json({})
    decision = {
        "cycle": {
            "label": "Success",
            "reason": "Overloaded",
            "splits": [],
            "unloads": [
                {
                    "broker": "broker-1:8080",
                    "bundle": "t/ns/0x00000000_0x40000000",
                    "destination": "broker-2:8080",
                    "reason": "Overloaded: broker-1:8080 usage 0.85 >= avg 0.43 + threshold 0.10",
                }
            ],
        }
    }
    draft = build_plan(
        decision=decision,
        params=params,
        reports=REPORTS,
        topics_by_bundle={},
        ownership={b: br for br, r in REPORTS.items() for b in r["lastStats"]},
    )
    return params, decision, draft


def store_planned_move(
    s,
    *,
    run_id: str,
    cluster_id: int,
    expires_at: datetime,
    required_approvals: int = 1,
    warnings: tuple[str, ...] = (),
) -> str:
    """Start run ``run_id`` of the cluster and store :func:`planned_move`'s pending plan for it, as
    planning does (in the caller's transaction); returns the plan id."""
    from pulsar_rebalance.store import repository as repo

    params, decision, draft = planned_move()
    if warnings:
        draft.summary["warnings"] = list(warnings)
    repo.start_run(s, run_id=run_id, cluster_id=cluster_id, params=params.to_json())
    return repo.create_plan(
        s,
        run_id=run_id,
        cluster_id=cluster_id,
        status="pending",
        expires_at=expires_at,
        dry_run=False,
        strategies=draft.summary["strategies"],
        config={"loadBalancerSheddingEnabled": False},
        summary=draft.summary,
        decision=decision["cycle"],
        actions=draft.actions,
        required_approvals=required_approvals,
    )


@pytest.fixture
def seeded_db(db_url, monkeypatch) -> Iterator[Seeded]:
    from pulsar_rebalance.store import repository as repo
    from pulsar_rebalance.store.engine import dispose_engines, make_engine, session_scope

    engine = make_engine(db_url)
    now = datetime.now(UTC)
    ids = []
    with session_scope(engine) as s:
        cid = repo.get_or_create_cluster(s, name="sim-cluster", admin_url="http://pulsar:8080")
    for run_id in ("scheduled__2026-11-23T10:00:00+00:00", "manual__2026-11-23T11:00:00+00:00"):
        with session_scope(engine) as s:
            ids.append(
                store_planned_move(
                    s,
                    run_id=run_id,
                    cluster_id=cid,
                    expires_at=now + timedelta(hours=1),
                    required_approvals=len(ids) + 1,  # the pending one needs a second approver
                    warnings=("2 topics were reported under a bundle their hash does not fall into",),
                )
            )
        if len(ids) == 1:  # execute the first before the second supersedes it
            with session_scope(engine) as s:
                repo.decide_plan(
                    s,
                    plan_id=ids[0],
                    decision="approved",
                    decided_by="alice",
                    comment="off-peak, <script>alert(1)</script> go",
                )
                repo.set_plan_status(s, plan_id=ids[0], status="executing")
                for a in repo.get_plan(s, plan_id=ids[0]).actions:
                    repo.transition_action(s, action_id=a.id, to="in_progress")
                    repo.transition_action(s, action_id=a.id, to="completed")
                repo.set_plan_status(
                    s,
                    plan_id=ids[0],
                    status="executed",
                    result={
                        "max_usage_after": 0.52,
                        "broker_usage_after": {"broker-1:8080": 0.52, "broker-2:8080": 0.47, "broker-3:8080": 0.25},
                    },
                )
    with session_scope(engine) as s:  # the pending plan has one of its two approvals
        repo.decide_plan(s, plan_id=ids[1], decision="approved", decided_by="carol", comment="first of two")
    executed, pending = ids
    monkeypatch.setenv("PULSAR_REBALANCE_DATABASE_URL", db_url)
    yield Seeded(url=db_url, pending=pending, executed=executed)
    dispose_engines(db_url)


# ------------------------------------------------------------------ a real Airflow for the browser test

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
USERS = {
    "admin": "admin",
    "viewer": "viewer",
    "bob": "admin",
}  # user -> SimpleAuthManager role (the password is the name too)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class AirflowStack:
    """Airflow components as real subprocesses sharing one environment (metadata DB on the embedded Postgres).

    ``start("api-server")`` now; ``start("scheduler")`` and ``start("dag-processor")`` (plus the gate
    being answered in the browser) are what the approve-and-execute step adds. ``stop()`` ends every
    process it started, children first (Airflow components do not forward SIGTERM to their workers),
    SIGKILL after a grace period, even when a test failed.
    """

    def __init__(self, home, env: dict[str, str]) -> None:
        self.home = home
        self.env = env
        self.port = int(env["AIRFLOW__API__PORT"])
        self.url = f"http://127.0.0.1:{self.port}"
        self.procs: dict[str, object] = {}

    def run(self, *args: str, timeout: float) -> None:
        import subprocess

        log = self.home / f"airflow-{'-'.join(args)}.log"
        with open(log, "ab") as fh:
            done = subprocess.run(
                ["airflow", *args],
                env=self.env,
                stdout=fh,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                timeout=timeout,
            )
        assert done.returncode == 0, f"airflow {' '.join(args)} failed; see {log}:\n{log.read_text()[-3000:]}"

    def start(self, component: str, *args: str, env: dict[str, str] | None = None) -> None:
        import subprocess

        log = open(self.home / f"{component}.log", "ab")
        self.procs[component] = subprocess.Popen(
            ["airflow", component, *args],
            env={**self.env, **(env or {})},
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )

    def wait_healthy(self, timeout: float = 180.0) -> None:
        import time

        import httpx

        deadline = time.monotonic() + timeout
        proc = self.procs["api-server"]
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise AssertionError(f"api-server exited with {proc.returncode}:\n{self.log('api-server')[-3000:]}")
            try:
                if httpx.get(f"{self.url}/api/v2/monitor/health", timeout=3).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise AssertionError(f"api-server not healthy after {timeout}s:\n{self.log('api-server')[-3000:]}")

    def log(self, component: str) -> str:
        path = self.home / f"{component}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def token(self, user: str) -> str:
        import httpx

        r = httpx.post(f"{self.url}/auth/token", json={"username": user, "password": user}, timeout=30)
        assert r.status_code == 201, r.text
        return r.json()["access_token"]

    def stop(self, *components: str, grace: float = 20.0) -> None:
        """Stop ``components`` (default: all started), newest first."""
        import os
        import signal

        import psutil

        for name in components or reversed(list(self.procs)):
            proc = self.procs.pop(name, None)
            if proc is None or proc.poll() is not None:
                continue
            try:
                children = psutil.Process(proc.pid).children(recursive=True)
            except psutil.NoSuchProcess:
                children = []
            for child in children:
                try:
                    child.send_signal(signal.SIGTERM)
                except psutil.NoSuchProcess:
                    pass
            proc.send_signal(signal.SIGTERM)
            _, alive = psutil.wait_procs([*children], timeout=grace)
            try:
                proc.wait(timeout=grace)
            except Exception:
                pass
            for p in alive:
                try:
                    p.kill()
                except psutil.NoSuchProcess:
                    pass
            try:  # whatever is left of its process group (it was started in its own session)
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait(timeout=30)


@pytest.fixture(scope="module")
def state_db(new_database):
    """The product's state DB for the browser tests (module scope: the api-server reads it all along)."""
    with new_database("ui") as url:
        yield url


@pytest.fixture(scope="module")
def airflow_stack(pg_server, state_db, tmp_path_factory):
    """A real ``airflow api-server`` with this repo's plugin and DAG, SimpleAuthManager users admin and viewer."""
    import json
    import os
    import secrets
    import sys
    import uuid
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    home = tmp_path_factory.mktemp("airflow-ui-home")
    (home / "passwords.json").write_text(json.dumps({u: u for u in USERS}))
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(root / "dags"),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(root / "plugins"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": ",".join(f"{u}:{r}" for u, r in USERS.items()),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "passwords.json"),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": pg_server.create_database(f"af_{uuid.uuid4().hex[:10]}"),
            "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(48),
            "AIRFLOW__API__PORT": str(port),
            "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
            "AIRFLOW_CONN_PULSAR_REBALANCE_DB": json.dumps({"conn_type": "postgres", "extra": {"url": state_db}}),
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
            "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
            "PYTHONPATH": str(root / "src"),
            "PULSAR_REBALANCE_SCHEDULE": "",  # triggered runs only: unpausing must not start a scheduled run
            "PULSAR_REBALANCE_WORK_DIR": str(home / "work"),
        }
    )
    env.pop("PULSAR_REBALANCE_DATABASE_URL", None)  # the plugin must find the DB through the Connection
    env.pop("DATABASE_URL", None)
    stack = AirflowStack(home, env)
    try:
        stack.run("db", "migrate", timeout=300)
        stack.start("api-server", "--port", str(port))
        stack.wait_healthy()
        yield stack
    finally:
        stack.stop()


@pytest.fixture(scope="module")
def pipeline_plan(spark, state_db, tmp_path_factory):
    """A pending plan made by the real pipeline stages (real Spark, the HTTP simulator, the state DB)."""
    from pulsar_rebalance.pipeline import stages
    from pulsar_rebalance.pipeline.context import JobContext
    from pulsar_rebalance.pulsar_admin import PulsarAdminClient
    from pulsar_rebalance.simulator.generator import generate_cluster
    from pulsar_rebalance.simulator.server import SimulatedPulsar
    from pulsar_rebalance.store.engine import make_engine

    engine = make_engine(state_db)
    with SimulatedPulsar(generate_cluster(seed=42), ephemeral=True) as sim:
        client = PulsarAdminClient.from_url(sim.admin_url)
        ctx = JobContext("manual__2026-11-23T12:00:00+00:00", str(tmp_path_factory.mktemp("work")))
        params = {"shedding_strategy": "ThresholdShedder", "approval_timeout_minutes": 600}
        stages.stage_collect(spark, ctx, params_doc=params, engine=engine, client=client)
        stages.stage_compute_usage(spark, ctx, engine=engine)
        stages.stage_detect(spark, ctx, engine=engine)
        planned = stages.stage_plan(spark, ctx, engine=engine)
    assert planned["status"] == "pending", planned
    return planned["plan_id"]


@pytest.fixture
def browser():
    """Headless Chromium (Debian's package) through its chromedriver."""
    from pathlib import Path

    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).exists()]
    assert not missing, f"{missing} not found: the browser test needs Debian's chromium and chromium-driver packages"
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1440,1000",
        "--hide-scrollbars",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def simulated_cluster():
    """The cluster ``dag_workers`` serves (a test module overrides it for another shape)."""
    from pulsar_rebalance.simulator.generator import generate_cluster

    return generate_cluster(seed=42)


@pytest.fixture(scope="module")
def dag_workers(airflow_stack, simulated_cluster):
    """The scheduler and dag-processor next to the api-server, and a simulated cluster for the DAG's tasks:
    with them a triggered ``pulsar_rebalance`` run really runs (LocalExecutor, spark-submit per task)."""
    import json

    from pulsar_rebalance.simulator.server import SimulatedPulsar

    with SimulatedPulsar(simulated_cluster, ephemeral=True) as sim:
        env = {"AIRFLOW_CONN_PULSAR_ADMIN_DEFAULT": json.dumps({"conn_type": "http", "host": sim.admin_url})}
        try:
            airflow_stack.start("dag-processor", env=env)
            airflow_stack.start("scheduler", env=env)
            yield sim
        finally:
            airflow_stack.stop("scheduler", "dag-processor")
