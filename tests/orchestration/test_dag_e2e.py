"""The whole DAG, end to end: real Airflow (dag.test), real spark-submit, real Postgres, real HTTP
against the simulated Pulsar cluster. The plan is approved (or rejected) from a second thread
through the CLI code path, exactly as an operator would.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500, method="thread")]


@pytest.fixture
def cluster(request):
    """The default (skewed) simulated cluster; ``@pytest.mark.parametrize("cluster", [1.0], indirect=True)``
    gives a balanced one (skew 1.0: every namespace equally hot, bundles spread round-robin)."""
    from pulsar_rebalance.simulator.generator import generate_cluster
    from pulsar_rebalance.simulator.server import SimulatedPulsar

    skew = getattr(request, "param", 5.0)
    with SimulatedPulsar(generate_cluster(seed=42, skew=skew), ephemeral=True) as sim:
        yield sim


def _wire(monkeypatch, admin_url: str, db_url: str, tmp_path: Path) -> None:
    """Airflow Connections (as env) pointing at the simulator and the fresh state DB."""
    import json

    monkeypatch.setenv("AIRFLOW_CONN_PULSAR_ADMIN_DEFAULT", json.dumps({"conn_type": "http", "host": admin_url}))
    monkeypatch.setenv(
        "AIRFLOW_CONN_PULSAR_REBALANCE_DB", json.dumps({"conn_type": "postgres", "extra": {"url": db_url}})
    )
    monkeypatch.setenv("PULSAR_REBALANCE_DATABASE_URL", db_url)  # for the CLI code path used by the approver
    monkeypatch.setenv("PULSAR_REBALANCE_WORK_DIR", str(tmp_path / "work"))


@pytest.fixture
def wired(cluster, db_url, tmp_path, monkeypatch):
    _wire(monkeypatch, cluster.admin_url, db_url, tmp_path)
    return cluster, db_url


def airflow_api(user: str = "alice", role: str = "admin"):
    """Airflow's real Core API app in-process (the same routes and plugins as the api-server) with a
    JWT for ``user``: what the Airflow UI's Required Actions page and our CLI talk to."""
    from airflow.api_fastapi.app import create_app, get_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
    from fastapi.testclient import TestClient

    client = TestClient(create_app(apps="core"))
    token = get_auth_manager().generate_jwt(SimpleAuthManagerUser(username=user, role=role))
    client.headers["Authorization"] = f"Bearer {token}"
    return client


GATED_PLAN = sa.text(
    "SELECT plan_id, gate, content_hash, cluster_id FROM plans WHERE status = 'pending' AND gate IS NOT NULL"
)


def _wait_for_gated_plan(engine, deadline: float):
    """The row (plan_id, gate, content_hash, cluster_id) of the plan once it waits at its Airflow gate."""
    while time.monotonic() < deadline:
        with engine.connect() as c:
            row = c.execute(GATED_PLAN).first()
        if row is not None:
            return row
        time.sleep(0.5)  # polling a condition, bounded by the deadline
    raise AssertionError("no plan reached its Airflow gate in time")


