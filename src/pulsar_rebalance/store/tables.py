"""SQLAlchemy 2 typed declarative models of the state store (the schema is documented in docs/schema.md).

These classes describe the schema; Alembic migrations (``store/migrations/versions``) create it, and a
test compares the two so they cannot drift. Only the repository (:mod:`pulsar_rebalance.store.repository`
and the modules it re-exports) uses them; everything outside the store sees plain dataclasses.

Conventions:

* Timestamps are ``timestamptz``. Usage columns named ``*_usage`` are **percent** (0-100, may exceed 100,
  Pulsar's ``ResourceUsage.percentUsage()``); ``max_usage``, ``weighted_max_usage`` and ``usage_ema``
  are **fractions** (0-1, Pulsar's ``getMaxResourceUsage()``). Message rates are msg/s, throughputs
  bytes/s.
* Brokers are referred to by Pulsar's broker id text (``host:webPort``), bundles by full name
  (``tenant/namespace/0x00000000_0x40000000``), so rows read the way Pulsar's admin API talks.
* Plans and plan actions are immutable after creation except their status/state columns; a trigger
  (``pr_forbid_immutable_update``, created by the migration) rejects any other UPDATE. Approvals and
  audit rows cannot be updated at all.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Computed,
    DateTime,
    Double,
    ForeignKey,
    Identity,
    Index,
    Integer,
    MetaData,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from pulsar_rebalance.core.lifecycle import PLAN_STATUSES  # the plan lifecycle owns the statuses
from pulsar_rebalance.core.plan import ACTION_KINDS, ACTION_STATES  # the plan's types own the vocabulary

RUN_STATUSES = ("running", "succeeded", "failed", "nothing_to_do")
APPROVAL_DECISIONS = ("approved", "rejected", "expired", "superseded")

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {dict[str, Any]: JSONB, datetime: DateTime(timezone=True), float: Double}


TZ = DateTime(timezone=True)


class Cluster(Base):
    """A Pulsar cluster we rebalance, addressed by its admin (web service) URL."""

    __tablename__ = "clusters"

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    name: Mapped[str] = mapped_column(Text, unique=True)
    admin_url: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())


class Run(Base):
    """One pipeline run (an Airflow dag run): the unit that every measurement is keyed by."""

    __tablename__ = "runs"
    __table_args__ = (CheckConstraint(_in("status", RUN_STATUSES), name="status"),)

    run_id: Mapped[str] = mapped_column(Text, primary_key=True)
    cluster_id: Mapped[int] = mapped_column(ForeignKey("clusters.id"), index=True)
    started_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
    finished_at: Mapped[datetime | None] = mapped_column(TZ)
    status: Mapped[str] = mapped_column(Text, server_default="running")
    params: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))
    work_dir: Mapped[str | None] = mapped_column(Text)
    stage: Mapped[str | None] = mapped_column(Text)


class Broker(Base):
    """A broker ever seen in a cluster (``broker_id`` is Pulsar's ``host:webPort`` lookup name)."""

    __tablename__ = "brokers"
    __table_args__ = (UniqueConstraint("cluster_id", "broker_id"),)

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    cluster_id: Mapped[int] = mapped_column(ForeignKey("clusters.id"))
    broker_id: Mapped[str] = mapped_column(Text)
    web_service_url: Mapped[str] = mapped_column(Text)
    first_seen_run_id: Mapped[str] = mapped_column(ForeignKey("runs.run_id"))
    last_seen_run_id: Mapped[str] = mapped_column(ForeignKey("runs.run_id"))


class BrokerLoad(Base):
    """One broker's load report (``LocalBrokerData``) as collected in one run, plus derived usage."""

    __tablename__ = "broker_load"

    run_id: Mapped[str] = mapped_column(ForeignKey("runs.run_id"), primary_key=True)
    broker_id: Mapped[str] = mapped_column(Text, primary_key=True)
    raw_report: Mapped[dict[str, Any]] = mapped_column(JSONB)
    cpu_usage: Mapped[float | None]
    memory_usage: Mapped[float | None]
    direct_memory_usage: Mapped[float | None]
    bandwidth_in_usage: Mapped[float | None]
    bandwidth_out_usage: Mapped[float | None]
    msg_rate_in: Mapped[float | None]
    msg_rate_out: Mapped[float | None]
    msg_throughput_in: Mapped[float | None]
    msg_throughput_out: Mapped[float | None]
    num_bundles: Mapped[int | None] = mapped_column(Integer)
    num_topics: Mapped[int | None] = mapped_column(Integer)
    max_usage: Mapped[float | None]
    weighted_max_usage: Mapped[float | None]
    usage_ema: Mapped[float | None]


class BundleLoad(Base):
    """One bundle's stats as collected in one run: the sample and Pulsar's time averages."""

    __tablename__ = "bundle_load"

    run_id: Mapped[str] = mapped_column(ForeignKey("runs.run_id"), primary_key=True)
    bundle: Mapped[str] = mapped_column(Text, primary_key=True)
    namespace: Mapped[str] = mapped_column(Text)
    bundle_range: Mapped[str] = mapped_column(Text)
    broker_id: Mapped[str] = mapped_column(Text)
    msg_rate_in: Mapped[float | None]
    msg_rate_out: Mapped[float | None]
    msg_throughput_in: Mapped[float | None]
    msg_throughput_out: Mapped[float | None]
    topics: Mapped[int | None] = mapped_column(Integer)
    producers: Mapped[int | None] = mapped_column(Integer)
    consumers: Mapped[int | None] = mapped_column(Integer)
    short_term: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    long_term: Mapped[dict[str, Any] | None] = mapped_column(JSONB)


class PlacementPolicy(Base):
    """The cluster's placement constraints as one run's collect_load read them from Pulsar's admin API, in
    the ``decide`` contract's fields (the answers unchanged): part of "why was bundle X on broker Y at T"."""

    __tablename__ = "placement_policies"
    __table_args__ = (Index("ix_placement_policies_cluster_id_collected_at", "cluster_id", "collected_at"),)

    run_id: Mapped[str] = mapped_column(ForeignKey("runs.run_id"), primary_key=True)
    cluster_id: Mapped[int] = mapped_column(ForeignKey("clusters.id"))
    collected_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
    namespace_isolation_policies: Mapped[dict[str, Any]] = mapped_column(JSONB)  # {policyName: NamespaceIsolationData}
    failure_domains: Mapped[dict[str, Any]] = mapped_column(JSONB)  # {domainName: {"brokers": [brokerId]}}
    anti_affinity_groups: Mapped[dict[str, Any]] = mapped_column(JSONB)  # {"tenant/namespace": group}


class CordonedBroker(Base):
    """A broker no plan may target (drained by an operator) until it is uncordoned: one row while cordoned."""

    __tablename__ = "cordoned_brokers"

    cluster_id: Mapped[int] = mapped_column(ForeignKey("clusters.id"), primary_key=True)
    broker: Mapped[str] = mapped_column(Text, primary_key=True)
    cordoned_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
    run_id: Mapped[str | None] = mapped_column(ForeignKey("runs.run_id"))  # the drain run that cordoned it
    cordoned_by: Mapped[str] = mapped_column(Text)  # who: the run's trigger, or the CLI user
    reason: Mapped[str] = mapped_column(Text)


class MaintenanceWindow(Base):
    """A cluster's maintenance windows (``core.windows`` JSON): approved plans start executing only inside."""

    __tablename__ = "maintenance_windows"

    cluster_id: Mapped[int] = mapped_column(ForeignKey("clusters.id"), primary_key=True)
    setting: Mapped[dict[str, Any]] = mapped_column(JSONB)
    updated_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
    updated_by: Mapped[str] = mapped_column(Text)


class ImbalanceWatch(Base):
    """The imbalance watch of a cluster: consecutive samples over the threshold, and the episode's run."""

    __tablename__ = "imbalance_watch"

    cluster_id: Mapped[int] = mapped_column(ForeignKey("clusters.id"), primary_key=True)
    over_count: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    armed: Mapped[bool] = mapped_column(Boolean, server_default=text("true"))
    last_sample_at: Mapped[datetime | None] = mapped_column(TZ)
    last_worst: Mapped[float | None] = mapped_column(Double)
    triggered_run_id: Mapped[str | None] = mapped_column(Text)  # the run this episode triggered (Airflow's id)
    triggered_at: Mapped[datetime | None] = mapped_column(TZ)


class BundleTimeAverage(Base):
    """The leader-side ``BundleData`` (short/long-term ``TimeAverageMessageData``) carried across runs."""

    __tablename__ = "bundle_time_averages"

    cluster_id: Mapped[int] = mapped_column(ForeignKey("clusters.id"), primary_key=True)
    bundle: Mapped[str] = mapped_column(Text, primary_key=True)
    bundle_data: Mapped[dict[str, Any]] = mapped_column(JSONB)
    updated_run_id: Mapped[str] = mapped_column(ForeignKey("runs.run_id"))
    updated_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())


