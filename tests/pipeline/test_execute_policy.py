"""execute_unload's safety policy against the simulator and a real Postgres (no Spark needed):
stale plans, dead executions (interrupted, resume, abort), the stop switch, caps, load drift,
Pulsar's own shedding, and content verification. Admin calls are counted on the client."""

from __future__ import annotations

import datetime as dt
import socket

import pytest

from pulsar_rebalance.errors import ExecutionError, StalePlanError
from pulsar_rebalance.pipeline.execute import ExecutionPolicy, execute_plan
from pulsar_rebalance.pulsar_admin import PulsarAdminClient
from pulsar_rebalance.simulator.generator import generate_cluster
from pulsar_rebalance.simulator.server import SimulatedPulsar
from pulsar_rebalance.store import repository as repo
from pulsar_rebalance.store.engine import make_engine, session_scope

pytestmark = pytest.mark.timeout(300)


class CountingClient(PulsarAdminClient):
    """The real admin client, counting the calls that change the cluster."""

    unloads: list[str]

    def unload_bundle(self, namespace, bundle, *, destination_broker=None):
        self.unloads.append(f"{namespace}/{bundle}")
        return super().unload_bundle(namespace, bundle, destination_broker=destination_broker)


@pytest.fixture
def world(db_url):
    with SimulatedPulsar(generate_cluster(seed=42), ephemeral=True) as sim:
        engine = make_engine(db_url)
        client = CountingClient.from_url(sim.admin_url, retries=0)
        client.unloads = []
        with session_scope(engine) as s:
            cid = repo.get_or_create_cluster(s, name=sim.state.cluster, admin_url=sim.admin_url)
        yield sim, engine, client, cid
        client.close()


def _unloads(sim, n: int, *, offset: int = 0):
    """``n`` unload actions of bundles the simulator has, each to another broker."""
    brokers = sim.state.broker_ids()
    actions = []
    for i, (bundle, owner) in enumerate(sorted(sim.state.owners().items())[offset : offset + n]):
        ns, rng = bundle.rsplit("/", 1)
        actions.append(
            {
                "kind": "unload",
                "namespace": ns,
                "bundle_range": rng,
                "source_broker": owner,
                "destination_broker": next(b for b in brokers if b != owner),
                "reason": f"test move {i}",
            }
        )
    return actions


def _plan(engine, cid, run_id, actions, *, approve=True, dry_run=False) -> str:
    with session_scope(engine) as s:
        repo.start_run(s, run_id=run_id, cluster_id=cid, params={}, work_dir="/tmp/w")
        plan_id = repo.create_plan(
            s,
            run_id=run_id,
            cluster_id=cid,
            status="pending",
            expires_at=dt.datetime.now(dt.UTC) + dt.timedelta(hours=1),
            dry_run=dry_run,
            strategies={},
            config={},
            summary={},
            decision={},
            actions=actions,
        )
    if approve:
        with session_scope(engine) as s:
            repo.decide_plan(s, plan_id=plan_id, decision="approved", decided_by="alice")
    return plan_id


def _get(engine, plan_id):
    with session_scope(engine) as s:
        return repo.get_plan(s, plan_id=plan_id)


def test_two_plans_from_one_snapshot_the_second_is_never_executed(world):
    sim, engine, client, cid = world
    moves = _unloads(sim, 2)
    first = _plan(engine, cid, "run-1", moves)
    second = _plan(engine, cid, "run-2", moves)  # the same moves, from a snapshot taken before `first` ran
    assert execute_plan(engine, client, plan_id=first).status == "executed"
    assert len(client.unloads) == 2
    with pytest.raises(StalePlanError, match=f"before plan {first} executed.*re-plan"):
        execute_plan(engine, client, plan_id=second)
    assert len(client.unloads) == 2  # not one admin call more
    plan = _get(engine, second)
    assert plan.status == "superseded" and plan.superseded_by == first


def test_executing_a_newer_plan_supersedes_an_older_approved_one(world):
    sim, engine, client, cid = world
    older = _plan(engine, cid, "run-1", _unloads(sim, 1))
    newer = _plan(engine, cid, "run-2", _unloads(sim, 1, offset=1))
    execute_plan(engine, client, plan_id=newer)
    assert _get(engine, older).status == "superseded"
    with pytest.raises(ExecutionError, match=f"is superseded: nothing is executed \\(superseded by {newer}\\)"):
        execute_plan(engine, client, plan_id=older)
    assert len(client.unloads) == 1


