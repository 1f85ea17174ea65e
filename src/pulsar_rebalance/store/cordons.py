"""Cordoned brokers: brokers no plan may target until an operator uncordons them.

A ``mode=drain`` run cordons the brokers it drains when it plans; ``pulsar-rebalance brokers cordon`` /
``uncordon`` do it by hand. Every change writes an audit row (``broker_cordoned`` / ``broker_uncordoned``)
in the same transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.orm import Session

from pulsar_rebalance.errors import ConfigError
from pulsar_rebalance.store._shared import _require_text
from pulsar_rebalance.store.audit import audit
from pulsar_rebalance.store.tables import Cluster, CordonedBroker


@dataclass(frozen=True)
class Cordon:
    cluster: str
    broker: str
    cordoned_at: datetime
    cordoned_by: str
    reason: str
    run_id: str | None


def cluster_id_named(s: Session, name: str | None) -> int:
    """The id of the cluster named ``name`` (None: the only cluster); a clear error otherwise."""
    rows = s.execute(select(Cluster.id, Cluster.name).order_by(Cluster.id)).all()
    if name is None:
        if len(rows) == 1:
            return int(rows[0][0])
        known = ", ".join(r[1] for r in rows) or "none yet (no run has collected a snapshot)"
        raise ConfigError(f"which cluster? give --cluster; known: {known}", key="cluster")
    for cid, cname in rows:
        if cname == name:
            return int(cid)
    raise ConfigError(f"unknown cluster {name!r}; known: {', '.join(r[1] for r in rows) or 'none'}", key="cluster")


def cordon(
    s: Session,
    *,
    cluster_id: int,
    brokers: Sequence[str],
    by: str,
    reason: str,
    run_id: str | None = None,
) -> list[str]:
    """Cordon ``brokers`` (already cordoned ones keep their first row); returns the newly cordoned."""
    _require_text("by", by)
    new: list[str] = []
    for broker in brokers:
        _require_text("broker", broker)
        stmt = (
            pg_insert(CordonedBroker)
            .values(cluster_id=cluster_id, broker=broker, cordoned_by=by, reason=reason, run_id=run_id)
            .on_conflict_do_nothing(index_elements=[CordonedBroker.cluster_id, CordonedBroker.broker])
            .returning(CordonedBroker.broker)
        )
        if s.execute(stmt).scalar_one_or_none() is not None:
            new.append(broker)
            audit(s, event="broker_cordoned", actor=by, run_id=run_id, details={"broker": broker, "reason": reason})
    return new


def uncordon(s: Session, *, cluster_id: int, brokers: Sequence[str], by: str) -> list[str]:
    """Uncordon ``brokers``; returns those that were cordoned (the others were not: nothing to do)."""
    _require_text("by", by)
    gone = list(
        s.execute(
            delete(CordonedBroker)
            .where(CordonedBroker.cluster_id == cluster_id, CordonedBroker.broker.in_(list(brokers)))
            .returning(CordonedBroker.broker)
        ).scalars()
    )
    for broker in gone:
        audit(s, event="broker_uncordoned", actor=by, details={"broker": broker})
    return sorted(gone)


def cordoned(s: Session, *, cluster_id: int | None = None) -> list[Cordon]:
    """The cordoned brokers (of one cluster, or of every cluster), oldest first."""
    q = select(Cluster.name, CordonedBroker).join(Cluster, Cluster.id == CordonedBroker.cluster_id)
    if cluster_id is not None:
        q = q.where(CordonedBroker.cluster_id == cluster_id)
    rows = s.execute(q.order_by(CordonedBroker.cordoned_at, CordonedBroker.broker)).all()
    return [Cordon(name, r.broker, r.cordoned_at, r.cordoned_by, r.reason, r.run_id) for name, r in rows]


__all__ = ["Cordon", "cluster_id_named", "cordon", "cordoned", "uncordon"]
