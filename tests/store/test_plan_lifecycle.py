"""The store moves plans only along the lifecycle's transitions (core/lifecycle.py)."""

from __future__ import annotations

import pytest


def test_the_store_refuses_a_transition_the_lifecycle_does_not_allow(db_url) -> None:
    import datetime as dt

    from pulsar_rebalance.errors import InvalidTransitionError
    from pulsar_rebalance.store import repository as repo
    from pulsar_rebalance.store.engine import make_engine, session_scope
    from pulsar_rebalance.store.windows import expire_waiting_plan

    engine = make_engine(db_url)
    with session_scope(engine) as s:
        cluster_id = repo.get_or_create_cluster(s, name="c", admin_url="http://c:8080")
        repo.start_run(s, run_id="r1", cluster_id=cluster_id, params={}, work_dir="/tmp/x")
        plan_id = repo.create_plan(
            s,
            run_id="r1",
            cluster_id=cluster_id,
            status="empty",
            expires_at=None,
            dry_run=False,
            strategies={},
            config={},
            summary={},
            decision={},
            actions=[],
        )
    with session_scope(engine) as s, pytest.raises(InvalidTransitionError, match="cannot go from empty to superseded"):
        from pulsar_rebalance.store.plans import _lock_plan, _move_plan

        _move_plan(_lock_plan(s, plan_id), "superseded", dt.datetime.now(dt.UTC))
    with session_scope(engine) as s:  # an empty plan is not waiting for any window: nothing expires
        assert expire_waiting_plan(s, plan_id=plan_id, now=dt.datetime.now(dt.UTC), opens_at=None) is False
        assert repo.get_plan(s, plan_id=plan_id).status == "empty"
