"""Bundle ranges across splits, ownership history, and the one-query "where was X at T and why"."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from pulsar_rebalance.store import InvalidRowError, session_scope
from pulsar_rebalance.store import repository as repo

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
NS = "public/default"
FULL = [0x00000000, 0xFFFFFFFF]
HALVES = [0x00000000, 0x7FFFFFFF, 0xFFFFFFFF]  # Pulsar's range_equally_divide of the full range
LEFT = f"{NS}/0x00000000_0x7fffffff"
RIGHT = f"{NS}/0x7fffffff_0xffffffff"


def _start_run(w, run_id: str) -> None:
    with session_scope(w.engine) as s:
        repo.start_run(s, run_id=run_id, cluster_id=w.cluster_id)


def test_split_retires_parent_and_creates_children_with_parent_id(world) -> None:
    with session_scope(world.engine) as s:
        first = repo.sync_bundle_ranges(
            s, cluster_id=world.cluster_id, run_id=world.run_id, namespace=NS, boundaries=FULL, at=T0
        )
    assert [r.range_name for r in first.created] == ["0x00000000_0xffffffff"]
    assert first.created[0].parent_id is None and first.retired == ()
    parent_id = first.created[0].id

    _start_run(world, "run-2")
    with session_scope(world.engine) as s:
        again = repo.sync_bundle_ranges(
            s, cluster_id=world.cluster_id, run_id="run-2", namespace=NS, boundaries=FULL, at=T0 + timedelta(minutes=1)
        )
        assert not again.changed and again.unchanged == ("0x00000000_0xffffffff",)
        split = repo.sync_bundle_ranges(
            s,
            cluster_id=world.cluster_id,
            run_id="run-2",
            namespace=NS,
            boundaries=HALVES,
            at=T0 + timedelta(minutes=2),
        )

    assert [r.range_name for r in split.retired] == ["0x00000000_0xffffffff"]
    assert split.retired[0].retired_run_id == "run-2"
    assert split.retired[0].retired_at == T0 + timedelta(minutes=2)
    assert [(r.range_name, r.lower, r.upper, r.parent_id, r.created_run_id) for r in split.created] == [
        ("0x00000000_0x7fffffff", 0, 0x7FFFFFFF, parent_id, "run-2"),
        ("0x7fffffff_0xffffffff", 0x7FFFFFFF, 0xFFFFFFFF, parent_id, "run-2"),
    ]
    with session_scope(world.engine) as s:
        live = repo.live_bundle_ranges(s, cluster_id=world.cluster_id, namespace=NS)
        assert [r.bundle for r in live] == [LEFT, RIGHT]
        # a second split of the left half: only the left half is retired; its children point at it
        left_id = live[0].id
        diff = repo.sync_bundle_ranges(
            s,
            cluster_id=world.cluster_id,
            run_id="run-2",
            namespace=NS,
            boundaries=[0, 0x3FFFFFFF, 0x7FFFFFFF, 0xFFFFFFFF],
        )
    assert [r.range_name for r in diff.retired] == ["0x00000000_0x7fffffff"]
    assert {r.parent_id for r in diff.created} == {left_id}
    assert diff.unchanged == ("0x7fffffff_0xffffffff",)
    with session_scope(world.engine) as s:  # the same boundaries again: nothing to do
        same = repo.sync_bundle_ranges(
            s,
            cluster_id=world.cluster_id,
            run_id="run-2",
            namespace=NS,
            boundaries=[0, 0x3FFFFFFF, 0x7FFFFFFF, 0xFFFFFFFF],
        )
        total = s.execute(text("SELECT count(*) FROM bundle_ranges")).scalar()
    assert not same.changed and len(same.unchanged) == 3
    assert total == 5  # the full range, its 2 halves, the 2 quarters of the left half


def test_split_records_the_action_that_created_the_children(world, make_plan) -> None:
    plan_id = make_plan(actions=[{"kind": "split", "bundle": f"{NS}/0x00000000_0xffffffff", "source_broker": "b1:8080",
                  "boundaries": [0x7FFFFFFF], "split_algorithm": "range_equally_divide", "reason": "too many topics"}],
    )  # fmt: skip
    with session_scope(world.engine) as s:
        action_id = repo.get_plan(s, plan_id=plan_id).actions[0].id
        repo.sync_bundle_ranges(s, cluster_id=world.cluster_id, run_id=world.run_id, namespace=NS, boundaries=FULL)
        diff = repo.sync_bundle_ranges(
            s, cluster_id=world.cluster_id, run_id=world.run_id, namespace=NS, boundaries=HALVES, action_id=action_id
        )
    assert {r.created_by_action_id for r in diff.created} == {action_id}


@pytest.mark.parametrize(
    ("boundaries", "field"),
    [([0], "boundaries"), ([0, 0], "boundaries[1]"), ([5, 3], "boundaries[1]"), ([0, 2**32], "boundaries[1]"),
     ([-1, 4], "boundaries[0]"), ([0, "0x10"], "boundaries[1]")],
)  # fmt: skip
def test_bad_boundaries_name_the_field_and_write_nothing(world, boundaries: list, field: str) -> None:
    with pytest.raises(InvalidRowError) as info, session_scope(world.engine) as s:
        repo.sync_bundle_ranges(
            s, cluster_id=world.cluster_id, run_id=world.run_id, namespace=NS, boundaries=boundaries
        )
    assert info.value.field == field
    with world.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM bundle_ranges")).scalar() == 0


def _approve_and_complete(w, plan_id: str, *, by: str, at_offset: timedelta) -> int:
    with session_scope(w.engine) as s:
        repo.decide_plan(s, plan_id=plan_id, decision="approved", decided_by=by, comment="go", now=T0 + at_offset)
        repo.set_plan_status(s, plan_id=plan_id, status="executing")
        action_id = repo.get_plan(s, plan_id=plan_id).actions[0].id
        repo.transition_action(s, action_id=action_id, to="in_progress", now=T0 + at_offset)
        repo.transition_action(s, action_id=action_id, to="completed", now=T0 + at_offset + timedelta(seconds=5))
        repo.set_plan_status(s, plan_id=plan_id, status="executed")
    return action_id


def test_ownership_history_across_two_moves_and_the_one_query(world, make_plan, unload) -> None:
    w = world
    with session_scope(w.engine) as s:
        repo.sync_bundle_ranges(s, cluster_id=w.cluster_id, run_id=w.run_id, namespace=NS, boundaries=HALVES, at=T0)
        diff = repo.sync_ownership(
            s, cluster_id=w.cluster_id, run_id=w.run_id, ownership={LEFT: "b1:8080", RIGHT: "b2:8080"},
            cause="observed at collect", at=T0,
        )  # fmt: skip
    assert [(c.bundle, c.from_broker, c.to_broker) for c in diff.changes] == [
        (LEFT, None, "b1:8080"),
        (RIGHT, None, "b2:8080"),
    ]

    # move 1: alice approves unloading LEFT from b1 to b2; the executor records the new owner
    plan1 = make_plan(run_id="run-2", actions=[unload(LEFT, "b1:8080", "b2:8080", "b1 at 91% > avg+10%")],
                     expires_at=T0 + timedelta(days=1))  # fmt: skip
    action1 = _approve_and_complete(w, plan1, by="alice", at_offset=timedelta(hours=1))
    with session_scope(w.engine) as s:
        moved = repo.sync_ownership(
            s, cluster_id=w.cluster_id, run_id="run-2", ownership={LEFT: "b2:8080", RIGHT: "b2:8080"},
            cause="observed at collect", cause_action_ids={LEFT: action1}, at=T0 + timedelta(hours=1, seconds=5),
        )  # fmt: skip
        # the next collect observes the same map: nothing changes (idempotent)
        same = repo.sync_ownership(
            s, cluster_id=w.cluster_id, run_id="run-2", ownership={LEFT: "b2:8080", RIGHT: "b2:8080"},
            cause="observed at collect", at=T0 + timedelta(hours=1, minutes=1),
        )  # fmt: skip
    assert [(c.bundle, c.from_broker, c.to_broker, c.cause_action_id) for c in moved.moved] == [
        (LEFT, "b1:8080", "b2:8080", action1)
    ]
    assert moved.changes[0].cause == f"unload approved in plan {plan1} by alice: b1 at 91% > avg+10%"
    assert not same.changed and same.unchanged == 2

    # move 2: observed without our action (e.g. Pulsar's own shedder moved it to b3)
    _start_run(w, "run-3")
    with session_scope(w.engine) as s:
        repo.sync_ownership(
            s, cluster_id=w.cluster_id, run_id="run-3", ownership={LEFT: "b3:8080", RIGHT: "b2:8080"},
            cause="observed at collect", at=T0 + timedelta(hours=2),
        )  # fmt: skip

    with session_scope(w.engine) as s:
        before = repo.ownership_at(s, cluster="c1", bundle=LEFT, at=T0 + timedelta(minutes=30))
        during = repo.ownership_at(s, cluster="c1", bundle=LEFT, at=T0 + timedelta(hours=1, minutes=30))
        after = repo.ownership_at(s, cluster=w.cluster_id, bundle=LEFT, at=T0 + timedelta(hours=3))
        never = repo.ownership_at(s, cluster="c1", bundle=LEFT, at=T0 - timedelta(seconds=1))
        history = repo.ownership_history(s, cluster_id=w.cluster_id, bundle=LEFT)

    assert before is not None and before.broker_id == "b1:8080" and before.approved_by is None
    assert before.cause == "observed at collect"
    assert during is not None and during.broker_id == "b2:8080"
    assert (during.approved_by, during.plan_id, during.action_id, during.action_kind) == (
        "alice",
        plan1,
        action1,
        "unload",
    )
    assert during.action_reason == "b1 at 91% > avg+10%" and during.approval_comment == "go"
    assert during.valid_to == T0 + timedelta(hours=2)
    assert after is not None and after.broker_id == "b3:8080" and after.action_id is None and after.valid_to is None
    assert never is None
    assert [(h.broker_id, h.ended_run_id) for h in history] == [
        ("b1:8080", "run-2"),
        ("b2:8080", "run-3"),
        ("b3:8080", None),
    ]
    # the boundary instant belongs to the new owner: intervals are [valid_from, valid_to)
    with session_scope(w.engine) as s:
        at_boundary = repo.ownership_at(s, cluster="c1", bundle=LEFT, at=T0 + timedelta(hours=2))
    assert at_boundary is not None and at_boundary.broker_id == "b3:8080"


def test_the_documented_one_query_answers_directly(world) -> None:
    """The SQL printed in docs/schema.md, run verbatim against the view."""
    w = world
    with session_scope(w.engine) as s:
        repo.sync_bundle_ranges(s, cluster_id=w.cluster_id, run_id=w.run_id, namespace=NS, boundaries=HALVES, at=T0)
        repo.sync_ownership(s, cluster_id=w.cluster_id, run_id=w.run_id, ownership={LEFT: "b1:8080"},
                            cause="observed at collect", at=T0)  # fmt: skip
    with w.engine.connect() as conn:
        row = conn.execute(
            text(
                "SELECT broker_id, cause, approved_by FROM bundle_ownership_history "
                "WHERE cluster = :c AND bundle = :b AND valid_from <= :t AND (valid_to IS NULL OR valid_to > :t)"
            ),
            {"c": "c1", "b": LEFT, "t": T0 + timedelta(seconds=1)},
        ).one()
    assert tuple(row) == ("b1:8080", "observed at collect", None)


def test_bundles_that_disappear_are_closed_and_reappear_as_new_rows(world) -> None:
    w = world
    with session_scope(w.engine) as s:
        repo.sync_bundle_ranges(s, cluster_id=w.cluster_id, run_id=w.run_id, namespace=NS, boundaries=HALVES, at=T0)
        repo.sync_ownership(s, cluster_id=w.cluster_id, run_id=w.run_id, ownership={LEFT: "b1:8080", RIGHT: "b1:8080"},
                            cause="observed", at=T0)  # fmt: skip
        gone = repo.sync_ownership(s, cluster_id=w.cluster_id, run_id=w.run_id, ownership={LEFT: "b1:8080"},
                                   cause="observed", at=T0 + timedelta(minutes=1))  # fmt: skip
        assert [(c.bundle, c.from_broker, c.to_broker) for c in gone.changes] == [(RIGHT, "b1:8080", None)]
        assert repo.current_ownership(s, cluster_id=w.cluster_id) == {LEFT: "b1:8080"}
        back = repo.sync_ownership(s, cluster_id=w.cluster_id, run_id=w.run_id, ownership={LEFT: "b1:8080", RIGHT: "b3:8080"},
                                   cause="observed", at=T0 + timedelta(minutes=2))  # fmt: skip
        assert [(c.bundle, c.from_broker, c.to_broker) for c in back.changes] == [(RIGHT, None, "b3:8080")]
        history = repo.ownership_history(s, cluster_id=w.cluster_id, bundle=RIGHT)
    assert [(h.broker_id, h.valid_from, h.valid_to) for h in history] == [
        ("b1:8080", T0, T0 + timedelta(minutes=1)),
        ("b3:8080", T0 + timedelta(minutes=2), None),
    ]


def test_namespaces_scope_limits_what_is_closed(world) -> None:
    w = world
    other = "public/other/0x00000000_0xffffffff"
    with session_scope(w.engine) as s:
        repo.sync_bundle_ranges(s, cluster_id=w.cluster_id, run_id=w.run_id, namespace=NS, boundaries=HALVES, at=T0)
        repo.sync_bundle_ranges(
            s, cluster_id=w.cluster_id, run_id=w.run_id, namespace="public/other", boundaries=FULL, at=T0
        )
        repo.sync_ownership(s, cluster_id=w.cluster_id, run_id=w.run_id, ownership={LEFT: "b1:8080", other: "b2:8080"},
                            cause="observed", at=T0)  # fmt: skip
        diff = repo.sync_ownership(s, cluster_id=w.cluster_id, run_id=w.run_id, ownership={LEFT: "b1:8080"},
                                   cause="observed", namespaces=[NS], at=T0 + timedelta(minutes=1))  # fmt: skip
        assert not diff.changed
        assert repo.current_ownership(s, cluster_id=w.cluster_id) == {LEFT: "b1:8080", other: "b2:8080"}
        with pytest.raises(InvalidRowError, match="outside namespaces"):
            repo.sync_ownership(s, cluster_id=w.cluster_id, run_id=w.run_id, ownership={other: "b1:8080"},
                                cause="observed", namespaces=[NS])  # fmt: skip


def test_ownership_needs_a_live_range_and_valid_actions(world, make_plan, unload) -> None:
    w = world
    with pytest.raises(InvalidRowError, match="call sync_bundle_ranges") as info, session_scope(w.engine) as s:
        repo.sync_ownership(s, cluster_id=w.cluster_id, run_id=w.run_id, ownership={LEFT: "b1:8080"}, cause="observed")
    assert info.value.field == f"ownership[{LEFT!r}]"

    plan_id = make_plan(actions=[unload(LEFT)])  # pending, not approved
    with session_scope(w.engine) as s:
        action_id = repo.get_plan(s, plan_id=plan_id).actions[0].id
        repo.sync_bundle_ranges(s, cluster_id=w.cluster_id, run_id=w.run_id, namespace=NS, boundaries=HALVES)
    with pytest.raises(InvalidRowError, match="not approved"), session_scope(w.engine) as s:
        repo.sync_ownership(s, cluster_id=w.cluster_id, run_id=w.run_id, ownership={LEFT: "b2:8080"},
                            cause="observed", cause_action_ids={LEFT: action_id})  # fmt: skip
    with pytest.raises(InvalidRowError, match="not in ownership"), session_scope(w.engine) as s:
        repo.sync_ownership(s, cluster_id=w.cluster_id, run_id=w.run_id, ownership={},
                            cause="observed", cause_action_ids={LEFT: action_id})  # fmt: skip
    with pytest.raises(InvalidRowError, match="not a bundle name"), session_scope(w.engine) as s:
        repo.sync_ownership(s, cluster_id=w.cluster_id, run_id=w.run_id, ownership={"public/default": "b1:8080"},
                            cause="observed")  # fmt: skip
    with w.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM ownership")).scalar() == 0


def test_closing_before_an_interval_began_is_refused(world) -> None:
    w = world
    with session_scope(w.engine) as s:
        repo.sync_bundle_ranges(s, cluster_id=w.cluster_id, run_id=w.run_id, namespace=NS, boundaries=HALVES, at=T0)
        repo.sync_ownership(s, cluster_id=w.cluster_id, run_id=w.run_id, ownership={LEFT: "b1:8080"}, cause="o", at=T0)
    with pytest.raises(InvalidRowError, match="before"), session_scope(w.engine) as s:
        repo.sync_ownership(s, cluster_id=w.cluster_id, run_id=w.run_id, ownership={LEFT: "b2:8080"}, cause="o",
                            at=T0 - timedelta(hours=1))  # fmt: skip


def test_recently_unloaded_bundles_come_from_completed_real_unloads(world, make_plan, unload) -> None:
    w = world
    plan1 = make_plan(run_id="run-2", actions=[unload(LEFT)], expires_at=T0 + timedelta(days=1))
    _approve_and_complete(w, plan1, by="alice", at_offset=timedelta(hours=1))
    dry = make_plan(run_id="run-3", actions=[unload(RIGHT)], expires_at=T0 + timedelta(days=1), dry_run=True)
    _approve_and_complete(w, dry, by="alice", at_offset=timedelta(hours=1))
    with session_scope(w.engine) as s:
        recent = repo.recently_unloaded_bundles(s, cluster_id=w.cluster_id, since=T0)
        later = repo.recently_unloaded_bundles(s, cluster_id=w.cluster_id, since=T0 + timedelta(hours=2))
    finished = T0 + timedelta(hours=1, seconds=5)
    assert recent == {LEFT: int(finished.timestamp() * 1000)}
    assert later == {}
