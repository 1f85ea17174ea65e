"""Placement constraints stored with each run.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02

* ``placement_policies``: one row per run, written by collect_load in the snapshot's transaction: the
  cluster's namespace isolation policies, failure domains and namespaces' anti-affinity groups as the
  admin API answered them (the ``decide`` contract's ``namespaceIsolationPolicies``, ``failureDomains``
  and ``antiAffinityGroups``). detect_overload passes them to the decision core, plan_split to the
  do-no-harm guard; with the ownership history they say why a bundle was where it was at a time
  (``repository.placement_policies_at``). Runs collected before this revision have no row: none known.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "placement_policies",
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("cluster_id", sa.BigInteger(), nullable=False),
        sa.Column("collected_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("namespace_isolation_policies", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("failure_domains", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("anti_affinity_groups", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.ForeignKeyConstraint(
            ["cluster_id"], ["clusters.id"], name=op.f("fk_placement_policies_cluster_id_clusters")
        ),
        sa.ForeignKeyConstraint(["run_id"], ["runs.run_id"], name=op.f("fk_placement_policies_run_id_runs")),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_placement_policies")),
    )
    op.create_index(
        "ix_placement_policies_cluster_id_collected_at", "placement_policies", ["cluster_id", "collected_at"]
    )


def downgrade() -> None:
    op.drop_index("ix_placement_policies_cluster_id_collected_at", table_name="placement_policies")
    op.drop_table("placement_policies")