def _die_mid_execution(engine, plan_id):
    """What a SIGKILLed executor leaves: plan executing, first action in_progress, no lock held."""
    with session_scope(engine) as s:
        repo.set_plan_status(s, plan_id=plan_id, status="executing")
        first = repo.get_plan(s, plan_id=plan_id).actions[0]
        repo.transition_action(s, action_id=first.id, to="in_progress")


def test_a_dead_execution_does_not_lock_the_cluster_and_can_be_resumed(world):
    from pulsar_rebalance.pipeline.execute import resume_plan

    sim, engine, client, cid = world
    dead = _plan(engine, cid, "run-1", _unloads(sim, 2))
    _die_mid_execution(engine, dead)
    # the next run's plan executes: the dead one is marked interrupted (its process holds no lock)
    nxt = _plan(engine, cid, "run-2", _unloads(sim, 1, offset=2))
    assert execute_plan(engine, client, plan_id=nxt).status == "executed"
    assert _get(engine, dead).status == "interrupted"
    # resume reconciles with Pulsar and finishes it; the in-progress action is re-sent and counted
    report = resume_plan(engine, client, plan_id=dead, by="bob")
    assert report.status == "executed"
    plan = _get(engine, dead)
    assert [a.state for a in plan.actions] == ["completed", "completed"]
    assert plan.actions[0].attempts == 2  # sent again after the crash: the attempt is counted
    assert all(sim.state.owner(a.bundle) == a.destination_broker for a in plan.actions)
    assert sorted(client.unloads) == sorted([a.bundle for a in plan.actions] + [_get(engine, nxt).actions[0].bundle])
    # measured and recorded afterwards, as execute_unload does: the usage, and who owns what now
    _assert_measured(sim, report.to_json())
    assert plan.result == report.to_json()
    _assert_ownership_recorded(sim, engine, plan)


def _assert_measured(sim, result: dict) -> None:
    """``result`` holds the cluster's usage measured after the execution (every broker, its max)."""
    usage = result["broker_usage_after"]
    assert set(usage) == set(sim.state.broker_ids())
    assert all(0 <= v <= 2 for v in usage.values())
    assert result["max_usage_after"] == max(usage.values())
    assert result["not_measured"] is None


def _assert_ownership_recorded(sim, engine, plan) -> None:
    """The recorded ownership of the plan's namespaces (those re-read) is the simulator's now, each
    completed move credited to its action."""
    namespaces = {a.namespace for a in plan.actions}
    with session_scope(engine) as s:
        recorded = repo.current_ownership(s, cluster_id=plan.cluster_id)
        assert {b: o for b, o in sim.state.owners().items() if b.rsplit("/", 1)[0] in namespaces}.items() <= (
            recorded.items()
        )
        for a in plan.actions:
            if a.state == "completed":
                assert repo.ownership_history(s, cluster_id=plan.cluster_id, bundle=a.bundle)[-1].action_id == a.id


def test_abort_marks_the_rest_skipped_and_frees_the_plan(world):
    from pulsar_rebalance.pipeline.execute import abort_plan

    sim, engine, client, cid = world
    dead = _plan(engine, cid, "run-1", _unloads(sim, 2))
    _die_mid_execution(engine, dead)
    plan = abort_plan(engine, client, plan_id=dead, by="bob")
    assert plan.status == "aborted"
    assert [a.state for a in plan.actions] == ["failed", "skipped"]
    assert "aborted by bob" in plan.actions[0].error and "outcome unknown" in plan.actions[0].error
    assert client.unloads == []
    with session_scope(engine) as s:
        events = [e["event"] for e in repo.audit_events(s, plan_id=dead)]
    assert "plan.aborted" in events
    # nothing was done, and still the cluster is measured and recorded as it is now
    result = plan.result
    assert (result["status"], result["unloads_executed"], result["failed"], result["skipped"]) == ("aborted", 0, 1, 1)
    _assert_measured(sim, result)
    _assert_ownership_recorded(sim, engine, plan)
    assert "abort_finished" in events


