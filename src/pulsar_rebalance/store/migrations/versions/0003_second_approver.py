"""Optional second approver: how many approvals a plan needs, and each approver's vote.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23

* ``plans.required_approvals`` (1 by default): how many *different* people must approve the plan
  before it is ``approved``; frozen with the plan when it is created (DAG param ``required_approvals``),
  so changing the policy later never changes what an open plan needs.
* ``approval_votes``: one row per approver of a plan (unique per plan and approver, never updated).
  The final ``approvals`` row is written when the last required vote arrives (or at once for a
  rejection, an expiry or a supersession) and names every approver.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("plans", sa.Column("required_approvals", sa.Integer(), server_default="1", nullable=False))
    op.create_check_constraint(op.f("ck_plans_required_approvals"), "plans", "required_approvals BETWEEN 1 AND 5")
    op.create_table(
        "approval_votes",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("plan_id", sa.Text(), nullable=False),
        sa.Column("voter", sa.Text(), nullable=False),
        sa.Column("voted_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("comment", sa.Text(), nullable=True),
        sa.Column("plan_hash", sa.Text(), nullable=True),
        sa.Column("via", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["plan_id"], ["plans.plan_id"], name=op.f("fk_approval_votes_plan_id_plans")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_approval_votes")),
        sa.UniqueConstraint("plan_id", "voter", name=op.f("uq_approval_votes_plan_id_voter")),
    )
    op.execute(
        "CREATE TRIGGER approval_votes_immutable AFTER UPDATE ON approval_votes "
        "FOR EACH ROW EXECUTE FUNCTION pr_forbid_immutable_update()"
    )


def downgrade() -> None:
    op.execute("DROP TRIGGER approval_votes_immutable ON approval_votes")
    op.drop_table("approval_votes")
    op.drop_constraint(op.f("ck_plans_required_approvals"), "plans", type_="check")
    op.drop_column("plans", "required_approvals")