class Approver(threading.Thread):
    """Waits for this test's plan to reach its Airflow gate, then answers it as ``alice`` either in
    the UI's way (PATCH of the gate's HITL detail) or with ``pulsar-rebalance plans approve|reject``,
    which goes through the same REST call for a gated plan."""

    def __init__(self, db_url: str, verb: str, via: str = "ui") -> None:
        super().__init__(daemon=True)
        self.db_url, self.verb, self.via = db_url, verb, via
        self.plan_id, self.exit_code, self.error, self.response = None, None, None, None

    def run(self) -> None:
        from pulsar_rebalance.cli import airflow_api as api
        from pulsar_rebalance.cli import main

        engine = sa.create_engine(self.db_url)
        deadline = time.monotonic() + 900
        try:
            self.plan_id, gate, digest, _ = _wait_for_gated_plan(engine, deadline)
            client = airflow_api("alice")
            if self.via == "cli":
                original = api._client
                api._client = lambda environ: client  # the CLI's REST calls go to the in-process app
                try:
                    self.exit_code = main(["plans", self.verb, self.plan_id, "-m", f"{self.verb} in test"])
                finally:
                    api._client = original
            else:
                r = client.patch(
                    api.hitl_path(gate),
                    json={
                        "chosen_options": ["Approve" if self.verb == "approve" else "Reject"],
                        "params_input": {"comment": f"{self.verb} in test", "plan_hash": digest},
                    },
                )
                self.response = r
                self.exit_code = 0 if r.status_code == 200 else r.status_code
        except Exception as exc:  # surfaced by the test's assertions
            self.error = exc
        finally:
            engine.dispose()


def _run_dag(conf: dict):
    from airflow.dag_processing.dagbag import DagBag

    dag = DagBag(dag_folder=str(ROOT / "dags")).get_dag("pulsar_rebalance")
    dr = dag.test(run_conf=conf)
    return dr, {ti.task_id: ti.state for ti in dr.get_task_instances()}


def _q(url: str, sql: str, **params):
    engine = sa.create_engine(url)
    try:
        with engine.connect() as c:
            return [dict(r._mapping) for r in c.execute(sa.text(sql), params)]
    finally:
        engine.dispose()


def test_approved_plan_executes_exactly_as_planned(airflow_db, wired):
    sim, db_url = wired
    before = sim.state.snapshot()
    approver = Approver(db_url, "approve")
    approver.start()
    dr, states = _run_dag({"shedding_strategy": "ThresholdShedder", "approval_timeout_minutes": 30})
    approver.join(timeout=30)
    assert approver.error is None and approver.exit_code == 0, approver.error
    assert states == {
        t: "success"
        for t in (
            "collect_load",
            "compute_usage",
            "detect_overload",
            "plan_split",
            "await_approval",
            "wait_for_window",
            "execute_unload",
        )
    }
    assert dr.state == "success"

    plan = _q(db_url, "SELECT * FROM plans WHERE plan_id = :p", p=approver.plan_id)[0]
    assert plan["status"] == "executed"
    actions = _q(db_url, "SELECT * FROM plan_actions WHERE plan_id = :p ORDER BY seq", p=approver.plan_id)
    unloads = [a for a in actions if a["kind"] == "unload"]
    splits = [a for a in actions if a["kind"] == "split"]
    assert unloads, "the default simulated cluster must give the first run unloads to do"
    assert all(a["state"] == "completed" and a["attempts"] == 1 for a in actions)

    # The simulator's ownership changed exactly as planned, and nothing else moved.
    after = sim.state.snapshot()
    own_before, own_after = _ownership(before), _ownership(after)
    moved = {a["bundle"]: a["destination_broker"] for a in unloads}
    split_parents = {a["bundle"]: a for a in splits}
    for bundle, owner in own_before.items():
        if bundle in moved:
            assert own_after[bundle] == moved[bundle]
        elif bundle in split_parents:
            assert bundle not in own_after  # replaced by its children: they stay on the owner unless moved
            a = split_parents[bundle]
            lo, hi = (int(x, 16) for x in a["bundle_range"].split("_"))
            cuts = [lo, *a["boundaries"], hi]
            for c_lo, c_hi in zip(cuts, cuts[1:]):
                child = f"{a['namespace']}/0x{c_lo:08x}_0x{c_hi:08x}"
                assert own_after[child] == moved.get(child, owner)
        else:
            assert own_after[bundle] == owner, f"{bundle} moved without being in the plan"
    assert set(own_after) - set(own_before) == {
        f"{a['namespace']}/0x{c_lo:08x}_0x{c_hi:08x}"
        for a in splits
        for cuts in [[int(a["bundle_range"][:10], 16), *a["boundaries"], int(a["bundle_range"][11:], 16)]]
        for c_lo, c_hi in zip(cuts, cuts[1:])
    }

    # The max broker usage went down (measured after execution, not just predicted).
    result = plan["result"]
    assert result["max_usage_after"] < result["max_usage_before"]

    # Postgres holds the old and new bundle ranges and the ownership history.
    for a in splits:
        parent = _q(
            db_url,
            "SELECT * FROM bundle_ranges WHERE namespace = :n AND range_name = :r",
            n=a["namespace"],
            r=a["bundle_range"],
        )[0]
        assert parent["retired_at"] is not None
        children = _q(
            db_url, "SELECT range_name FROM bundle_ranges WHERE parent_id = :i AND retired_at IS NULL", i=parent["id"]
        )
        assert len(children) == len(a["boundaries"]) + 1
    for a in unloads:
        hist = _q(
            db_url,
            "SELECT broker_id, valid_to, cause_action_id, cause FROM ownership WHERE bundle = :b ORDER BY valid_from",
            b=a["bundle"],
        )
        if a["bundle"] in own_before:  # a bundle that existed at collect time: old owner closed, new one open
            assert [h["broker_id"] for h in hist] == [a["source_broker"], a["destination_broker"]]
            assert hist[0]["valid_to"] is not None
        else:  # a split child: first recorded on its new owner, caused by the unload
            assert [h["broker_id"] for h in hist][-1] == a["destination_broker"]
        assert hist[-1]["valid_to"] is None and hist[-1]["cause_action_id"] == a["id"]
        assert "alice" in hist[-1]["cause"]
        # "where was bundle X at time T and why did it move" is one query over the view
        why = _q(
            db_url,
            "SELECT broker_id, approved_by, action_reason FROM bundle_ownership_history "
            "WHERE bundle = :b AND valid_from <= now() AND (valid_to IS NULL OR valid_to > now())",
            b=a["bundle"],
        )
        assert why == [{"broker_id": a["destination_broker"], "approved_by": "alice", "action_reason": a["reason"]}]
    approval = _q(db_url, "SELECT * FROM approvals WHERE plan_id = :p", p=approver.plan_id)[0]
    assert approval["decision"] == "approved" and approval["decided_by"] == "alice"
    assert approval["via"] == "airflow-gate" and approval["plan_hash"] == plan["content_hash"]
    assert approval["comment"] == "approve in test"


