"""The admin API misbehaving while an approved plan executes (the execute stage in its own process):
500s before and after the request took effect, timeouts whose request still lands later, and 307
redirects through a non-owner broker while the leader moves. Every case: the first execution records
each failure with its reason, the retry finishes the plan, nothing is executed twice."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.timeout(240)


def _fail_then_retry(w, figures, faults: int, note: str):
    first = w.run_job()
    assert first.returncode != 0, "the first execution must fail on the injected faults"
    assert "action(s) failed" in first.stderr and "a retry reconciles" in first.stderr
    mid = w.check(final=False)  # failed actions may still have to be reconciled; nothing ran twice
    assert mid.duplicates == 0 and mid.lost == 0, mid.problems
    assert mid.plan_status == "partially_executed"
    failed = [a for a in w.plan().actions if a.state == "failed"]
    assert failed and all(a.error for a in failed)
    w.sim.clear_faults()
    w.wait_idle()
    _, inv = w.retry_to_the_end(figures, faults=faults, note=note)
    assert inv.plan_status == "executed" and inv.states == {"completed": len(w.plan().actions)}
    return first, failed


def test_admin_500_before_and_after_the_effect(world_factory, figures):
    w = world_factory()
    w.make_plan(splits=1, unloads=6)
    actions = w.plan().actions
    split = next(a for a in actions if a.kind == "split")
    unloads = [a for a in actions if a.kind == "unload"]
    # the split and one unload are refused (nothing happens), another unload happens but answers 500
    w.sim.inject_request_error(500, method="PUT", path_contains=f"/{split.bundle_range}/split", times=1)
    w.sim.inject_request_error(500, method="PUT", path_contains=f"{unloads[0].bundle}/unload", times=1)
    w.sim.inject_request_error(
        500, method="PUT", path_contains=f"{unloads[1].bundle}/unload", times=1, after_effect=True
    )
    first, failed = _fail_then_retry(
        w,
        figures,
        3,
        "500 on a split and an unload before they took effect, and on one unload after; "
        "retry re-sent the first two and reconciled the third",
    )
    assert {a.id for a in failed} == {split.id, unloads[0].id, unloads[1].id}
    assert split.bundle in first.stderr and unloads[1].bundle in first.stderr
    final = {a.id: a for a in w.plan().actions}
    assert final[unloads[1].id].result == {"reconciled": True} and final[unloads[1].id].attempts == 2
    assert final[split.id].attempts == 2 and final[unloads[0].id].attempts == 2


@pytest.mark.slow
def test_admin_timeouts_whose_request_lands_later(world_factory, figures):
    w = world_factory()
    w.make_plan(splits=1, unloads=4)
    actions = w.plan().actions
    split = next(a for a in actions if a.kind == "split")
    slow = [a for a in actions if a.kind == "unload"][:2]
    # the client gives up after 1 s; the broker carries the request out after 2.5 s all the same
    w.sim.inject_request_latency(2.5, method="PUT", path_contains=f"/{split.bundle_range}/split", times=1)
    for a in slow:
        w.sim.inject_request_latency(2.5, method="PUT", path_contains=f"{a.bundle}/unload", times=1)
    first = w.run_job(PULSAR_ADMIN_TIMEOUT="1")
    assert first.returncode != 0 and "timed out" in first.stderr.lower()
    assert {a.id for a in w.plan().actions if a.state == "failed"} == {split.id, *(a.id for a in slow)}
    w.wait_idle()  # the late requests took effect meanwhile
    second, _ = w.retry_to_the_end(
        figures,
        faults=3,
        note="client timeout 1 s, broker answers after 2.5 s and applies the call; retry reconciled all 3",
    )
    final = {a.id: a for a in w.plan().actions}
    assert all(final[a.id].result == {"reconciled": True} for a in (split, *slow))
    assert '"reconciled": 3' in second.stdout


@pytest.mark.slow
def test_admin_timeout_retried_at_once_waits_for_the_late_request(world_factory, figures):
    w = world_factory()
    w.make_plan(splits=0, unloads=2)
    slow = [a for a in w.plan().actions if a.kind == "unload"][0]
    # the broker holds the request 10 s (longer than a job's start-up), then carries it out
    w.sim.inject_request_latency(10, method="PUT", path_contains=f"{slow.bundle}/unload", times=1)
    first = w.run_job(PULSAR_ADMIN_TIMEOUT="1")
    assert first.returncode != 0 and "outcome unknown (timed out)" in first.stderr
    # no waiting here: the Airflow retry comes at once, while the request is still in flight in the broker
    second, inv = w.retry_to_the_end(
        figures,
        faults=1,
        note="client timeout 1 s, retried at once while the broker still held the request (10 s); "
        "the executor waited for it to land and reconciled it",
    )
    final = {a.id: a for a in w.plan().actions}
    assert final[slow.id].result == {"reconciled": True} and inv.duplicates == 0


@pytest.mark.slow
def test_redirects_to_the_owner_while_the_leader_moves(world_factory, figures):
    w = world_factory()
    w.make_plan(splits=1, unloads=6)
    brokers = w.sim.broker_ids
    entry = brokers[-1]  # the admin URL is a broker that is neither the leader nor most bundles' owner
    moved = []

    def move_leader(record):
        if record.executed and record.executed[0] == "unload" and not moved:
            w.sim.state.leader = moved.append(brokers[2]) or brokers[2]

    w.sim.add_request_listener(move_leader)
    result = w.run_job(PULSAR_ADMIN_URL=f"http://{entry}")
    redirects = [r for r in w.sim.requests() if r.status == 307]
    via_new_leader = [r for r in redirects if r.broker_id == brokers[2] and r.path.endswith("/unload")]
    inv = w.check()
    figures.faults = len(redirects) + 1
    figures.duplicates, figures.lost = inv.duplicates, inv.lost
    figures.survived = figures.faults if inv.ok and result.returncode == 0 else 0
    figures.note = f"{len(redirects)} redirects followed (leader first, then owner); leadership moved mid-run"
    assert result.returncode == 0, result.stderr[-2000:]
    assert moved and via_new_leader, "unloads after the move went through the new leader"
    assert inv.ok, inv.problems
    assert inv.plan_status == "executed" and inv.states == {"completed": 7}
