"""Initial schema: tables, partial unique indexes, the immutability trigger and the history view.

Revision ID: 0001
Revises:
Create Date: 2026-11-22

Self-contained on purpose (it does not import ``store.tables``): a migration must keep producing the
same schema after the models evolve. ``tests/store/test_schema.py`` checks that the models match.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "audit_log",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("actor", sa.Text(), nullable=False),
        sa.Column("event", sa.Text(), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=True),
        sa.Column("plan_id", sa.Text(), nullable=True),
        sa.Column("action_id", sa.BigInteger(), nullable=True),
        sa.Column(
            "details", postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"), nullable=False
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_log")),
    )
    op.create_index("ix_audit_log_plan_id", "audit_log", ["plan_id"], unique=False)
    op.create_table(
        "clusters",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("admin_url", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_clusters")),
        sa.UniqueConstraint("name", name=op.f("uq_clusters_name")),
    )
    op.create_table(
        "runs",
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("cluster_id", sa.BigInteger(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("status", sa.Text(), server_default="running", nullable=False),
        sa.Column(
            "params", postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"), nullable=False
        ),
        sa.Column("work_dir", sa.Text(), nullable=True),
        sa.Column("stage", sa.Text(), nullable=True),
        sa.CheckConstraint(
            "status IN ('running', 'succeeded', 'failed', 'nothing_to_do')", name=op.f("ck_runs_status")
        ),
        sa.ForeignKeyConstraint(["cluster_id"], ["clusters.id"], name=op.f("fk_runs_cluster_id_clusters")),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_runs")),
    )
    op.create_index(op.f("ix_runs_cluster_id"), "runs", ["cluster_id"], unique=False)
    op.create_table(
        "broker_load",
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("broker_id", sa.Text(), nullable=False),
        sa.Column("raw_report", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("cpu_usage", sa.Double(), nullable=True),
        sa.Column("memory_usage", sa.Double(), nullable=True),
        sa.Column("direct_memory_usage", sa.Double(), nullable=True),
        sa.Column("bandwidth_in_usage", sa.Double(), nullable=True),
        sa.Column("bandwidth_out_usage", sa.Double(), nullable=True),
        sa.Column("msg_rate_in", sa.Double(), nullable=True),
        sa.Column("msg_rate_out", sa.Double(), nullable=True),
        sa.Column("msg_throughput_in", sa.Double(), nullable=True),
        sa.Column("msg_throughput_out", sa.Double(), nullable=True),
        sa.Column("num_bundles", sa.Integer(), nullable=True),
        sa.Column("num_topics", sa.Integer(), nullable=True),
        sa.Column("max_usage", sa.Double(), nullable=True),
        sa.Column("weighted_max_usage", sa.Double(), nullable=True),
        sa.Column("usage_ema", sa.Double(), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["runs.run_id"], name=op.f("fk_broker_load_run_id_runs")),
        sa.PrimaryKeyConstraint("run_id", "broker_id", name=op.f("pk_broker_load")),
    )
    op.create_table(
        "brokers",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("cluster_id", sa.BigInteger(), nullable=False),
        sa.Column("broker_id", sa.Text(), nullable=False),
        sa.Column("web_service_url", sa.Text(), nullable=False),
        sa.Column("first_seen_run_id", sa.Text(), nullable=False),
        sa.Column("last_seen_run_id", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["cluster_id"], ["clusters.id"], name=op.f("fk_brokers_cluster_id_clusters")),
        sa.ForeignKeyConstraint(["first_seen_run_id"], ["runs.run_id"], name=op.f("fk_brokers_first_seen_run_id_runs")),
        sa.ForeignKeyConstraint(["last_seen_run_id"], ["runs.run_id"], name=op.f("fk_brokers_last_seen_run_id_runs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_brokers")),
        sa.UniqueConstraint("cluster_id", "broker_id", name=op.f("uq_brokers_cluster_id_broker_id")),
    )
    op.create_table(
        "bundle_load",
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("bundle", sa.Text(), nullable=False),
        sa.Column("namespace", sa.Text(), nullable=False),
        sa.Column("bundle_range", sa.Text(), nullable=False),
        sa.Column("broker_id", sa.Text(), nullable=False),
        sa.Column("msg_rate_in", sa.Double(), nullable=True),
        sa.Column("msg_rate_out", sa.Double(), nullable=True),
        sa.Column("msg_throughput_in", sa.Double(), nullable=True),
        sa.Column("msg_throughput_out", sa.Double(), nullable=True),
        sa.Column("topics", sa.Integer(), nullable=True),
        sa.Column("producers", sa.Integer(), nullable=True),
        sa.Column("consumers", sa.Integer(), nullable=True),
        sa.Column("short_term", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("long_term", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["runs.run_id"], name=op.f("fk_bundle_load_run_id_runs")),
        sa.PrimaryKeyConstraint("run_id", "bundle", name=op.f("pk_bundle_load")),
    )
    op.create_table(
        "bundle_time_averages",
        sa.Column("cluster_id", sa.BigInteger(), nullable=False),
        sa.Column("bundle", sa.Text(), nullable=False),
        sa.Column("bundle_data", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("updated_run_id", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.ForeignKeyConstraint(
            ["cluster_id"], ["clusters.id"], name=op.f("fk_bundle_time_averages_cluster_id_clusters")
        ),
        sa.ForeignKeyConstraint(
            ["updated_run_id"], ["runs.run_id"], name=op.f("fk_bundle_time_averages_updated_run_id_runs")
        ),
        sa.PrimaryKeyConstraint("cluster_id", "bundle", name=op.f("pk_bundle_time_averages")),
    )
    op.create_table(
        "plans",
        sa.Column("plan_id", sa.Text(), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("cluster_id", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("dry_run", sa.Boolean(), nullable=False),
        sa.Column("strategies", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("config", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("config_hash", sa.Text(), nullable=False),
        sa.Column("summary", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("decision", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("result", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.CheckConstraint(
            "status IN ('pending', 'approved', 'rejected', 'expired', 'executing', 'executed', 'partially_executed', 'failed', 'empty')",
            name=op.f("ck_plans_status"),
        ),
        sa.ForeignKeyConstraint(["cluster_id"], ["clusters.id"], name=op.f("fk_plans_cluster_id_clusters")),
        sa.ForeignKeyConstraint(["run_id"], ["runs.run_id"], name=op.f("fk_plans_run_id_runs")),
        sa.PrimaryKeyConstraint("plan_id", name=op.f("pk_plans")),
        sa.UniqueConstraint("run_id", name=op.f("uq_plans_run_id")),
    )
    op.create_index(op.f("ix_plans_cluster_id"), "plans", ["cluster_id"], unique=False)
    op.create_index(
        "uq_plans_one_executing", "plans", ["cluster_id"], unique=True, postgresql_where=sa.text("status = 'executing'")
    )
    op.create_table(
        "strategy_state",
        sa.Column("cluster_id", sa.BigInteger(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("state", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("updated_run_id", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.ForeignKeyConstraint(["cluster_id"], ["clusters.id"], name=op.f("fk_strategy_state_cluster_id_clusters")),
        sa.ForeignKeyConstraint(
            ["updated_run_id"], ["runs.run_id"], name=op.f("fk_strategy_state_updated_run_id_runs")
        ),
        sa.PrimaryKeyConstraint("cluster_id", "name", name=op.f("pk_strategy_state")),
    )
    op.create_table(
        "approvals",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("plan_id", sa.Text(), nullable=False),
        sa.Column("decision", sa.Text(), nullable=False),
        sa.Column("decided_by", sa.Text(), nullable=False),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("comment", sa.Text(), nullable=True),
        sa.CheckConstraint("decision IN ('approved', 'rejected', 'expired')", name=op.f("ck_approvals_decision")),
        sa.ForeignKeyConstraint(["plan_id"], ["plans.plan_id"], name=op.f("fk_approvals_plan_id_plans")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_approvals")),
        sa.UniqueConstraint("plan_id", name=op.f("uq_approvals_plan_id")),
    )
    op.create_table(
        "plan_actions",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("plan_id", sa.Text(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("namespace", sa.Text(), nullable=False),
        sa.Column("bundle_range", sa.Text(), nullable=False),
        sa.Column("bundle", sa.Text(), sa.Computed("namespace || '/' || bundle_range", persisted=True), nullable=False),
        sa.Column("source_broker", sa.Text(), nullable=False),
        sa.Column("destination_broker", sa.Text(), nullable=True),
        sa.Column("boundaries", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("split_algorithm", sa.Text(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("predicted", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("state", sa.Text(), server_default="pending", nullable=False),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("result", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.CheckConstraint("kind IN ('split', 'unload')", name=op.f("ck_plan_actions_kind")),
        sa.CheckConstraint(
            "state IN ('pending', 'in_progress', 'completed', 'failed', 'skipped')", name=op.f("ck_plan_actions_state")
        ),
        sa.CheckConstraint("seq >= 0 AND attempts >= 0", name=op.f("ck_plan_actions_counters")),
        sa.ForeignKeyConstraint(["plan_id"], ["plans.plan_id"], name=op.f("fk_plan_actions_plan_id_plans")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_plan_actions")),
        sa.UniqueConstraint("plan_id", "seq", name=op.f("uq_plan_actions_plan_id_seq")),
    )
    op.create_index("ix_plan_actions_bundle", "plan_actions", ["bundle"], unique=False)
    op.create_table(
        "bundle_ranges",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("cluster_id", sa.BigInteger(), nullable=False),
        sa.Column("namespace", sa.Text(), nullable=False),
        sa.Column("range_name", sa.Text(), nullable=False),
        sa.Column("lower", sa.BigInteger(), nullable=False),
        sa.Column("upper", sa.BigInteger(), nullable=False),
        sa.Column("created_run_id", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("retired_run_id", sa.Text(), nullable=True),
        sa.Column("retired_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("parent_id", sa.BigInteger(), nullable=True),
        sa.Column("created_by_action_id", sa.BigInteger(), nullable=True),
        sa.CheckConstraint(
            "(retired_at IS NULL) = (retired_run_id IS NULL)", name=op.f("ck_bundle_ranges_retired_together")
        ),
        sa.CheckConstraint(
            "lower >= 0 AND upper <= 4294967295 AND lower < upper", name=op.f("ck_bundle_ranges_bounds")
        ),
        sa.ForeignKeyConstraint(["cluster_id"], ["clusters.id"], name=op.f("fk_bundle_ranges_cluster_id_clusters")),
        sa.ForeignKeyConstraint(
            ["created_by_action_id"],
            ["plan_actions.id"],
            name=op.f("fk_bundle_ranges_created_by_action_id_plan_actions"),
        ),
        sa.ForeignKeyConstraint(["created_run_id"], ["runs.run_id"], name=op.f("fk_bundle_ranges_created_run_id_runs")),
        sa.ForeignKeyConstraint(
            ["parent_id"], ["bundle_ranges.id"], name=op.f("fk_bundle_ranges_parent_id_bundle_ranges")
        ),
        sa.ForeignKeyConstraint(["retired_run_id"], ["runs.run_id"], name=op.f("fk_bundle_ranges_retired_run_id_runs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_bundle_ranges")),
    )
    op.create_index(
        "uq_bundle_ranges_live",
        "bundle_ranges",
        ["cluster_id", "namespace", "range_name"],
        unique=True,
        postgresql_where=sa.text("retired_at IS NULL"),
    )
    op.create_table(
        "ownership",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("cluster_id", sa.BigInteger(), nullable=False),
        sa.Column("bundle", sa.Text(), nullable=False),
        sa.Column("bundle_range_id", sa.BigInteger(), nullable=False),
        sa.Column("broker_id", sa.Text(), nullable=False),
        sa.Column("valid_from", sa.DateTime(timezone=True), nullable=False),
        sa.Column("valid_to", sa.DateTime(timezone=True), nullable=True),
        sa.Column("observed_run_id", sa.Text(), nullable=False),
        sa.Column("ended_run_id", sa.Text(), nullable=True),
        sa.Column("cause_action_id", sa.BigInteger(), nullable=True),
        sa.Column("cause", sa.Text(), nullable=False),
        sa.CheckConstraint("(valid_to IS NULL) = (ended_run_id IS NULL)", name=op.f("ck_ownership_ended_together")),
        sa.CheckConstraint("valid_to IS NULL OR valid_to >= valid_from", name=op.f("ck_ownership_interval")),
        sa.ForeignKeyConstraint(
            ["bundle_range_id"], ["bundle_ranges.id"], name=op.f("fk_ownership_bundle_range_id_bundle_ranges")
        ),
        sa.ForeignKeyConstraint(
            ["cause_action_id"], ["plan_actions.id"], name=op.f("fk_ownership_cause_action_id_plan_actions")
        ),
        sa.ForeignKeyConstraint(["cluster_id"], ["clusters.id"], name=op.f("fk_ownership_cluster_id_clusters")),
        sa.ForeignKeyConstraint(["ended_run_id"], ["runs.run_id"], name=op.f("fk_ownership_ended_run_id_runs")),
        sa.ForeignKeyConstraint(["observed_run_id"], ["runs.run_id"], name=op.f("fk_ownership_observed_run_id_runs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_ownership")),
    )
    op.create_index("ix_ownership_bundle_time", "ownership", ["cluster_id", "bundle", "valid_from"], unique=False)
    op.create_index(
        "uq_ownership_open",
        "ownership",
        ["cluster_id", "bundle"],
        unique=True,
        postgresql_where=sa.text("valid_to IS NULL"),
    )

    for statement in _UPGRADE_SQL:
        op.execute(statement)


def downgrade() -> None:
    for statement in _DOWNGRADE_SQL:
        op.execute(statement)
    op.drop_index("uq_ownership_open", table_name="ownership", postgresql_where=sa.text("valid_to IS NULL"))
    op.drop_index("ix_ownership_bundle_time", table_name="ownership")
    op.drop_table("ownership")
    op.drop_index("uq_bundle_ranges_live", table_name="bundle_ranges", postgresql_where=sa.text("retired_at IS NULL"))
    op.drop_table("bundle_ranges")
    op.drop_index("ix_plan_actions_bundle", table_name="plan_actions")
    op.drop_table("plan_actions")
    op.drop_table("approvals")
    op.drop_table("strategy_state")
    op.drop_index("uq_plans_one_executing", table_name="plans", postgresql_where=sa.text("status = 'executing'"))
    op.drop_index(op.f("ix_plans_cluster_id"), table_name="plans")
    op.drop_table("plans")
    op.drop_table("bundle_time_averages")
    op.drop_table("bundle_load")
    op.drop_table("brokers")
    op.drop_table("broker_load")
    op.drop_index(op.f("ix_runs_cluster_id"), table_name="runs")
    op.drop_table("runs")
    op.drop_table("clusters")
    op.drop_index("ix_audit_log_plan_id", table_name="audit_log")
    op.drop_table("audit_log")


# Plans/actions may only change their status/state columns; approvals and audit rows never change.
# AFTER (not BEFORE) so that the generated column plan_actions.bundle is already computed in NEW.
_IMMUTABLE_FUNCTION = """
CREATE FUNCTION pr_forbid_immutable_update() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    mutable text[] := COALESCE(TG_ARGV, '{}'::text[]);
BEGIN
    IF (to_jsonb(NEW) - mutable) IS DISTINCT FROM (to_jsonb(OLD) - mutable) THEN
        RAISE EXCEPTION 'rows of % are immutable (only % may change)', TG_TABLE_NAME, mutable
            USING ERRCODE = 'restrict_violation';
    END IF;
    RETURN NULL;
