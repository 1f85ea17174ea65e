"""Cordoned brokers: brokers no plan may target until an operator uncordons them.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-26

* ``cordoned_brokers``: one row per cluster and cordoned broker. A ``mode=drain`` run cordons the
  brokers it drains when it plans (``run_id``: that run); ``pulsar-rebalance brokers cordon`` /
  ``uncordon`` add and remove rows by hand (``run_id`` null). plan_split passes the cluster's rows to
  the do-no-harm guard, which refuses (and re-places) any move onto them, whatever made the plan.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "cordoned_brokers",
        sa.Column("cluster_id", sa.BigInteger(), nullable=False),
        sa.Column("broker", sa.Text(), nullable=False),
        sa.Column("cordoned_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=True),
        sa.Column("cordoned_by", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["cluster_id"], ["clusters.id"], name=op.f("fk_cordoned_brokers_cluster_id_clusters")),
        sa.ForeignKeyConstraint(["run_id"], ["runs.run_id"], name=op.f("fk_cordoned_brokers_run_id_runs")),
        sa.PrimaryKeyConstraint("cluster_id", "broker", name=op.f("pk_cordoned_brokers")),
    )


def downgrade() -> None:
    op.drop_table("cordoned_brokers")