def test_abort_after_an_execution_that_did_some_actions_measures_and_records_the_cluster(world):
    from pulsar_rebalance.pipeline.execute import abort_plan

    sim, engine, client, cid = world
    plan_id = _plan(engine, cid, "run-1", _unloads(sim, 3))
    # the execution stops after its first move (the per-run cap skips the rest), and is not re-read
    policy = ExecutionPolicy(max_parallel=1, max_unloads_per_run=1)
    report = execute_plan(engine, client, plan_id=plan_id, policy=policy)
    assert report.status == "partially_executed" and report.unloads_executed == 1
    assert report.max_usage_after is None and "not re-read" in report.not_measured
    plan = abort_plan(engine, client, plan_id=plan_id, by="bob")
    assert plan.status == "aborted"
    assert [a.state for a in plan.actions] == ["completed", "skipped", "skipped"]
    result = plan.result
    assert (result["status"], result["unloads_executed"], result["failed"], result["skipped"]) == ("aborted", 1, 0, 2)
    _assert_measured(sim, result)
    _assert_ownership_recorded(sim, engine, plan)
    done = plan.actions[0]
    assert sim.state.owner(done.bundle) == done.destination_broker


def test_abort_without_a_client_or_with_pulsar_down_says_why_nothing_was_measured(world):
    from pulsar_rebalance.pipeline.execute import abort_plan
    from pulsar_rebalance.pulsar_admin import PulsarAdminClient

    sim, engine, client, cid = world
    first = _plan(engine, cid, "run-1", _unloads(sim, 1))
    _die_mid_execution(engine, first)
    plan = abort_plan(engine, plan_id=first, by="bob", no_client_reason="PULSAR_ADMIN_URL is not set")
    assert plan.status == "aborted" and plan.result["max_usage_after"] is None
    assert plan.result["not_measured"] == "the cluster was not re-read after the abort: PULSAR_ADMIN_URL is not set"
    second = _plan(engine, cid, "run-2", _unloads(sim, 1, offset=1))
    _die_mid_execution(engine, second)
    with socket.socket() as closed:  # a port nobody listens on: Pulsar is unreachable
        closed.bind(("127.0.0.1", 0))
        down = PulsarAdminClient.from_url(f"http://127.0.0.1:{closed.getsockname()[1]}", retries=0, timeout=5)
        with down:
            plan = abort_plan(engine, down, plan_id=second, by="bob")
    assert plan.status == "aborted" and plan.result["max_usage_after"] is None  # the abort stands
    assert plan.result["not_measured"].startswith("the cluster could not be re-read after the abort: ")


def test_abort_refuses_a_live_execution(world):
    from pulsar_rebalance.pipeline.execute import _ClusterLock, abort_plan

    sim, engine, client, cid = world
    plan_id = _plan(engine, cid, "run-1", _unloads(sim, 1))
    _die_mid_execution(engine, plan_id)
    with _ClusterLock(engine, sim.state.cluster):  # a live executor holds the cluster
        with pytest.raises(ExecutionError, match="is running in a live process.*plans stop"):
            abort_plan(engine, plan_id=plan_id, by="bob")


def test_stop_switch_skips_everything_not_started(world):
    sim, engine, client, cid = world
    plan_id = _plan(engine, cid, "run-1", _unloads(sim, 3))
    with session_scope(engine) as s:
        repo.request_stop(s, plan_id=plan_id, requested_by="bob")
    report = execute_plan(engine, client, plan_id=plan_id)
    assert report.skipped == 3 and client.unloads == []
    assert all("stopped by bob" in a.error for a in _get(engine, plan_id).actions)


def test_per_run_cap_and_per_broker_slots(world):
    sim, engine, client, cid = world
    plan_id = _plan(engine, cid, "run-1", _unloads(sim, 4))
    policy = ExecutionPolicy(max_parallel=4, max_unloads_per_broker=1, max_unloads_per_run=2)
    report = execute_plan(engine, client, plan_id=plan_id, policy=policy)
    assert (report.unloads_executed, report.skipped) == (2, 2) and len(client.unloads) == 2
    skipped = [a for a in _get(engine, plan_id).actions if a.state == "skipped"]
    assert all("max_unloads_per_run=2 reached" in a.error for a in skipped)


