"""Approval policy and execution liveness: plan content hash, the Airflow gate, supersession, stop switch.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23

* ``plans.content_hash``: SHA-256 of what will run (the actions), computed at creation; an approval
  records the hash its approver saw (``approvals.plan_hash``) and the executor verifies both.
* ``plans.gate``: where the plan waits for a decision in Airflow (dag, run, task, map index) once the
  human-in-the-loop gate is open; a decision must then go through that gate.
* ``plans.superseded_by``, ``plans.stop_requested``: mutable execution-policy columns.
* New plan statuses ``superseded``, ``interrupted``, ``aborted``; approval decisions ``superseded``;
  ``approvals.via`` says which path decided (airflow-gate, cli, policy, system).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_OLD_PLAN_STATUSES = (
    "pending",
    "approved",
    "rejected",
    "expired",
    "executing",
    "executed",
    "partially_executed",
    "failed",
    "empty",
)
_NEW_PLAN_STATUSES = _OLD_PLAN_STATUSES + ("superseded", "interrupted", "aborted")
_OLD_DECISIONS = ("approved", "rejected", "expired")
_NEW_DECISIONS = _OLD_DECISIONS + ("superseded",)
_OLD_MUTABLE = ("status", "updated_at", "result")
_NEW_MUTABLE = _OLD_MUTABLE + ("gate", "superseded_by", "stop_requested")


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def _trigger(mutable: tuple[str, ...]) -> list[str]:
    args = ", ".join(f"'{c}'" for c in mutable)
    return [
        "DROP TRIGGER plans_immutable ON plans",
        f"CREATE TRIGGER plans_immutable AFTER UPDATE ON plans FOR EACH ROW "
        f"EXECUTE FUNCTION pr_forbid_immutable_update({args})",
    ]


def upgrade() -> None:
    op.add_column("plans", sa.Column("content_hash", sa.Text(), nullable=True))
    op.add_column("plans", sa.Column("gate", postgresql.JSONB(astext_type=sa.Text()), nullable=True))
    op.add_column("plans", sa.Column("superseded_by", sa.Text(), nullable=True))
    op.add_column("plans", sa.Column("stop_requested", postgresql.JSONB(astext_type=sa.Text()), nullable=True))
    op.add_column("approvals", sa.Column("plan_hash", sa.Text(), nullable=True))
    op.add_column("approvals", sa.Column("via", sa.Text(), nullable=True))
    op.drop_constraint(op.f("ck_plans_status"), "plans", type_="check")
    op.create_check_constraint(op.f("ck_plans_status"), "plans", _in("status", _NEW_PLAN_STATUSES))
    op.drop_constraint(op.f("ck_approvals_decision"), "approvals", type_="check")
    op.create_check_constraint(op.f("ck_approvals_decision"), "approvals", _in("decision", _NEW_DECISIONS))
    for sql in _trigger(_NEW_MUTABLE):
        op.execute(sql)


def downgrade() -> None:
    for sql in _trigger(_OLD_MUTABLE):
        op.execute(sql)
    op.drop_constraint(op.f("ck_approvals_decision"), "approvals", type_="check")
    op.create_check_constraint(op.f("ck_approvals_decision"), "approvals", _in("decision", _OLD_DECISIONS))
    op.drop_constraint(op.f("ck_plans_status"), "plans", type_="check")
    op.create_check_constraint(op.f("ck_plans_status"), "plans", _in("status", _OLD_PLAN_STATUSES))
    for column in ("via", "plan_hash"):
        op.drop_column("approvals", column)
    for column in ("stop_requested", "superseded_by", "gate", "content_hash"):
        op.drop_column("plans", column)
