"""Maintenance windows and the imbalance watch.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-26

* ``maintenance_windows``: one row per cluster that has windows (no row = no restriction): the setting
  (``core.windows`` JSON: time zone, cron + duration list), who set it and when. ``pulsar-rebalance
  windows set|clear`` write it with an audit row (``maintenance_windows_set`` / ``_cleared``).
* ``imbalance_watch``: the state of the optional imbalance-triggered runs per cluster: how many
  consecutive samples had the worst broker over the threshold, whether the watch is armed (a run
  triggered disarms it until the worst broker is back below the threshold), and the run it triggered.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "maintenance_windows",
        sa.Column("cluster_id", sa.BigInteger(), nullable=False),
        sa.Column("setting", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated_by", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["cluster_id"], ["clusters.id"], name=op.f("fk_maintenance_windows_cluster_id_clusters")
        ),
        sa.PrimaryKeyConstraint("cluster_id", name=op.f("pk_maintenance_windows")),
    )
    op.create_table(
        "imbalance_watch",
        sa.Column("cluster_id", sa.BigInteger(), nullable=False),
        sa.Column("over_count", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("armed", sa.Boolean(), server_default=sa.text("true"), nullable=False),
        sa.Column("last_sample_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_worst", sa.Double(), nullable=True),
        sa.Column("triggered_run_id", sa.Text(), nullable=True),
        sa.Column("triggered_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["cluster_id"], ["clusters.id"], name=op.f("fk_imbalance_watch_cluster_id_clusters")),
        sa.PrimaryKeyConstraint("cluster_id", name=op.f("pk_imbalance_watch")),
    )


def downgrade() -> None:
    op.drop_table("imbalance_watch")
    op.drop_table("maintenance_windows")