def test_the_task_log_has_one_progress_line_per_action_and_durations_come_from_the_rows(world, caplog):
    """One line per finished action (which, how long, traffic moved so far, ETA); the cap's skips say they
    wait for the next run. The duration is the row's finished_at - started_at: nothing else is stored."""
    import logging
    import re

    sim, engine, client, cid = world
    actions = _unloads(sim, 3)
    for a in actions:  # 300 msg/s and 3 MiB/s each, in + out
        a["predicted"] = {
            "bundleLoad": {"msgRateIn": 100.0, "msgRateOut": 200.0, "msgThroughputIn": 2**20, "msgThroughputOut": 2**21}
        }
    plan_id = _plan(engine, cid, "run-1", actions)
    policy = ExecutionPolicy(max_parallel=1, max_unloads_per_run=2, drift_tolerance=None)
    with caplog.at_level(logging.INFO, logger="pulsar_rebalance.pipeline.execute"):
        execute_plan(engine, client, plan_id=plan_id, policy=policy)
    lines = [r.getMessage() for r in caplog.records if re.match(r"unload \d/3 ", r.getMessage())]
    first, second, third = (actions[i]["namespace"] + "/" + actions[i]["bundle_range"] for i in range(3))
    src, dst = actions[0]["source_broker"], actions[0]["destination_broker"]
    assert len(lines) == 3, caplog.text
    assert re.fullmatch(
        rf"unload 1/3 done \({re.escape(first)}: {re.escape(src)} -> {re.escape(dst)}, \d+\.\d s\); "
        r"moved 300 msg/s, 3\.0 MiB/s of 900 msg/s, 9\.0 MiB/s planned; "
        r"ETA \d+\.\d s for this run; 1 unload waits for the next run \(max_unloads_per_run=2\)",
        lines[0],
    ), lines[0]
    assert lines[1].startswith(f"unload 2/3 done ({second}: ") and "moved 600 msg/s, 6.0 MiB/s of 900" in lines[1]
    assert lines[2].startswith(f"unload 3/3 skipped ({third}: ") and "; finished in " in lines[2]
    assert "1 unload waits for the next run (max_unloads_per_run=2)" in lines[2]
    done = [a for a in _get(engine, plan_id).actions if a.state == "completed"]
    assert len(done) == 2 and all(a.started_at < a.finished_at and not a.result for a in done)


def test_load_drift_beyond_tolerance_skips_the_move(world):
    sim, engine, client, cid = world
    (action,) = _unloads(sim, 1)
    bundle = f"{action['namespace']}/{action['bundle_range']}"
    stats = client.load_report(action["source_broker"])["lastStats"][bundle]
    action["predicted"] = {"bundleLoad": {"msgRateIn": stats["msgRateIn"], "msgRateOut": stats["msgRateOut"]}}
    plan_id = _plan(engine, cid, "run-1", [action])
    with sim.state._lock:  # traffic of the bundle's topics grows tenfold after planning
        for t in sim.state._topics.values():
            if sim.state.bundle_for_topic(t.name) == bundle:
                t.msg_rate_in *= 10
                t.msg_rate_out *= 10
    report = execute_plan(engine, client, plan_id=plan_id, policy=ExecutionPolicy(drift_tolerance=0.5))
    assert report.skipped == 1 and client.unloads == []
    assert "load drift" in _get(engine, plan_id).actions[0].error


def test_pulsar_own_shedding_on_refuses_unless_allowed(world):
    import httpx

    sim, engine, client, cid = world
    httpx.post(f"{sim.admin_url}/admin/v2/brokers/configuration/loadBalancerSheddingEnabled/true").raise_for_status()
    plan_id = _plan(engine, cid, "run-1", _unloads(sim, 1))
    with pytest.raises(ExecutionError, match="loadBalancerSheddingEnabled is on.*fight"):
        execute_plan(engine, client, plan_id=plan_id)
    assert _get(engine, plan_id).status == "approved" and client.unloads == []  # nothing started
    report = execute_plan(engine, client, plan_id=plan_id, policy=ExecutionPolicy(allow_pulsar_shedding=True))
    assert report.status == "executed" and len(client.unloads) == 1


def test_content_not_matching_the_approval_is_refused(world):
    from sqlalchemy import text

    sim, engine, client, cid = world
    plan_id = _plan(engine, cid, "run-1", _unloads(sim, 1))
    with engine.begin() as c:  # someone rewrites the approval's hash behind the store's back
        c.execute(text("ALTER TABLE approvals DISABLE TRIGGER approvals_immutable"))
        c.execute(text("UPDATE approvals SET plan_hash = 'deadbeef' WHERE plan_id = :p"), {"p": plan_id})
        c.execute(text("ALTER TABLE approvals ENABLE TRIGGER approvals_immutable"))
    with pytest.raises(ExecutionError, match="not what was approved"):
        execute_plan(engine, client, plan_id=plan_id)
    assert client.unloads == []


