"""A plan's lifecycle in one place: its statuses, the transitions between them, the groups the store, the
plan pages and the CLI ask about, and a plan's kind. (A plan's *actions* have their own state machine,
:data:`pulsar_rebalance.core.plan.ACTION_TRANSITIONS`.)

::

    (plan_split) ──> empty                                    nothing to do (final)
         └─────────> pending ──> rejected | expired | superseded          (final)
                        └──────> approved ──> expired | superseded         (final)
                                    └───────> executing ──> executed | aborted   (final)
                                                 │  ^
                                                 v  │  (resume)
                                  interrupted | partially_executed | failed ──> aborted

* ``pending -> approved | rejected``: the gate's decision (``store.approvals.decide_plan``);
* ``pending -> expired``: the approval window ended (``expire_plan``); ``approved -> expired``: the
  maintenance window did not open before it (``store.windows.expire_waiting_plan``);
* ``pending | approved -> superseded``: an operator's newer plan of the cluster (``supersede_plans``);
* ``approved -> executing -> ...``: the executor (``store.execution.set_plan_status``), the only
  transitions :data:`EXECUTION_TRANSITIONS` lets it make; ``executing`` is at most one plan per cluster.

Pure: no I/O; the store's check constraint, the plan list's status filter and the templates read these.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Literal, get_args

PlanStatus = Literal[
    "pending",
    "approved",
    "rejected",
    "expired",
    "executing",
    "executed",
    "partially_executed",
    "failed",
    "empty",
    "superseded",
    "interrupted",
    "aborted",
]
PLAN_STATUSES: tuple[PlanStatus, ...] = get_args(PlanStatus)
"""Every plan status, in the order the plan list offers them."""

INITIAL: frozenset[PlanStatus] = frozenset({"pending", "empty"})
"""What ``plan_split`` stores: ``empty`` when nothing is planned, else ``pending`` (awaits the gate)."""

TRANSITIONS: Mapping[PlanStatus, frozenset[PlanStatus]] = MappingProxyType(
    {
        "pending": frozenset({"approved", "rejected", "expired", "superseded"}),
        "approved": frozenset({"executing", "expired", "superseded"}),
        "executing": frozenset({"executed", "partially_executed", "failed", "interrupted", "aborted"}),
        "interrupted": frozenset({"executing", "aborted"}),
        "partially_executed": frozenset({"executing", "aborted"}),
        "failed": frozenset({"executing", "aborted"}),
    }
)
"""Every allowed change of status; a status not listed here is final."""

_EXECUTOR_SETS: frozenset[PlanStatus] = frozenset(
    {"executing", "executed", "partially_executed", "failed", "interrupted", "aborted"}
)
EXECUTION_TRANSITIONS: Mapping[PlanStatus, frozenset[PlanStatus]] = MappingProxyType(
    {src: dst & _EXECUTOR_SETS for src, dst in TRANSITIONS.items() if src != "pending" and dst & _EXECUTOR_SETS}
)
"""The transitions the executor makes (``set_plan_status``); the gate's and the clock's are separate
functions that also write an approval row."""

FINAL: frozenset[PlanStatus] = frozenset(s for s in PLAN_STATUSES if s not in TRANSITIONS)
"""No way out: ``empty``, ``rejected``, ``expired``, ``superseded``, ``executed``, ``aborted``."""

AWAITING_DECISION: frozenset[PlanStatus] = frozenset({"pending"})
"""At the gate: approve or reject."""

UNFINISHED: frozenset[PlanStatus] = frozenset({"interrupted", "partially_executed", "failed"})
"""An execution that stopped before every action ended: resume or abort it."""

STOPPABLE: frozenset[PlanStatus] = UNFINISHED | frozenset[PlanStatus]({"approved", "executing"})
"""A stop can be requested (it takes effect before the next action)."""

OPEN: frozenset[PlanStatus] = frozenset(s for s in PLAN_STATUSES if s not in FINAL)
"""Not final: the cluster is busy with it (awaiting the gate, approved, executing or unfinished)."""

PlanKind = Literal["rebalance", "drain", "fill", "rollback", "fix"]
PLAN_KINDS: tuple[PlanKind, ...] = get_args(PlanKind)


def can_transition(src: str, dst: str) -> bool:
    """Whether a plan may go from status ``src`` to ``dst`` (the same status is not a transition)."""
    return dst in TRANSITIONS.get(src, frozenset())  # type: ignore[call-overload]


def plan_kind(summary: Mapping[str, Any] | None) -> PlanKind:
    """What a plan is for, from its stored summary: a ``drain`` or ``fill`` (``summary.mode``), a
    ``rollback`` of an earlier plan (``summary.rollbackOf``), a ``fix`` of placement-policy violations
    (``summary.fixPolicyViolations``), else a ``rebalance`` by the run's strategy."""
    summary = summary or {}
    mode = summary.get("mode")
    if isinstance(mode, Mapping) and mode.get("mode") in ("drain", "fill"):
        return "drain" if mode["mode"] == "drain" else "fill"
    if summary.get("rollbackOf"):
        return "rollback"
    if summary.get("fixPolicyViolations") is not None:
        return "fix"
    return "rebalance"


__all__ = [
    "AWAITING_DECISION",
    "EXECUTION_TRANSITIONS",
    "FINAL",
    "INITIAL",
    "OPEN",
    "PLAN_KINDS",
    "PLAN_STATUSES",
    "STOPPABLE",
    "TRANSITIONS",
    "UNFINISHED",
    "PlanKind",
    "PlanStatus",
    "can_transition",
    "plan_kind",
]
