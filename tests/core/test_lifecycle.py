"""The plan lifecycle (core/lifecycle.py): one typed place for the statuses and their transitions, and the
store, the plan pages and the CLI read it instead of holding their own lists."""

from __future__ import annotations

import pytest

from pulsar_rebalance.core import lifecycle as L


def _reachable(start: frozenset[str]) -> set[str]:
    seen, todo = set(start), list(start)
    while todo:
        for nxt in L.TRANSITIONS.get(todo.pop(), frozenset()):  # type: ignore[call-overload]
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_every_status_is_reachable_from_what_plan_split_stores_and_finals_have_no_way_out() -> None:
    assert _reachable(L.INITIAL) == set(L.PLAN_STATUSES)
    assert L.FINAL == {"empty", "rejected", "expired", "superseded", "executed", "aborted"}
    assert all(s not in L.TRANSITIONS for s in L.FINAL)
    assert all(dst <= set(L.PLAN_STATUSES) for dst in L.TRANSITIONS.values())
    assert L.OPEN == set(L.PLAN_STATUSES) - L.FINAL
    # only an approved plan ever starts executing; a decision is only ever made on a pending one
    assert {s for s in L.PLAN_STATUSES if L.can_transition(s, "executing")} == {"approved"} | L.UNFINISHED
    assert {s for s in L.PLAN_STATUSES if L.can_transition(s, "approved")} == {"pending"}
    assert not L.can_transition("executed", "executing") and not L.can_transition("pending", "pending")


def test_the_executor_makes_only_execution_transitions_and_the_store_uses_the_lifecycle() -> None:
    from pulsar_rebalance.core.progress import PROGRESS_STATUSES
    from pulsar_rebalance.store.execution import PLAN_TRANSITIONS
    from pulsar_rebalance.store.plans import FINAL_PLAN_STATUSES
    from pulsar_rebalance.store.tables import PLAN_STATUSES
    from pulsar_rebalance.store.windows import BLOCKING_PLAN_STATUSES

    assert PLAN_STATUSES == L.PLAN_STATUSES and FINAL_PLAN_STATUSES == L.FINAL
    assert (
        PLAN_TRANSITIONS
        == L.EXECUTION_TRANSITIONS
        == {
            "approved": {"executing"},
            "executing": {"executed", "partially_executed", "failed", "interrupted", "aborted"},
            "interrupted": {"executing", "aborted"},
            "partially_executed": {"executing", "aborted"},
            "failed": {"executing", "aborted"},
        }
    )
    assert set(BLOCKING_PLAN_STATUSES) == L.OPEN
    assert set(PROGRESS_STATUSES) == {"approved", "executing", *L.TRANSITIONS["executing"]}


def test_every_status_has_a_colour_on_the_plan_pages() -> None:
    from pulsar_rebalance.core.plan import ACTION_STATES
    from pulsar_rebalance.orchestration.ui.app import STATUS_TONE

    assert set(STATUS_TONE) == set(L.PLAN_STATUSES) | set(ACTION_STATES)


@pytest.mark.parametrize(
    ("summary", "kind"),
    [
        (None, "rebalance"),
        ({"decision": {"label": "Success"}}, "rebalance"),
        ({"mode": {"mode": "drain", "brokers": ["b:8080"]}}, "drain"),
        ({"mode": {"mode": "fill", "brokers": ["b:8080"]}}, "fill"),
        ({"rollbackOf": "plan-1"}, "rollback"),
        ({"fixPolicyViolations": {"violations": []}}, "fix"),
    ],
)
def test_a_plans_kind_comes_from_its_summary(summary, kind) -> None:
    assert L.plan_kind(summary) == kind and kind in L.PLAN_KINDS