def test_approved_dry_run_executes_without_one_admin_call(airflow_db, wired, capfd):
    """Issue 16: a dry-run plan, approved at the gate, used to fail execute_unload (skipped needs a
    reason), retry, fail the run and stay 'executing'. Through the real DAG it now ends green: every
    action skipped with what it would have done, no split/unload (nor any write) sent to Pulsar."""
    sim, db_url = wired
    before = sim.state.snapshot()
    approver = Approver(db_url, "approve")
    approver.start()
    sim.reset_request_log()
    dr, states = _run_dag({"shedding_strategy": "ThresholdShedder", "approval_timeout_minutes": 30, "dry_run": True})
    approver.join(timeout=30)
    assert approver.error is None and approver.exit_code == 0, approver.error
    assert dr.state == "success" and set(states.values()) == {"success"}, states
    assert sim.executed() == []  # no split or unload reached Pulsar
    assert not [r for r in sim.requests() if r.method not in ("GET", "HEAD")]  # collect only reads
    assert _ownership(sim.state.snapshot()) == _ownership(before)
    assert sim.state.snapshot()["namespaces"] == before["namespaces"]

    plan = _q(db_url, "SELECT * FROM plans WHERE plan_id = :p", p=approver.plan_id)[0]
    assert plan["status"] == "executed" and plan["dry_run"] is True and plan["result"]["dry_run"] is True
    actions = _q(db_url, "SELECT * FROM plan_actions WHERE plan_id = :p ORDER BY seq", p=approver.plan_id)
    assert actions, "the default simulated cluster must give the first run actions to do"
    for a in actions:
        bundle = f"{a['namespace']}/{a['bundle_range']}"
        want = (
            f"dry run: would unload {bundle} from {a['source_broker']} to {a['destination_broker']}"
            if a["kind"] == "unload"
            else f"dry run: would split {bundle} ({a['split_algorithm'] or 'planned boundaries'})"
        )
        assert (a["state"], a["error"], a["attempts"]) == ("skipped", want, 0)
    assert plan["result"]["skipped"] == len(actions) and plan["result"]["failed"] == 0
    assert _q(db_url, "SELECT status FROM runs WHERE run_id = :r", r=plan["run_id"])[0]["status"] == "succeeded"
    out, err = capfd.readouterr()
    assert f"DRY RUN of plan {approver.plan_id} finished: executed (dry run)" in out + err  # the task log


