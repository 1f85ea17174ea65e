"""Load samples of a run (``brokers``, ``broker_load``, ``bundle_load``) and what is carried from one run to
the next (``bundle_time_averages``, ``strategy_state``)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Table, delete, func, select, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.orm import Session

from pulsar_rebalance.core.contract.policies_json import POLICY_KEYS
from pulsar_rebalance.store._shared import InvalidRowError, UnknownRunError, _aware, _json_value, _require_text
from pulsar_rebalance.store.ranges import split_bundle_name
from pulsar_rebalance.store.tables import (
    Broker,
    BrokerLoad,
    BundleLoad,
    BundleTimeAverage,
    PlacementPolicy,
    Run,
    StrategyState,
)
from pulsar_rebalance.store.views import PlacementPoliciesView, _placement_policies_view


def upsert_brokers(s: Session, *, cluster_id: int, run_id: str, brokers: Mapping[str, str]) -> None:
    """Record the brokers seen by ``run_id``: ``{broker_id: web_service_url}``.

    New brokers get ``first_seen_run_id = run_id``; known ones get their URL and ``last_seen_run_id``
    refreshed.
    """
    values = []
    for broker_id, url in brokers.items():
        _require_text(f"brokers[{broker_id!r}]", broker_id)
        _require_text(f"brokers[{broker_id!r}]", url)
        values.append(
            {
                "cluster_id": cluster_id,
                "broker_id": broker_id,
                "web_service_url": url,
                "first_seen_run_id": run_id,
                "last_seen_run_id": run_id,
            }
        )
    if not values:
        return
    stmt = pg_insert(Broker).values(values)
    stmt = stmt.on_conflict_do_update(
        index_elements=[Broker.cluster_id, Broker.broker_id],
        set_={"web_service_url": stmt.excluded.web_service_url, "last_seen_run_id": stmt.excluded.last_seen_run_id},
    )
    s.execute(stmt)


_BROKER_LOAD_FLOATS = (
    "cpu_usage",
    "memory_usage",
    "direct_memory_usage",
    "bandwidth_in_usage",
    "bandwidth_out_usage",
    "msg_rate_in",
    "msg_rate_out",
    "msg_throughput_in",
    "msg_throughput_out",
    "max_usage",
    "weighted_max_usage",
    "usage_ema",
)

_BROKER_LOAD_INTS = ("num_bundles", "num_topics")


def record_broker_load(s: Session, *, run_id: str, rows: Sequence[Mapping[str, Any]]) -> None:
    """Upsert one ``broker_load`` row per broker for ``run_id`` (a retried task overwrites its rows).

    Each row: ``broker_id`` and ``raw_report`` (the ``LocalBrokerData`` JSON as received) are required;
    optional: ``*_usage`` (percent), ``msg_rate_*`` (msg/s), ``msg_throughput_*`` (bytes/s),
    ``num_bundles``, ``num_topics``, ``max_usage``/``weighted_max_usage``/``usage_ema`` (fractions).
    Absent optional keys are stored as NULL (also on overwrite); unknown keys are an error.
    """
    values = _validate_rows(
        "rows",
        rows,
        required={"broker_id": str, "raw_report": dict},
        floats=_BROKER_LOAD_FLOATS,
        ints=_BROKER_LOAD_INTS,
        key="broker_id",
    )
    _upsert_run_rows(s, BrokerLoad, run_id, values, ("broker_id",))


_BUNDLE_LOAD_FLOATS = ("msg_rate_in", "msg_rate_out", "msg_throughput_in", "msg_throughput_out")

_BUNDLE_LOAD_INTS = ("topics", "producers", "consumers")


def record_bundle_load(s: Session, *, run_id: str, rows: Sequence[Mapping[str, Any]]) -> None:
    """Upsert one ``bundle_load`` row per bundle for ``run_id``.

    Each row: ``bundle`` (full name) and ``broker_id`` required; ``namespace``/``bundle_range`` are
    derived from the name (and checked if given); optional rates (msg/s), throughputs (bytes/s),
    ``topics``/``producers``/``consumers`` counts and ``short_term``/``long_term``
    (``TimeAverageMessageData`` JSON).
    """
    values = _validate_rows(
        "rows",
        rows,
        required={"bundle": str, "broker_id": str},
        floats=_BUNDLE_LOAD_FLOATS,
        ints=_BUNDLE_LOAD_INTS,
        optional={"namespace": str, "bundle_range": str, "short_term": dict, "long_term": dict},
        key="bundle",
    )
    for i, row in enumerate(values):
        namespace, bundle_range = split_bundle_name(row["bundle"], field=f"rows[{i}].bundle")
        for column, derived in (("namespace", namespace), ("bundle_range", bundle_range)):
            if row[column] is not None and row[column] != derived:
                raise InvalidRowError(f"rows[{i}].{column}", f"{row[column]!r} does not match bundle {row['bundle']!r}")
            row[column] = derived
    _upsert_run_rows(s, BundleLoad, run_id, values, ("bundle",))


def latest_broker_ema(s: Session, *, cluster_id: int, exclude_run_id: str | None = None) -> dict[str, float]:
    """Each broker's most recent non-NULL ``usage_ema`` (by run start time) in the cluster.

    Pass the current run as ``exclude_run_id`` when computing this run's EMA: otherwise a retried task
    would read the value its first attempt already wrote and apply the history twice.
    """
    # DISTINCT ON as SQL text: SQLAlchemy 2.1 deprecates .distinct(col) and 2.0 lacks distinct_on()
    sql = text(
        """
        SELECT DISTINCT ON (bl.broker_id) bl.broker_id, bl.usage_ema
        FROM broker_load bl JOIN runs r ON r.run_id = bl.run_id
        WHERE r.cluster_id = :cluster_id AND bl.usage_ema IS NOT NULL
          AND (CAST(:exclude AS text) IS NULL OR r.run_id <> :exclude)
        ORDER BY bl.broker_id, r.started_at DESC, r.run_id DESC
        """
    )
    params = {"cluster_id": cluster_id, "exclude": exclude_run_id}
    return {broker: float(ema) for broker, ema in s.execute(sql, params)}


def load_bundle_time_averages(s: Session, *, cluster_id: int) -> dict[str, dict[str, Any]]:
    """``{bundle: BundleData JSON}`` carried across runs (the leader's in-memory map in Pulsar)."""
    stmt = select(BundleTimeAverage.bundle, BundleTimeAverage.bundle_data).where(
        BundleTimeAverage.cluster_id == cluster_id
    )
    return {bundle: data for bundle, data in s.execute(stmt)}


def save_bundle_time_averages(
    s: Session, *, cluster_id: int, run_id: str, data: Mapping[str, Mapping[str, Any]], replace: bool = False
) -> None:
    """Upsert ``{bundle: BundleData JSON}``; with ``replace=True`` also delete bundles absent from ``data``
    (e.g. the parents of split bundles)."""
    values = []
    for bundle, bundle_data in data.items():
        split_bundle_name(bundle, field=f"data[{bundle!r}]")
        if not isinstance(bundle_data, Mapping):
            raise InvalidRowError(f"data[{bundle!r}]", f"must be a JSON object, got {type(bundle_data).__name__}")
        values.append(
            {
                "cluster_id": cluster_id,
                "bundle": bundle,
                "bundle_data": _json_value(f"data[{bundle!r}]", dict(bundle_data)),
                "updated_run_id": run_id,
            }
        )
    if replace:
        s.execute(
            delete(BundleTimeAverage).where(
                BundleTimeAverage.cluster_id == cluster_id, BundleTimeAverage.bundle.not_in(list(data))
            )
        )
    if values:
        table = BundleTimeAverage.__table__
        assert isinstance(table, Table)  # a mapped class's table, not a subquery
        stmt = pg_insert(table)
        stmt = stmt.on_conflict_do_update(
            index_elements=[BundleTimeAverage.cluster_id, BundleTimeAverage.bundle],
            set_={
                "bundle_data": stmt.excluded.bundle_data,
                "updated_run_id": stmt.excluded.updated_run_id,
                "updated_at": func.now(),
            },
        )
        _insert_many(s, stmt, values)


def load_strategy_state(s: Session, *, cluster_id: int, name: str) -> dict[str, Any] | None:
    """The saved state of strategy ``name`` (e.g. ``ThresholdShedder``), or None if never saved."""
    stmt = select(StrategyState.state).where(StrategyState.cluster_id == cluster_id, StrategyState.name == name)
    return s.execute(stmt).scalar_one_or_none()


def save_strategy_state(s: Session, *, cluster_id: int, name: str, run_id: str, state: Mapping[str, Any]) -> None:
    """Replace the saved state of strategy ``name``."""
    _require_text("name", name)
    stmt = pg_insert(StrategyState).values(
        cluster_id=cluster_id, name=name, state=_json_value("state", dict(state)), updated_run_id=run_id
    )
    stmt = stmt.on_conflict_do_update(
        index_elements=[StrategyState.cluster_id, StrategyState.name],
        set_={"state": stmt.excluded.state, "updated_run_id": stmt.excluded.updated_run_id, "updated_at": func.now()},
    )
    s.execute(stmt)


def _validate_rows(
    name: str,
    rows: Sequence[Mapping[str, Any]],
    *,
    required: Mapping[str, type],
    floats: Sequence[str],
    ints: Sequence[str],
    optional: Mapping[str, type] | None = None,
    key: str,
) -> list[dict[str, Any]]:
    optional = dict(optional or {})
    known = set(required) | set(floats) | set(ints) | set(optional)
    seen: set[Any] = set()
    out = []
    for i, row in enumerate(rows):
        field = f"{name}[{i}]"
        if not isinstance(row, Mapping):
            raise InvalidRowError(field, f"must be a mapping, got {type(row).__name__}")
        unknown = sorted(set(row) - known)
        if unknown:
            raise InvalidRowError(f"{field}.{unknown[0]}", f"unknown column (known: {', '.join(sorted(known))})")
        value: dict[str, Any] = {}
        for col, typ in required.items():
            v = row.get(col)
            if not isinstance(v, typ) or (isinstance(v, str) and typ is str and not v.strip()):
                raise InvalidRowError(f"{field}.{col}", f"required {typ.__name__}, got {v!r}")
            value[col] = _json_value(f"{field}.{col}", v) if typ is dict else v
        for col, typ in optional.items():
            v = row.get(col)
            if v is not None and not isinstance(v, typ):
                raise InvalidRowError(f"{field}.{col}", f"must be a {typ.__name__} or None, got {v!r}")
            value[col] = _json_value(f"{field}.{col}", v) if typ is dict and v is not None else v
        for col in floats:
            v = row.get(col)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)):
                raise InvalidRowError(f"{field}.{col}", f"must be a finite number or None, got {v!r}")
            value[col] = float(v) if v is not None else None
        for col in ints:
            v = row.get(col)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
                raise InvalidRowError(f"{field}.{col}", f"must be an integer or None, got {v!r}")
            value[col] = v
        if value[key] in seen:
            raise InvalidRowError(f"{field}.{key}", f"duplicate {key} {value[key]!r}")
        seen.add(value[key])
        out.append(value)
    return out


