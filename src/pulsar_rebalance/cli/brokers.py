"""``pulsar-rebalance brokers cordoned|cordon|uncordon``: brokers no plan may target.

A ``mode=drain`` run cordons the brokers it drains; these commands list cordons and add or remove
them by hand. The database comes from ``PULSAR_REBALANCE_DATABASE_URL`` (or ``DATABASE_URL``); the
actor is ``--by``, ``PULSAR_REBALANCE_USER`` or the login name.
"""

from __future__ import annotations

import argparse
import json


def register(sub: argparse._SubParsersAction) -> None:
    brokers = sub.add_parser("brokers", help="cordoned brokers: list, cordon, uncordon")
    bsub = brokers.add_subparsers(dest="brokers_command", metavar="ACTION")
    bsub.required = True
    p = bsub.add_parser("cordoned", help="the brokers no plan may target, with who cordoned them, when and why")
    p.add_argument("--cluster", default=None, help="Pulsar cluster name (default: every cluster)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_list)
    for verb, text in (
        ("cordon", "keep every plan of every mode off these brokers (until uncordon)"),
        ("uncordon", "let plans target these brokers again"),
    ):
        p = bsub.add_parser(verb, help=text)
        p.add_argument("broker", nargs="+", help="broker id (host:port, as `pulsar-admin brokers list` shows)")
        p.add_argument("--cluster", default=None, help="Pulsar cluster name (default: the only one recorded)")
        p.add_argument("--by", default=None, help="who (default: PULSAR_REBALANCE_USER or the login name)")
        if verb == "cordon":
            p.add_argument("--reason", default="cordoned by hand", help="why (recorded with the cordon)")
        p.set_defaults(func=_cordon if verb == "cordon" else _uncordon)


def _session():
    from pulsar_rebalance.store.engine import database_url, make_engine, session_scope

    return session_scope(make_engine(database_url()))


def _actor(by: str | None) -> str:
    from pulsar_rebalance.cli.plans import _who

    return _who(by)


def _list(args: argparse.Namespace) -> int:
    from pulsar_rebalance.store import repository as repo

    with _session() as s:
        cid = repo.cluster_id_named(s, args.cluster) if args.cluster else None
        rows = repo.cordoned(s, cluster_id=cid)
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "cluster": r.cluster,
                        "broker": r.broker,
                        "cordonedAt": r.cordoned_at.isoformat(),
                        "by": r.cordoned_by,
                        "reason": r.reason,
                        "runId": r.run_id,
                    }
                    for r in rows
                ],
                indent=2,
            )
        )
        return 0
    if not rows:
        print("no cordoned broker")
        return 0
    for r in rows:
        print(f"{r.cluster}  {r.broker}  since {r.cordoned_at:%Y-%m-%d %H:%M:%S} UTC  by {r.cordoned_by}: {r.reason}")
    return 0


def _cordon(args: argparse.Namespace) -> int:
    from pulsar_rebalance.store import repository as repo

    with _session() as s:
        cid = repo.cluster_id_named(s, args.cluster)
        new = repo.cordon(s, cluster_id=cid, brokers=args.broker, by=_actor(args.by), reason=args.reason)
    already = [b for b in args.broker if b not in new]
    if new:
        print(f"cordoned: {', '.join(new)} (no plan targets them until uncordon)")
    if already:
        print(f"already cordoned: {', '.join(already)}")
    return 0


def _uncordon(args: argparse.Namespace) -> int:
    from pulsar_rebalance.store import repository as repo

    with _session() as s:
        cid = repo.cluster_id_named(s, args.cluster)
        gone = repo.uncordon(s, cluster_id=cid, brokers=args.broker, by=_actor(args.by))
    not_cordoned = [b for b in args.broker if b not in gone]
    if gone:
        print(f"uncordoned: {', '.join(gone)} (plans may target them again)")
    if not_cordoned:
        print(f"not cordoned: {', '.join(not_cordoned)}")
    return 0