class FourEyes(Approver):
    """For a plan that needs two approvers: alice approves in the UI's way; the same Required Action
    opens again (the task resumed, recorded her vote and asked again); alice's second approval is refused
    before Airflow stores it; then bob answers with ``pulsar-rebalance plans <verb>`` (through Airflow)."""

    def run(self) -> None:
        from pulsar_rebalance.cli import airflow_api as api
        from pulsar_rebalance.cli import main

        engine = sa.create_engine(self.db_url)
        deadline = time.monotonic() + 900
        self.steps = []
        try:
            self.plan_id, gate, digest, _ = _wait_for_gated_plan(engine, deadline)
            alice, bob = airflow_api("alice"), airflow_api("bob")
            answer = {
                "chosen_options": ["Approve"],
                "params_input": {"comment": "first pair of eyes", "plan_hash": digest},
            }
            self.steps.append(("alice", alice.patch(api.hitl_path(gate), json=answer).status_code))
            while time.monotonic() < deadline:  # the gate re-opens once the task has recorded alice's vote
                detail = alice.get(api.hitl_path(gate)).json()
                if not detail.get("response_received") and detail.get("responded_by_user") is None:
                    break
                time.sleep(0.5)  # polling a condition, bounded by the deadline
            again = alice.patch(api.hitl_path(gate), json=answer)
            self.steps.append(("alice again", again.status_code, again.json().get("detail")))
            self.body_after_refusal = alice.get(api.hitl_path(gate)).json().get("body") or ""
            original = api._client
            api._client = lambda environ: bob  # bob's CLI talks to the in-process Airflow app
            try:
                self.exit_code = main(["plans", self.verb, self.plan_id, "--by", "bob", "-m", f"{self.verb} in test"])
            finally:
                api._client = original
        except Exception as exc:  # surfaced by the test's assertions
            self.error = exc
        finally:
            engine.dispose()