END
$$
"""

_IMMUTABLE_TABLES = {
    "plans": ("status", "updated_at", "result"),
    "plan_actions": ("state", "attempts", "error", "started_at", "finished_at", "result"),
    "approvals": (),
    "audit_log": (),
}

# "Where was bundle X at time T and why did it move": one row per ownership interval, with the
# approved action that caused it (NULL when we merely observed it) and who approved that action.
_VIEW = """
CREATE VIEW bundle_ownership_history AS
SELECT
    o.id                 AS ownership_id,
    o.cluster_id,
    c.name               AS cluster,
    o.bundle,
    r.namespace,
    r.range_name         AS bundle_range,
    o.broker_id,
    o.valid_from,
    o.valid_to,
    o.observed_run_id,
    o.ended_run_id,
    o.cause,
    o.cause_action_id    AS action_id,
    a.kind               AS action_kind,
    a.source_broker      AS action_source_broker,
    a.destination_broker AS action_destination_broker,
    a.reason             AS action_reason,
    a.state              AS action_state,
    a.finished_at        AS action_finished_at,
    p.plan_id,
    p.run_id             AS plan_run_id,
    p.status             AS plan_status,
    ap.decision          AS approval_decision,
    ap.decided_by,
    ap.decided_at,
    ap.comment           AS approval_comment,
    CASE WHEN ap.decision = 'approved' THEN ap.decided_by END AS approved_by
FROM ownership o
JOIN clusters c          ON c.id = o.cluster_id
JOIN bundle_ranges r     ON r.id = o.bundle_range_id
LEFT JOIN plan_actions a ON a.id = o.cause_action_id
LEFT JOIN plans p        ON p.plan_id = a.plan_id
LEFT JOIN approvals ap   ON ap.plan_id = p.plan_id
"""


def _trigger(table: str, mutable: tuple[str, ...]) -> str:
    args = ", ".join(f"'{column}'" for column in mutable)
    return (
        f"CREATE TRIGGER {table}_immutable AFTER UPDATE ON {table} "
        f"FOR EACH ROW EXECUTE FUNCTION pr_forbid_immutable_update({args})"
    )


_UPGRADE_SQL = [
    _IMMUTABLE_FUNCTION,
    *(_trigger(table, mutable) for table, mutable in _IMMUTABLE_TABLES.items()),
    _VIEW,
]
_DOWNGRADE_SQL = [
    "DROP VIEW bundle_ownership_history",
    *(f"DROP TRIGGER {table}_immutable ON {table}" for table in _IMMUTABLE_TABLES),
    "DROP FUNCTION pr_forbid_immutable_update()",
]
