"""The execute stage SIGKILLed (its own process: ``spark_jobs/execute_unload.py --without-spark``) and
retried, as Airflow retries a task whose worker died.

* at exact points: between the committed intent and the admin call, and after Pulsar carried the call
  out but before the answer arrived;
* at random points (seeded): on the k-th admin request or after a random delay (also before any admin
  call), several times per plan, >= 20 kills in all.

After every kill: nothing executed twice, every effect on the cluster either recorded or still
``in_progress``/``failed`` for the retry to reconcile. After the final retry: the plan ``executed``,
every action ``completed`` exactly once.
"""

from __future__ import annotations

import random
import subprocess

import pytest
from sqlalchemy import text

from pulsar_rebalance.store.engine import session_scope

pytestmark = pytest.mark.timeout(600)

SEED = 20261123
MIN_KILLS = 24
MAX_WORLDS = 16
KILLS_PER_WORLD = 4


def _wait_lock_released(w) -> None:
    """A killed job's session (and its advisory lock) ends when Postgres sees the socket close."""

    def released() -> bool:
        with session_scope(w.engine) as s:
            return not s.execute(text("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'")).scalar()

    w.wait_for(released, 20, "the killed job's execution lock to be released")


def _kill_on(w, predicate):
    """Start the job and SIGKILL it from the simulator the moment ``predicate(record)`` holds (before the
    answer to that request is sent). Returns the finished process."""
    box = {}

    def listener(record):
        if "proc" in box and not box.get("killed") and predicate(record):
            box["killed"] = True
            w.kill(box["proc"])

    w.sim.add_request_listener(listener)
    try:
        box["proc"] = proc = w.start_job()
        proc.communicate(timeout=90)
    finally:
        w.sim.remove_request_listener(listener)
    _wait_lock_released(w)
    return proc


def test_killed_between_intent_and_effect_and_after_the_effect(world_factory, figures):
    w = world_factory()
    w.make_plan(splits=1, unloads=6, max_parallel=1)
    unloads = [a for a in w.plan().actions if a.kind == "unload"]
    leader = w.sim.state.leader
    before = next(a for a in unloads if a.source_broker != leader)  # the leader redirects it to its owner
    after = unloads[-1]
    assert after.seq > before.seq  # actions run in order (max_parallel=1)

    # 1. the leader received the unload (intent committed) and the job dies before anything happened
    p1 = _kill_on(w, lambda r: r.status == 307 and r.path.endswith(f"{before.bundle_range}/unload"))
    assert p1.returncode == -9
    assert {a.id: a for a in w.plan().actions}[before.id].state == "in_progress"
    assert ("unload", before.bundle) not in w.sim.executed()
    # 2. the retry re-sends it (counted as a new attempt); the job dies after Pulsar did a later unload
    p2 = _kill_on(w, lambda r: r.executed == ("unload", after.bundle))
    assert p2.returncode == -9
    mid = {a.id: a for a in w.plan().actions}
    assert mid[before.id].state == "completed" and mid[before.id].attempts == 2
    assert mid[after.id].state == "in_progress"
    # 3. the last retry reconciles it without calling Pulsar again
    final, _ = w.retry_to_the_end(
        figures,
        faults=2,
        note="SIGKILL after the intent (action re-sent, attempts 2) and after the effect (reconciled, attempts 1)",
    )
    done = {a.id: a for a in w.plan().actions}
    assert done[after.id].result == {"reconciled": True} and done[after.id].attempts == 1
    assert '"reconciled": 1' in final.stdout


@pytest.mark.slow
def test_killed_at_random_points_and_retried(world_factory, figures):
    rng = random.Random(SEED)
    kills = survived = duplicates = lost = 0
    where = {"request": 0, "timer": 0}
    problems = []
    i = -1
    while kills < MIN_KILLS and i + 1 < MAX_WORLDS:
        i += 1
        w = world_factory(seed=40 + i)
        w.make_plan(splits=1, unloads=5, max_parallel=2, run_id=f"run-kill-{i}")
        w.run_id = f"run-kill-{i}"
        for _ in range(KILLS_PER_WORLD):
            if rng.random() < 0.7:
                mode, start, k = "request", len(w.sim.requests()), rng.randint(1, 35)
                proc = _kill_on(w, lambda r, start=start, k=k: r.seq - start >= k)
            else:
                mode, delay = "timer", rng.uniform(0.2, 2.5)
                proc = w.start_job()
                try:
                    proc.communicate(timeout=delay)
                except subprocess.TimeoutExpired:  # still running after the delay: kill it there
                    w.kill(proc)
                    proc.communicate(timeout=30)
                _wait_lock_released(w)
            if proc.returncode != -9:
                break  # it finished before the kill point
            kills += 1
            where[mode] += 1
            mid = w.check(final=False)
            duplicates += mid.duplicates
            lost += mid.lost
            problems += [f"world {i} after kill {kills} ({mode}): {p}" for p in mid.problems]
            survived += mid.ok
        final = w.run_job()
        inv = w.check()
        duplicates += inv.duplicates
        lost += inv.lost
        problems += [f"world {i} final: {p}" for p in inv.problems]
        if final.returncode != 0:
            problems.append(f"world {i}: final retry failed: {final.stderr[-500:]}")
        if inv.plan_status != "executed" or set(inv.states) != {"completed"}:
            problems.append(f"world {i}: ended {inv.plan_status} with {dict(inv.states)}")
    figures.faults, figures.survived, figures.duplicates, figures.lost = kills, survived, duplicates, lost
    figures.note = (
        f"seed {SEED}: {where['request']} kills on the k-th admin request, {where['timer']} after a "
        f"random delay, over {i + 1} plans; every plan then executed exactly once"
    )
    assert kills >= MIN_KILLS, f"only {kills} kills landed"
    assert not problems, problems