def test_rejected_plan_changes_nothing(airflow_db, wired):
    """A plan that needs two approvers (``required_approvals=2``): alice approves, the gate asks again,
    alice cannot approve twice, bob rejects: nothing changes on the cluster."""
    sim, db_url = wired
    before = sim.state.snapshot()
    approver = FourEyes(db_url, "reject", via="cli")
    approver.start()
    dr, states = _run_dag(
        {"shedding_strategy": "ThresholdShedder", "approval_timeout_minutes": 30, "required_approvals": 2}
    )
    approver.join(timeout=30)
    assert approver.error is None and approver.exit_code == 0, (approver.error, approver.steps)
    assert approver.steps[0] == ("alice", 200)
    assert approver.steps[1][:2] == ("alice again", 409) and "already has your approval (alice)" in approver.steps[1][2]
    # the UI's toast says only "Conflict": the gate's own text says why, and who approved so far
    body = approver.body_after_refusal
    assert body.startswith("**Answer refused** (alice") and "already has your approval (alice)" in body, body
    assert "Approved so far: 1 of 2** — alice" in body and "alice cannot approve again" in body, body
    votes = _q(db_url, "SELECT voter, via, comment FROM approval_votes WHERE plan_id = :p", p=approver.plan_id)
    assert votes == [{"voter": "alice", "via": "airflow-gate", "comment": "first pair of eyes"}]
    assert states["await_approval"] == "skipped" and states["execute_unload"] == "skipped"
    assert dr.state == "success"  # a rejection is a decision, not a failure
    assert _ownership(sim.state.snapshot()) == _ownership(before)
    assert sim.state.snapshot()["namespaces"] == before["namespaces"]
    plan = _q(db_url, "SELECT status FROM plans WHERE plan_id = :p", p=approver.plan_id)[0]
    assert plan["status"] == "rejected"
    approval = _q(db_url, "SELECT * FROM approvals WHERE plan_id = :p", p=approver.plan_id)[0]
    assert (approval["decided_by"], approval["via"]) == ("bob", "airflow-gate")  # the CLI answered through Airflow
    assert (
        _q(
            db_url,
            "SELECT count(*) AS n FROM plan_actions WHERE plan_id = :p AND state <> 'pending'",
            p=approver.plan_id,
        )[0]["n"]
        == 0
    )


@pytest.mark.parametrize("cluster", [1.0], indirect=True)
def test_balanced_cluster_ends_green_without_waiting_for_approval(airflow_db, wired):
    sim, db_url = wired
    before = sim.state.snapshot()
    dr, states = _run_dag(
        {"shedding_strategy": "ThresholdShedder", "approval_timeout_minutes": 30}
    )  # nobody approves: must not wait
    assert dr.state == "success"
    assert states["plan_split"] == "success"
    assert states["await_approval"] == "skipped" and states["execute_unload"] == "skipped"
    plan = _q(db_url, "SELECT plan_id, status, summary FROM plans")[0]
    assert plan["status"] == "empty" and plan["summary"]["decision"]["reason"] == "Balanced"
    assert _q(db_url, "SELECT status FROM runs")[0]["status"] == "nothing_to_do"
    assert _q(db_url, "SELECT count(*) AS n FROM approvals")[0]["n"] == 0
    assert _ownership(sim.state.snapshot()) == _ownership(before)


class Superseder(Approver):
    """Waits for this test's plan to reach its gate, supersedes it as a newer plan of the cluster would,
    then reads Required Actions the way the Airflow UI does (which closes the superseded plan's gate)."""

    def run(self) -> None:
        from pulsar_rebalance.cli import airflow_api as api
        from pulsar_rebalance.store import repository as repo
        from pulsar_rebalance.store.engine import make_engine, session_scope

        engine = sa.create_engine(self.db_url)
        deadline = time.monotonic() + 900
        try:
            self.plan_id, gate, _, cluster_id = _wait_for_gated_plan(engine, deadline)
            with session_scope(make_engine(self.db_url)) as s:
                repo.supersede_plans(s, cluster_id=cluster_id, by_plan_id="p-newer", reason="a newer snapshot")
            viewer = airflow_api("alice")
            self.pending = []
            while time.monotonic() < deadline:  # what Browse -> Required Actions lists, until the gate leaves it
                listed = viewer.get("/api/v2/dags/~/dagRuns/~/hitlDetails", params={"response_received": False})
                self.pending = [d["task_instance"]["dag_run_id"] for d in listed.json()["hitl_details"]]
                if gate["run_id"] not in self.pending:
                    break
                time.sleep(0.5)  # polling a condition, bounded by the deadline
            self.detail = viewer.get(api.hitl_path(gate)).json()
        except Exception as exc:  # surfaced by the test's assertions
            self.error = exc
        finally:
            engine.dispose()


