"""A broker dies while an approved plan executes (the execute stage in its own process).

* hung up: its HTTP server goes away mid-answer (the call in flight took effect, its answer is lost)
  and comes back later; the retry reconciles and finishes the plan;
* dead for good: it leaves the cluster and its bundles are owned by the others; the actions that
  involve it are skipped with a reason naming it, the rest complete, nothing runs twice.
"""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def _busiest_other_broker(w, plan, *, avoid: set[str]) -> str:
    """The broker (not the admin URL's, not ``avoid``) that most not-yet-run actions touch."""
    counts: dict[str, int] = {}
    for a in plan.actions:
        for b in (a.source_broker, a.destination_broker):
            if b and b not in avoid:
                counts[b] = counts.get(b, 0) + 1
    return max(sorted(counts), key=lambda b: counts[b])


def test_broker_hangs_up_mid_execution_and_comes_back(world_factory, figures):
    w = world_factory()
    w.make_plan(splits=1, unloads=6, max_parallel=1)
    plan = w.plan()
    entry = w.sim.broker_ids[-1]  # the admin URL: a broker that stays up
    target = [a for a in plan.actions if a.kind == "unload" and a.source_broker != entry][1]
    down = []

    def hang_up(record):  # the owner carried out the unload and dies before answering
        if record.executed == ("unload", target.bundle) and not down:
            down.append(record.broker_id)
            w.sim.stop_broker(record.broker_id)

    w.sim.add_request_listener(hang_up)
    first = w.run_job(PULSAR_ADMIN_URL=f"http://{entry}")
    assert down, "the fault fired"
    victim = down[0]
    assert first.returncode != 0 and victim in first.stderr
    states = {a.id: a.state for a in w.plan().actions}
    assert states[target.id] == "failed"  # it happened, but the answer never came
    mid = w.check(final=False)
    assert mid.duplicates == 0 and mid.lost == 0, mid.problems

    w.sim.remove_request_listener(hang_up)
    w.sim.restart_broker(victim)
    _, inv = w.retry_to_the_end(
        figures,
        faults=1,
        PULSAR_ADMIN_URL=f"http://{entry}",
        note=(
            f"the owner died while answering an unload it had done ({sum(s == 'failed' for s in states.values())} "
            "actions failed); restarted; retry reconciled and finished"
        ),
    )
    assert inv.plan_status == "executed"
    assert {a.id: a for a in w.plan().actions}[target.id].result == {"reconciled": True}


def test_broker_dies_for_good_mid_execution(world_factory, figures):
    w = world_factory()
    w.make_plan(splits=1, unloads=6, max_parallel=1)
    plan = w.plan()
    admin = w.sim.broker_ids[0]
    first_unload = next(a for a in plan.actions if a.kind == "unload")
    victim = _busiest_other_broker(w, plan, avoid={admin, first_unload.source_broker, first_unload.destination_broker})
    involved = [a for a in plan.actions if victim in (a.source_broker, a.destination_broker)]
    assert involved
    dead = []

    def die(record):
        if record.executed == ("unload", first_unload.bundle) and not dead:
            dead.append(w.sim.kill_broker(victim))

    w.sim.add_request_listener(die)
    first = w.run_job()
    assert dead
    if first.returncode != 0:  # a call that was already on its way to the victim failed: the retry settles it
        assert victim in first.stderr
        first = w.run_job()
    inv = w.check()
    figures.faults, figures.duplicates, figures.lost = 1, inv.duplicates, inv.lost
    figures.survived = int(inv.ok and first.returncode == 0)
    final = {a.id: a for a in w.plan().actions}
    skipped = [a for a in final.values() if a.state == "skipped"]
    figures.note = (
        f"broker left the cluster after the first unload; {len(skipped)} actions involving it skipped "
        "with the reason, the rest completed"
    )
    assert first.returncode == 0, first.stderr[-2000:]
    assert inv.ok, inv.problems
    assert inv.plan_status == "partially_executed"
    for a in involved:
        if a.state != "completed":
            assert final[a.id].state == "skipped" and victim in final[a.id].error, final[a.id]
    assert {a.id for a in skipped} <= {a.id for a in involved}
    assert all(a.state == "completed" for a in final.values() if a.id not in {x.id for x in involved})
