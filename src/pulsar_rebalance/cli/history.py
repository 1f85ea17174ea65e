"""``pulsar-rebalance history BUNDLE [--at TIME]``: where a bundle was, when, and why it moved.

One query over the ``bundle_ownership_history`` view; the database comes from
``PULSAR_REBALANCE_DATABASE_URL`` (or ``DATABASE_URL``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json

from pulsar_rebalance.errors import ConfigError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("history", help="where a bundle was (at a time) and why it moved")
    p.add_argument("bundle", help="full bundle name, e.g. public/default/0x00000000_0x40000000")
    p.add_argument("--cluster", default=None, help="Pulsar cluster name (default: the only one recorded)")
    p.add_argument("--at", default=None, help="ISO time (UTC if no offset): show only the owner at that instant")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_history)


def _parse_time(text: str) -> dt.datetime:
    try:
        t = dt.datetime.fromisoformat(text)
    except ValueError as exc:
        raise ConfigError(f"--at {text!r} is not an ISO time like 2026-11-22T02:00:00+00:00", key="at") from exc
    return t if t.tzinfo else t.replace(tzinfo=dt.UTC)


def _history(args: argparse.Namespace) -> int:
    import sqlalchemy as sa

    from pulsar_rebalance.store import repository as repo
    from pulsar_rebalance.store.engine import database_url, make_engine, session_scope
    from pulsar_rebalance.store.tables import Cluster

    at = _parse_time(args.at) if args.at else None
    with session_scope(make_engine(database_url())) as s:
        names = list(s.execute(sa.select(Cluster.name).order_by(Cluster.name)).scalars())
        cluster = args.cluster or (names[0] if len(names) == 1 else None)
        if cluster is None or cluster not in names:
            raise ConfigError(f"--cluster must be one of {names}", key="cluster")
        if at is not None:
            rec = repo.ownership_at(s, cluster=cluster, bundle=args.bundle, at=at)
            records = [rec] if rec else []
        else:
            cid = s.execute(sa.select(Cluster.id).where(Cluster.name == cluster)).scalar_one()
            records = repo.ownership_history(s, cluster_id=cid, bundle=args.bundle)
    if args.json:
        print(json.dumps([r.as_dict() for r in records], default=str, indent=2))
        return 0
    if not records:
        print(f"no ownership recorded for {args.bundle}" + (f" at {at.isoformat()}" if at else ""))
        return 0
    for r in records:
        until = r.valid_to.strftime("%Y-%m-%d %H:%M:%S") if r.valid_to else "now"
        print(f"{r.valid_from:%Y-%m-%d %H:%M:%S} .. {until:<19}  {r.broker_id:<22} {r.cause}")
    return 0