def test_a_superseded_plan_leaves_required_actions_and_its_gate_says_by_which_plan(airflow_db, wired):
    sim, db_url = wired
    before = sim.state.snapshot()
    superseder = Superseder(db_url, "approve")
    superseder.start()
    dr, states = _run_dag({"shedding_strategy": "ThresholdShedder", "approval_timeout_minutes": 30})
    superseder.join(timeout=30)
    assert superseder.error is None, superseder.error
    assert superseder.plan_id and dr.run_id not in superseder.pending
    detail = superseder.detail
    assert detail["responded_by_user"]["name"] == "pulsar-rebalance (system)" and detail["chosen_options"] == ["Reject"]
    assert f"plan {superseder.plan_id} was superseded by plan p-newer" in detail["params_input"]["comment"]
    assert detail["body"].startswith("**Closed by pulsar-rebalance**: plan ")  # the gate itself says why
    assert states["await_approval"] == "skipped" and states["execute_unload"] == "skipped"
    assert dr.state == "success"
    plan = _q(db_url, "SELECT status, gate FROM plans WHERE plan_id = :p", p=superseder.plan_id)[0]
    assert plan["status"] == "superseded" and plan["gate"]["closed_at"]
    assert "superseded by plan p-newer" in plan["gate"]["closed_because"]
    events = _q(db_url, "SELECT event FROM audit_log WHERE plan_id = :p ORDER BY id", p=superseder.plan_id)
    assert [e["event"] for e in events][-1] == "plan.gate_closed"
    assert _ownership(sim.state.snapshot()) == _ownership(before)


def _ownership(snapshot: dict) -> dict[str, str]:
    return dict(snapshot["owners"])


def test_whole_dag_runs_on_a_spark_standalone_cluster(airflow_db, wired, tmp_path, monkeypatch):
    """A real Spark standalone master + two workers (loopback, ephemeral ports), the DAG's spark_default pointed
    at it: every Spark task is submitted to ``spark://127.0.0.1:PORT`` and gets executors on the workers."""
    import json
    import sys

    sys.path.insert(0, str(ROOT / "tests"))  # the helper module next to conftest.py (importlib import mode)
    from spark_standalone import StandaloneCluster

    sim, db_url = wired
    monkeypatch.delenv("PULSAR_REBALANCE_SPARK_JIT")  # the JVM's default JIT here (conftest sets C1 for the rest)
    # what the workers need: this Python (PYSPARK_PYTHON) with this checkout's src (PYTHONPATH, set by
    # conftest and inherited), and the run's work directory, which is a path on this machine's disk
    with StandaloneCluster(tmp_path / "spark-cluster", workers=2, worker_cores=1, worker_memory="1g") as spark_cluster:
        assert [w["state"] for w in spark_cluster.status()["workers"]] == ["ALIVE", "ALIVE"]
        monkeypatch.setenv(
            "AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": spark_cluster.master_url})
        )
        approver = Approver(db_url, "approve")
        approver.start()
        dr, states = _run_dag({"approval_timeout_minutes": 30})
        approver.join(timeout=30)
        status = spark_cluster.status()
    assert approver.error is None and approver.exit_code == 0, approver.error
    assert dr.state == "success" and set(states.values()) == {"success"}, states
    assert _q(db_url, "SELECT status FROM plans WHERE plan_id = :p", p=approver.plan_id)[0]["status"] == "executed"
    apps = status["completedapps"]
    splits = _q(
        db_url, "SELECT count(*) AS n FROM plan_actions WHERE plan_id = :p AND kind = 'split'", p=approver.plan_id
    )[0]["n"]
    # the jobs that read topic-level data run on the master and get executors: collect (per-broker fetch
    # tasks), compute_usage (crc32 range join), detect_overload (the default GlobalPlanner reads the busiest
    # bundles' topics), plan_split when the plan splits (its topics)
    on_cluster = ("collect_load", "compute_usage", "detect_overload") + (("plan_split",) if splits else ())
    for job in on_cluster:
        ran = [a for a in apps if job in a["name"]]
        assert ran and all(a["cores"] >= 1 for a in ran), (job, apps)  # submitted to the master, got executors
    # the others only write small outputs to the (local) work dir: no SparkSession, so no application
    for job in {"plan_split", "execute_unload"} - set(on_cluster):
        assert not [a for a in apps if job in a["name"]], (job, apps)