class StrategyState(Base):
    """State a Pulsar strategy keeps in memory between cycles (e.g. ThresholdShedder's usage averages)."""

    __tablename__ = "strategy_state"

    cluster_id: Mapped[int] = mapped_column(ForeignKey("clusters.id"), primary_key=True)
    name: Mapped[str] = mapped_column(Text, primary_key=True)
    state: Mapped[dict[str, Any]] = mapped_column(JSONB)
    updated_run_id: Mapped[str] = mapped_column(ForeignKey("runs.run_id"))
    updated_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())


class BundleRange(Base):
    """A bundle's hash range over its lifetime: created by a run, retired when split away.

    ``lower``/``upper`` are the unsigned 32-bit boundaries (``range_name`` = ``0x%08x_0x%08x``).
    ``parent_id`` is the retired range this one was split from.
    """

    __tablename__ = "bundle_ranges"
    __table_args__ = (
        CheckConstraint("lower >= 0 AND upper <= 4294967295 AND lower < upper", name="bounds"),
        CheckConstraint("(retired_at IS NULL) = (retired_run_id IS NULL)", name="retired_together"),
        Index(
            "uq_bundle_ranges_live",
            "cluster_id",
            "namespace",
            "range_name",
            unique=True,
            postgresql_where=text("retired_at IS NULL"),
        ),
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    cluster_id: Mapped[int] = mapped_column(ForeignKey("clusters.id"))
    namespace: Mapped[str] = mapped_column(Text)
    range_name: Mapped[str] = mapped_column(Text)
    lower: Mapped[int] = mapped_column(BigInteger)
    upper: Mapped[int] = mapped_column(BigInteger)
    created_run_id: Mapped[str] = mapped_column(ForeignKey("runs.run_id"))
    created_at: Mapped[datetime] = mapped_column(TZ)
    retired_run_id: Mapped[str | None] = mapped_column(ForeignKey("runs.run_id"))
    retired_at: Mapped[datetime | None] = mapped_column(TZ)
    parent_id: Mapped[int | None] = mapped_column(ForeignKey("bundle_ranges.id"))
    created_by_action_id: Mapped[int | None] = mapped_column(ForeignKey("plan_actions.id"))


class Ownership(Base):
    """Which broker owned a bundle from ``valid_from`` until ``valid_to`` (NULL = still owns it), and why."""

    __tablename__ = "ownership"
    __table_args__ = (
        CheckConstraint("valid_to IS NULL OR valid_to >= valid_from", name="interval"),
        CheckConstraint("(valid_to IS NULL) = (ended_run_id IS NULL)", name="ended_together"),
        Index("uq_ownership_open", "cluster_id", "bundle", unique=True, postgresql_where=text("valid_to IS NULL")),
        Index("ix_ownership_bundle_time", "cluster_id", "bundle", "valid_from"),
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    cluster_id: Mapped[int] = mapped_column(ForeignKey("clusters.id"))
    bundle: Mapped[str] = mapped_column(Text)
    bundle_range_id: Mapped[int] = mapped_column(ForeignKey("bundle_ranges.id"))
    broker_id: Mapped[str] = mapped_column(Text)
    valid_from: Mapped[datetime] = mapped_column(TZ)
    valid_to: Mapped[datetime | None] = mapped_column(TZ)
    observed_run_id: Mapped[str] = mapped_column(ForeignKey("runs.run_id"))
    ended_run_id: Mapped[str | None] = mapped_column(ForeignKey("runs.run_id"))
    cause_action_id: Mapped[int | None] = mapped_column(ForeignKey("plan_actions.id"))
    cause: Mapped[str] = mapped_column(Text)


class Plan(Base):
    """A rebalance plan: one per run, immutable except ``status``/``updated_at``."""

    __tablename__ = "plans"
    __table_args__ = (
        CheckConstraint(_in("status", PLAN_STATUSES), name="status"),
        CheckConstraint("required_approvals BETWEEN 1 AND 5", name="required_approvals"),
        # at most one plan per cluster executing at a time: the database-side execution guard
        Index("uq_plans_one_executing", "cluster_id", unique=True, postgresql_where=text("status = 'executing'")),
    )

    plan_id: Mapped[str] = mapped_column(Text, primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.run_id"), unique=True)
    cluster_id: Mapped[int] = mapped_column(ForeignKey("clusters.id"), index=True)
    status: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
    expires_at: Mapped[datetime | None] = mapped_column(TZ)
    dry_run: Mapped[bool] = mapped_column(Boolean)
    strategies: Mapped[Any] = mapped_column(JSONB)
    config: Mapped[dict[str, Any]] = mapped_column(JSONB)
    config_hash: Mapped[str] = mapped_column(Text)
    summary: Mapped[Any] = mapped_column(JSONB)
    decision: Mapped[Any] = mapped_column(JSONB)
    result: Mapped[Any | None] = mapped_column(JSONB, nullable=True)
    content_hash: Mapped[str | None] = mapped_column(Text, nullable=True)  # what will run (the actions)
    gate: Mapped[Any | None] = mapped_column(JSONB, nullable=True)  # where it waits in Airflow
    superseded_by: Mapped[str | None] = mapped_column(Text, nullable=True)
    stop_requested: Mapped[Any | None] = mapped_column(JSONB, nullable=True)
    required_approvals: Mapped[int] = mapped_column(Integer, server_default="1")  # different people

    actions: Mapped[list[PlanAction]] = relationship(order_by="PlanAction.seq", lazy="raise")
    approval: Mapped[Approval | None] = relationship(lazy="raise")
    votes: Mapped[list[ApprovalVote]] = relationship(order_by="ApprovalVote.id", lazy="raise")


class PlanAction(Base):
    """One approved-or-not move (``split`` or ``unload``) with its execution state machine columns."""

    __tablename__ = "plan_actions"
    __table_args__ = (
        UniqueConstraint("plan_id", "seq"),
        CheckConstraint(_in("kind", ACTION_KINDS), name="kind"),
        CheckConstraint(_in("state", ACTION_STATES), name="state"),
        CheckConstraint("seq >= 0 AND attempts >= 0", name="counters"),
        Index("ix_plan_actions_bundle", "bundle"),
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    plan_id: Mapped[str] = mapped_column(ForeignKey("plans.plan_id"))
    seq: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(Text)
    namespace: Mapped[str] = mapped_column(Text)
    bundle_range: Mapped[str] = mapped_column(Text)
    bundle: Mapped[str] = mapped_column(Text, Computed("namespace || '/' || bundle_range", persisted=True))
    source_broker: Mapped[str] = mapped_column(Text)
    destination_broker: Mapped[str | None] = mapped_column(Text)
    boundaries: Mapped[list[int] | None] = mapped_column(JSONB)
    split_algorithm: Mapped[str | None] = mapped_column(Text)
    reason: Mapped[str] = mapped_column(Text)
    predicted: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    state: Mapped[str] = mapped_column(Text, server_default="pending")
    attempts: Mapped[int] = mapped_column(Integer, server_default="0")
    error: Mapped[str | None] = mapped_column(Text)
    started_at: Mapped[datetime | None] = mapped_column(TZ)
    finished_at: Mapped[datetime | None] = mapped_column(TZ)
    result: Mapped[dict[str, Any] | None] = mapped_column(JSONB)


class Approval(Base):
    """The human (or expiry) decision on a plan: at most one per plan, never updated."""

    __tablename__ = "approvals"
    __table_args__ = (CheckConstraint(_in("decision", APPROVAL_DECISIONS), name="decision"),)

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    plan_id: Mapped[str] = mapped_column(ForeignKey("plans.plan_id"), unique=True)
    decision: Mapped[str] = mapped_column(Text)
    decided_by: Mapped[str] = mapped_column(Text)
    decided_at: Mapped[datetime] = mapped_column(TZ)
    comment: Mapped[str | None] = mapped_column(Text)
    plan_hash: Mapped[str | None] = mapped_column(Text, nullable=True)  # the content the approver saw
    via: Mapped[str | None] = mapped_column(Text, nullable=True)  # airflow-gate | cli | policy | system


class ApprovalVote(Base):
    """One person's approval of a plan that needs several (``plans.required_approvals``); never updated."""

    __tablename__ = "approval_votes"
    __table_args__ = (UniqueConstraint("plan_id", "voter"),)

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    plan_id: Mapped[str] = mapped_column(ForeignKey("plans.plan_id"))
    voter: Mapped[str] = mapped_column(Text)
    voted_at: Mapped[datetime] = mapped_column(TZ)
    comment: Mapped[str | None] = mapped_column(Text)
    plan_hash: Mapped[str | None] = mapped_column(Text)
    via: Mapped[str] = mapped_column(Text)


class AuditLog(Base):
    """Append-only event log. No foreign keys on purpose: it must accept any event, about anything."""

    __tablename__ = "audit_log"
    __table_args__ = (Index("ix_audit_log_plan_id", "plan_id"),)

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
    actor: Mapped[str] = mapped_column(Text)
    event: Mapped[str] = mapped_column(Text)
    run_id: Mapped[str | None] = mapped_column(Text)
    plan_id: Mapped[str | None] = mapped_column(Text)
    action_id: Mapped[int | None] = mapped_column(BigInteger)
    details: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))


OWNERSHIP_HISTORY_VIEW = "bundle_ownership_history"
"""Created by migration 0001; see ``docs/schema.md`` and ``repository.ownership_at`` for the query."""