def test_a_stored_action_that_is_not_a_valid_action_is_refused_naming_the_field(world):
    from sqlalchemy import text

    sim, engine, client, cid = world
    plan_id = _plan(engine, cid, "run-1", _unloads(sim, 2))
    with engine.begin() as c:  # the second unload rewritten behind the store's back to go nowhere
        c.execute(text("ALTER TABLE plan_actions DISABLE TRIGGER plan_actions_immutable"))
        c.execute(
            text("UPDATE plan_actions SET destination_broker = source_broker WHERE plan_id = :p AND seq = 1"),
            {"p": plan_id},
        )
        c.execute(text("ALTER TABLE plan_actions ENABLE TRIGGER plan_actions_immutable"))
    with pytest.raises(
        ExecutionError,
        match=r"stored plan is not valid \(actions\[1\]\.destination_broker: an unload "
        r"must leave its source broker",
    ):
        execute_plan(engine, client, plan_id=plan_id)
    assert client.unloads == [] and _get(engine, plan_id).status == "approved"  # not even the valid first one


def test_plans_resume_abort_stop_from_the_cli(world, db_url, monkeypatch, capsys):
    import json

    from pulsar_rebalance.cli import main

    sim, engine, client, cid = world
    monkeypatch.setenv("PULSAR_REBALANCE_DATABASE_URL", db_url)
    monkeypatch.setenv("PULSAR_ADMIN_URL", sim.admin_url)
    first = _plan(engine, cid, "run-1", _unloads(sim, 1))
    _die_mid_execution(engine, first)
    assert main(["plans", "resume", first, "--by", "bob"]) == 0
    resumed = json.loads(capsys.readouterr().out)
    assert resumed["status"] == "executed"
    _assert_measured(sim, resumed)  # was max_usage_after null, broker_usage_after {}
    assert _get(engine, first).result == resumed
    second = _plan(engine, cid, "run-2", _unloads(sim, 2, offset=3))
    assert main(["plans", "stop", second, "--by", "carol"]) == 0
    assert json.loads(capsys.readouterr().out)["stop_requested"]["by"] == "carol"
    _die_mid_execution(engine, second)
    assert main(["plans", "abort", second, "--by", "carol"]) == 0
    aborted = json.loads(capsys.readouterr().out)
    assert aborted["status"] == "aborted" and aborted["actions"] == {"failed": 1, "skipped": 1}
    _assert_measured(sim, aborted)
    assert _get(engine, second).result["broker_usage_after"] == aborted["broker_usage_after"]
    assert main(["plans", "show", second]) == 0
    shown = capsys.readouterr().out
    assert f"max broker usage measured after execution: {100 * aborted['max_usage_after']:5.1f}%" in shown
    assert main(["plans", "abort", second]) == 2  # already final: a clear refusal, exit 2
    assert "only interrupted" in capsys.readouterr().err


def test_collect_warns_on_the_plan_when_pulsar_own_shedding_is_on(world):
    import httpx

    from pulsar_rebalance.pipeline.collect import collect_snapshot

    sim, engine, client, cid = world
    assert not [w for w in collect_snapshot(client).check.warnings if w.kind.startswith("pulsar_shedding")]
    httpx.post(f"{sim.admin_url}/admin/v2/brokers/configuration/loadBalancerSheddingEnabled/true").raise_for_status()
    (warning,) = [w for w in collect_snapshot(client).check.warnings if w.kind.startswith("pulsar_shedding")]
    assert warning.kind == "pulsar_shedding_enabled" and "allow_pulsar_shedding" in warning.message
    assert warning.bundle is None  # a warning for the reviewer; no bundle is left out


def test_abort_works_while_another_dead_plan_still_says_executing(world):
    from pulsar_rebalance.pipeline.execute import abort_plan

    sim, engine, client, cid = world
    older = _plan(engine, cid, "run-1", _unloads(sim, 1))
    _die_mid_execution(engine, older)
    with session_scope(engine) as s:
        repo.set_plan_status(s, plan_id=older, status="interrupted")
    newer = _plan(engine, cid, "run-2", _unloads(sim, 1, offset=1))
    _die_mid_execution(engine, newer)  # dead too, and still says 'executing'
    assert abort_plan(engine, plan_id=older, by="bob").status == "aborted"
    assert _get(engine, newer).status == "interrupted"  # recognised as dead on the way