def _upsert_run_rows(
    s: Session, model: type[Any], run_id: str, values: list[dict[str, Any]], pk: tuple[str, ...]
) -> None:
    if not values:
        return
    if s.get(Run, run_id) is None:
        raise UnknownRunError(f"unknown run {run_id!r}; call start_run first")
    stmt = pg_insert(model.__table__)
    columns = [c for c in values[0] if c not in pk]
    stmt = stmt.on_conflict_do_update(
        index_elements=["run_id", *pk], set_={c: getattr(stmt.excluded, c) for c in columns}
    )
    _insert_many(s, stmt, [{"run_id": run_id, **v} for v in values])


def _insert_many(s: Session, stmt, rows: list[dict[str, Any]]) -> None:
    """Run an ``INSERT ... ON CONFLICT DO UPDATE`` for many rows as multi-row statements of 1,000 rows.

    One statement holding every row (100,000 bundles at scale) is slow to build and holds the whole
    SQL text in memory; a plain executemany sends one row per round trip. SQLAlchemy batches
    (``insertmanyvalues``) an ON CONFLICT insert only when it has a RETURNING clause, hence the
    (ignored) one. Rows must be unique on the conflict key (every caller validates that).
    """
    table = stmt.table
    s.execute(stmt.returning(*table.primary_key.columns), rows).close()


