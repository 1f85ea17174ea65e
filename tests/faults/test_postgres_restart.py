"""Postgres restarts while an approved plan executes (the execute stage in its own process), on a
server of this test's own so the session's shared one is not disturbed: the execution stops with a
clear store error, and after the restart the retry reconciles the action whose outcome could not be
recorded and finishes the plan; nothing runs twice, nothing is left ``in_progress``."""

from __future__ import annotations

import uuid

import pytest

from pulsar_rebalance.store.engine import dispose_engines, migrate

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def test_postgres_restarted_mid_execution(own_pg_server, world_factory, figures):
    own_pg = own_pg_server  # not the session's shared server: this one is stopped and started
    db_url = own_pg.create_database(f"f_{uuid.uuid4().hex[:12]}")
    migrate(db_url)
    w = world_factory(db_url=db_url)
    w.make_plan(splits=1, unloads=6, max_parallel=1)
    dispose_engines(db_url)  # no pooled connection of ours survives the restart
    target = [a for a in w.plan().actions if a.kind == "unload"][2]
    stopped = []

    def stop_postgres(record):  # Pulsar has carried the unload out; the database goes away before the answer
        if record.executed == ("unload", target.bundle) and not stopped:
            own_pg.stop()
            stopped.append(record.seq)

    w.sim.add_request_listener(stop_postgres)
    first = w.run_job()
    assert stopped, "the fault fired"
    assert first.returncode != 0
    # one clear error at the end (psycopg2's text may span lines), no raw driver error raised while unwinding
    tail = first.stderr[first.stderr.rindex("Traceback (most recent call last)") :]
    assert "\npulsar_rebalance.errors.StoreError: database operation failed" in tail, tail[-1500:]
    assert "During handling of the above exception" not in first.stderr[first.stderr.index("StoreError") :]

    w.sim.remove_request_listener(stop_postgres)
    own_pg.start()
    mid = w.check(final=False)
    assert mid.duplicates == 0 and mid.lost == 0, mid.problems
    assert {a.id: a for a in w.plan().actions}[target.id].state == "in_progress"  # intent committed, outcome not

    _, inv = w.retry_to_the_end(
        figures,
        faults=1,
        note=(
            "Postgres stopped right after Pulsar carried out an unload; the job ended with a "
            "StoreError; after the restart the retry reconciled that unload and finished"
        ),
    )
    assert inv.plan_status == "executed"
    after = {a.id: a for a in w.plan().actions}[target.id]
    assert after.result == {"reconciled": True}