def test_the_default_planner_relieves_a_benchmark_scenario_under_a_convex_cpu(
    airflow_db, db_url, tmp_path, monkeypatch
):
    """The product on what the benchmarks measure: the balance benchmark's one-hot-broker scenario served over
    the admin API under the convex-CPU load model (the brokers report what the closed loop's do), planned by
    the DAG's default params, approved, executed; then the brokers' own reports."""
    from pulsar_rebalance.simulator.generator import scenario_cluster
    from pulsar_rebalance.simulator.server import SimulatedPulsar

    state = scenario_cluster("one-hot-broker", seed=1, load_model="convex-cpu", port_base=0)
    with SimulatedPulsar(state, ephemeral=True) as sim:
        _wire(monkeypatch, sim.admin_url, db_url, tmp_path)

        def reported() -> dict[str, float]:
            return {b: sim.state.load_report(b)["maxResourceUsage"] for b in sim.broker_ids}

        before = reported()
        approver = Approver(db_url, "approve")
        approver.start()
        dr, states = _run_dag({"approval_timeout_minutes": 30})
        approver.join(timeout=30)
        after = reported()
    assert approver.error is None and approver.exit_code == 0, approver.error
    assert dr.state == "success" and set(states.values()) == {"success"}, states
    plan = _q(db_url, "SELECT * FROM plans WHERE plan_id = :p", p=approver.plan_id)[0]
    assert plan["status"] == "executed"
    assert plan["summary"]["strategies"]["shedding"] == "GlobalPlanner"
    hot = max(before, key=before.__getitem__)
    assert before[hot] > 0.85  # convex: the hot broker reports more than its traffic's linear share
    # measured on the brokers' own reports (the convex model's), not the planner's prediction: the hot broker
    # is relieved below the overload threshold and no broker is pushed above it
    assert after[hot] < 0.85 and max(after.values()) < 0.85, (before, after)
    assert max(after.values()) < max(before.values()) - 0.1


def test_the_default_planner_leaves_a_balanced_noisy_benchmark_cluster_alone(airflow_db, db_url, tmp_path, monkeypatch):
    """The balance benchmark's steady-with-noise scenario (balanced, 3 % CPU noise on every report) served over
    the admin API, two DAG runs with the default params: no plan moves anything, nobody is asked to approve."""
    from pulsar_rebalance.simulator.generator import scenario_cluster
    from pulsar_rebalance.simulator.server import SimulatedPulsar

    state = scenario_cluster("steady-with-noise", seed=1, port_base=0)
    assert state.cpu_noise == 0.03
    with SimulatedPulsar(state, ephemeral=True) as sim:
        _wire(monkeypatch, sim.admin_url, db_url, tmp_path)
        before = _ownership(sim.state.snapshot())
        for _ in range(2):  # the second run plans with the first's memory (smoothed reports, noise measured)
            dr, states = _run_dag({"approval_timeout_minutes": 30})  # nobody approves: must not wait
            assert dr.state == "success"
            assert states["await_approval"] == "skipped" and states["execute_unload"] == "skipped", states
        assert sim.executed() == []
        assert _ownership(sim.state.snapshot()) == before
    plans = _q(db_url, "SELECT status, summary FROM plans ORDER BY created_at")
    assert [p["status"] for p in plans] == ["empty", "empty"], plans
    assert all(p["summary"]["strategies"]["shedding"] == "GlobalPlanner" for p in plans)
    assert _q(db_url, "SELECT count(*) AS n FROM approvals")[0]["n"] == 0