def broker_reports(s: Session, *, run_id: str) -> dict[str, dict[str, Any]]:
    """``{broker_id: LocalBrokerData JSON}`` exactly as collected in ``run_id``."""
    rows = s.execute(select(BrokerLoad.broker_id, BrokerLoad.raw_report).where(BrokerLoad.run_id == run_id))
    return {broker: dict(report) for broker, report in rows}


_POLICY_COLUMNS = dict(
    zip(POLICY_KEYS, ("namespace_isolation_policies", "failure_domains", "anti_affinity_groups"), strict=True)
)


def record_placement_policies(
    s: Session, *, run_id: str, cluster_id: int, policies: Mapping[str, Any], at: datetime | None = None
) -> None:
    """Store the placement constraints ``run_id`` read (a retried task overwrites them).

    ``policies``: exactly the ``decide`` contract's three fields, each a JSON object as the admin API
    answered it (``{}`` for none); validated by the caller (collect_load), checked for shape here.
    """
    if set(policies) != set(POLICY_KEYS):
        raise InvalidRowError(
            "policies", f"must have exactly the keys {', '.join(POLICY_KEYS)}, got {sorted(policies)}"
        )
    values: dict[str, Any] = {"run_id": run_id, "cluster_id": cluster_id, "collected_at": _aware("at", at)}
    for key, column in _POLICY_COLUMNS.items():
        if not isinstance(policies[key], Mapping):
            raise InvalidRowError(f"policies.{key}", f"must be a JSON object, got {type(policies[key]).__name__}")
        values[column] = _json_value(f"policies.{key}", dict(policies[key]))
    if s.get(Run, run_id) is None:
        raise UnknownRunError(f"unknown run {run_id!r}; call start_run first")
    stmt = pg_insert(PlacementPolicy).values(values)
    stmt = stmt.on_conflict_do_update(
        index_elements=[PlacementPolicy.run_id], set_={c: getattr(stmt.excluded, c) for c in values if c != "run_id"}
    )
    s.execute(stmt)


def placement_policies(s: Session, *, run_id: str) -> PlacementPoliciesView | None:
    """The placement constraints ``run_id`` read (None: the run stored none, e.g. it predates them)."""
    row = s.get(PlacementPolicy, run_id)
    return _placement_policies_view(row) if row is not None else None


def placement_policies_at(s: Session, *, cluster_id: int, at: datetime) -> PlacementPoliciesView | None:
    """The placement constraints in force at instant ``at``, as last read before it: the newest
    ``placement_policies`` row of the cluster collected at or before ``at`` (None: none read by then).
    With :func:`ownership_at`, what answers "why was bundle X on broker Y at time T"."""
    stmt = (
        select(PlacementPolicy)
        .where(PlacementPolicy.cluster_id == cluster_id, PlacementPolicy.collected_at <= _aware("at", at))
        .order_by(PlacementPolicy.collected_at.desc(), PlacementPolicy.run_id.desc())
        .limit(1)
    )
    row = s.scalars(stmt).first()
    return _placement_policies_view(row) if row is not None else None