def test_a_dry_run_plan_executes_to_skipped_actions_without_one_admin_call(world, db_url, monkeypatch, capsys, caplog):
    """Issue 16: a dry-run plan used to fail on its first action (skipped needs a reason) and stay
    'executing'. Every action is skipped with what it would do, Pulsar sees no request at all, and the
    plan ends executed, labelled as a dry run in the report, ``plans list`` and ``plans show``."""
    import json
    import logging

    from pulsar_rebalance.cli import main

    sim, engine, client, cid = world
    moves = _unloads(sim, 2)
    (bundle, owner) = sorted(sim.state.owners().items())[5]
    ns, rng = bundle.rsplit("/", 1)
    lo, hi = (int(x, 16) for x in rng.split("_"))
    split = {
        "kind": "split",
        "namespace": ns,
        "bundle_range": rng,
        "source_broker": owner,
        "boundaries": [(lo + hi) // 2],
        "split_algorithm": "range_equally_divide",
        "reason": "test split",
    }
    plan_id = _plan(engine, cid, "run-1", [split, *moves], dry_run=True)
    before = sim.state.snapshot()
    sim.reset_request_log()
    with caplog.at_level(logging.INFO, logger="pulsar_rebalance.pipeline.execute"):
        report = execute_plan(engine, client, plan_id=plan_id)

    assert sim.requests() == [] and sim.executed() == [] and client.unloads == []  # not even a read
    assert sim.state.snapshot()["owners"] == before["owners"]
    assert (report.status, report.dry_run, report.skipped, report.failed) == ("executed", True, 3, 0)
    assert report.unloads_executed == report.splits_executed == 0
    plan = _get(engine, plan_id)
    assert plan.status == "executed" and plan.dry_run and plan.result["dry_run"] is True
    assert [(a.kind, a.state, a.error) for a in plan.actions] == [
        ("split", "skipped", f"dry run: would split {bundle} (range_equally_divide)"),
        *[
            (
                "unload",
                "skipped",
                f"dry run: would unload {m['namespace']}/{m['bundle_range']} "
                f"from {m['source_broker']} to {m['destination_broker']}",
            )
            for m in moves
        ],
    ]
    assert all(a.attempts == 0 for a in plan.actions)  # nothing was attempted against Pulsar
    assert f"DRY RUN of plan {plan_id} finished: executed (dry run)" in caplog.text  # the task log says so
    assert f"dry run: would split {bundle}" in caplog.text
    # an Airflow retry after the finished dry run returns the recorded outcome, still without a call
    assert execute_plan(engine, client, plan_id=plan_id).dry_run is True and sim.requests() == []

    monkeypatch.setenv("PULSAR_REBALANCE_DATABASE_URL", db_url)
    assert main(["plans", "list"]) == 0
    (line,) = [row for row in capsys.readouterr().out.splitlines() if row.startswith(plan_id)]
    assert "executed (dry run)" in line
    assert main(["plans", "show", plan_id]) == 0
    shown = capsys.readouterr().out
    assert "status=executed (dry run)" in shown and "DRY RUN: no admin call" in shown
    assert f"skipped: dry run: would split {bundle} (range_equally_divide)" in shown
    assert main(["plans", "show", plan_id, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["dry_run"] is True and doc["result"]["dry_run"] is True


def test_a_dry_run_left_executing_by_the_old_failure_is_finished_by_resume(world):
    """What the bug left behind: a dry-run plan 'executing' with its actions pending; ``plans resume``
    now finishes it as a dry run (it used to hit the same error)."""
    from pulsar_rebalance.pipeline.execute import resume_plan

    sim, engine, client, cid = world
    plan_id = _plan(engine, cid, "run-1", _unloads(sim, 2), dry_run=True)
    with session_scope(engine) as s:
        repo.set_plan_status(s, plan_id=plan_id, status="executing")
    sim.reset_request_log()
    report = resume_plan(engine, client, plan_id=plan_id, by="bob")
    assert (report.status, report.dry_run, report.skipped) == ("executed", True, 2)
    assert sim.requests() == [] and client.unloads == []
    assert all(
        a.state == "skipped" and a.error.startswith("dry run: would unload") for a in _get(engine, plan_id).actions
    )
