"""Two executions at once on one cluster (each in its own process): the same plan twice (a task whose
zombie attempt still runs) and two different approved plans. The first is held in the middle of an
admin call while the second starts: the second is refused with a message naming the cause and
touches nothing; run afterwards, it finishes or reports the recorded outcome. Nothing is executed
twice."""

from __future__ import annotations

import threading
from collections import Counter

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def _start_second_while_first_runs(w, first_run: str, second_run: str):
    """The first execution is held inside its first admin call (the simulator does not answer) until
    the second one, started meanwhile, has ended."""
    reached, release = threading.Event(), threading.Event()

    def hold(record):
        if record.executed and not reached.is_set():
            reached.set()
            release.wait(120)

    w.sim.add_request_listener(hold)
    try:
        first = w.start_job(run_id=first_run, PULSAR_ADMIN_TIMEOUT="120")
        w.wait_for(reached.is_set, 60, "the first execution to carry out an action")
        second = w.start_job(run_id=second_run)
        out2, err2 = second.communicate(timeout=120)
    finally:
        release.set()
        w.sim.remove_request_listener(hold)
    out1, err1 = first.communicate(timeout=180)
    return (first.returncode, out1, err1), (second.returncode, out2, err2)


def test_same_plan_executed_twice_at_once(world_factory, figures):
    w = world_factory()
    w.make_plan(splits=1, unloads=5)
    (rc1, _, err1), (rc2, _, err2) = _start_second_while_first_runs(w, w.run_id, w.run_id)
    inv = w.check()
    figures.faults, figures.duplicates, figures.lost = 1, inv.duplicates, inv.lost
    figures.survived = int(inv.ok and rc1 == 0 and rc2 != 0)
    figures.note = "a second execute_unload of the same run while the first ran: refused, first finished"
    assert rc1 == 0, err1[-2000:]
    assert rc2 != 0 and "another execution is running for cluster 'sim-cluster'" in err2, err2[-2000:]
    assert inv.ok, inv.problems
    assert inv.plan_status == "executed"
    again = w.run_job()  # a later retry returns the recorded outcome without touching Pulsar
    assert again.returncode == 0 and "already executed" in again.stdout
    assert w.check().duplicates == 0 and len(w.sim.executed()) == len(w.plan().actions)


def test_two_plans_of_one_cluster_at_once(world_factory, figures):
    w = world_factory()
    first_plan = w.make_plan(splits=0, unloads=3, run_id="run-a")
    # a second approved plan from the same snapshot: its first 3 moves are the first plan's
    second_plan = w.make_plan(splits=0, unloads=6, run_id="run-b")
    taken = {a.bundle for a in w.plan(first_plan).actions}
    (rc1, _, err1), (rc2, _, err2) = _start_second_while_first_runs(w, "run-a", "run-b")
    first_inv = w.check(first_plan)
    assert rc1 == 0, err1[-2000:]
    assert rc2 != 0 and "another execution is running for cluster 'sim-cluster'" in err2, err2[-2000:]
    assert w.plan(second_plan).status == "approved", "the refused plan was not touched"
    assert all(a.state == "pending" for a in w.plan(second_plan).actions)
    # run afterwards: refused as stale (its snapshot predates the first execution), or, where staleness is
    # not checked, it executes what still applies and skips what the first one moved
    before = len(w.sim.executed())
    later = w.run_job(run_id="run-b")
    refused = later.returncode != 0
    second_inv = w.check(second_plan, since=before, final=not refused)
    duplicates = sum(n - 1 for n in Counter(w.sim.executed()).values() if n > 1)
    figures.faults, figures.duplicates, figures.lost = 1, duplicates, first_inv.lost + second_inv.lost
    figures.survived = int(first_inv.ok and second_inv.ok and duplicates == 0)
    figures.note = "two approved plans started together: the second refused untouched; run later: " + (
        "refused as stale (re-plan), nothing executed" if refused else "skipped the 3 moves the first had made"
    )
    assert first_inv.ok, first_inv.problems
    assert second_inv.ok and duplicates == 0, second_inv.problems
    if refused:
        assert "stale" in later.stderr and "re-plan" in later.stderr, later.stderr[-2000:]
        assert len(w.sim.executed()) == before, "a refused plan executed nothing"
        assert all(a.state == "pending" for a in w.plan(second_plan).actions)
        return
    for a in w.plan(second_plan).actions:
        if a.bundle in taken:
            assert a.state == "skipped" and "no longer owns" in a.error, a
        else:
            assert a.state == "completed", a
