"""Clusters and runs: the ``clusters`` and ``runs`` rows a pipeline run starts and finishes."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Literal

from sqlalchemy import func, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.orm import Session

from pulsar_rebalance.errors import StoreError
from pulsar_rebalance.store._shared import (
    SYSTEM_ACTOR,
    InvalidRowError,
    UnknownRunError,
    _json_value,
    _require_text,
)
from pulsar_rebalance.store.audit import audit
from pulsar_rebalance.store.tables import Cluster, Run
from pulsar_rebalance.store.views import RunView, _run_view
from pulsar_rebalance.urls import redact_userinfo


def get_or_create_cluster(s: Session, *, name: str, admin_url: str) -> int:
    """The id of cluster ``name``, creating it if needed (a changed ``admin_url`` is updated)."""
    _require_text("name", name)
    _require_text("admin_url", admin_url)
    admin_url = redact_userinfo(admin_url)  # credentials never stored (the client strips them anyway)
    stmt = pg_insert(Cluster).values(name=name, admin_url=admin_url)
    stmt = stmt.on_conflict_do_update(index_elements=[Cluster.name], set_={"admin_url": stmt.excluded.admin_url})
    return int(s.execute(stmt.returning(Cluster.id)).scalar_one())


def start_run(
    s: Session, *, run_id: str, cluster_id: int, params: Mapping[str, Any] | None = None, work_dir: str | None = None
) -> RunView:
    """Record that run ``run_id`` started (idempotent: a retry marks it running again).

    On a retry, ``params`` and ``work_dir`` are replaced, ``finished_at`` cleared, ``started_at`` and
    ``stage`` kept.

    Raises:
        InvalidRowError: the run id already belongs to another cluster, or params are not JSON.
    """
    _require_text("run_id", run_id)
    params_json = _json_value("params", dict(params or {}))
    stmt = pg_insert(Run).values(
        run_id=run_id, cluster_id=cluster_id, params=params_json, work_dir=work_dir, status="running"
    )
    stmt = stmt.on_conflict_do_update(
        index_elements=[Run.run_id],
        set_={
            "status": "running",
            "finished_at": None,
            "params": stmt.excluded.params,
            "work_dir": stmt.excluded.work_dir,
        },
        where=Run.cluster_id == stmt.excluded.cluster_id,
    )
    row = s.execute(stmt.returning(Run), execution_options={"populate_existing": True}).scalar_one_or_none()
    if row is None:
        other = s.execute(select(Run.cluster_id).where(Run.run_id == run_id)).scalar_one()
        raise InvalidRowError("run_id", f"run {run_id!r} already exists for cluster id {other}, not {cluster_id}")
    return _run_view(row)


def set_run_stage(s: Session, *, run_id: str, stage: str) -> None:
    """Record the pipeline stage a run has reached (e.g. ``collect_load``)."""
    _require_text("stage", stage)
    if s.execute(update(Run).where(Run.run_id == run_id).values(stage=stage).returning(Run.run_id)).first() is None:
        raise UnknownRunError(f"unknown run {run_id!r}; call start_run first")


def finish_run(s: Session, *, run_id: str, status: Literal["succeeded", "failed", "nothing_to_do"]) -> None:
    """Mark a run finished with ``status`` and stamp ``finished_at``."""
    if status not in ("succeeded", "failed", "nothing_to_do"):
        raise InvalidRowError("status", f"must be succeeded, failed or nothing_to_do, got {status!r}")
    stmt = update(Run).where(Run.run_id == run_id).values(status=status, finished_at=func.now())
    if s.execute(stmt.returning(Run.run_id)).first() is None:
        raise UnknownRunError(f"unknown run {run_id!r}; call start_run first")


AIRFLOW_FINAL = {"success": "succeeded", "failed": "failed"}


def running_run_ids(s: Session, *, limit: int = 500) -> list[str]:
    """Runs still ``running`` here (newest first): the ones whose Airflow state may have moved on."""
    stmt = select(Run.run_id).where(Run.status == "running").order_by(Run.started_at.desc()).limit(limit)
    return list(s.execute(stmt).scalars())


def follow_airflow_state(s: Session, *, run_id: str, airflow_state: str) -> str | None:
    """Make a run that is still ``running`` here follow Airflow's final state (``success`` or ``failed``, e.g.
    marked by hand in the Airflow UI, or a run that ended without reaching execute_unload); returns the new
    status, or None when nothing changed. Audited as ``run.followed_airflow``."""
    status = AIRFLOW_FINAL.get(airflow_state)
    if status is None:
        return None
    stmt = (
        update(Run)
        .where(Run.run_id == run_id, Run.status == "running")
        .values(status=status, finished_at=func.now())
        .returning(Run.run_id)
    )
    if s.execute(stmt).first() is None:
        return None
    audit(s, event="run.followed_airflow", actor=SYSTEM_ACTOR, run_id=run_id, details={"airflow_state": airflow_state})
    return status


def get_run(s: Session, *, run_id: str) -> RunView:
    row = s.get(Run, run_id)
    if row is None:
        raise UnknownRunError(f"unknown run {run_id!r}")
    return _run_view(row)


def cluster_names(s: Session) -> list[str]:
    """The name of every cluster recorded (by a run's collect_load), sorted."""
    return list(s.execute(select(Cluster.name).order_by(Cluster.name)).scalars())


def cluster_name(s: Session, *, cluster_id: int) -> str:
    row = s.get(Cluster, cluster_id)
    if row is None:
        raise StoreError(f"unknown cluster id {cluster_id}")
    return row.name


def latest_run(s: Session, *, since_epoch: float | None = None) -> RunView | None:
    """The most recently started run (optionally only runs started at/after ``since_epoch`` seconds)."""
    stmt = select(Run).order_by(Run.started_at.desc(), Run.run_id.desc()).limit(1)
    if since_epoch is not None:
        stmt = stmt.where(Run.started_at >= datetime.fromtimestamp(since_epoch, UTC))
    row = s.execute(stmt).scalar_one_or_none()
    return None if row is None else _run_view(row)
