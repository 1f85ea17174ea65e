"""``pulsar-rebalance windows show|set|clear``: a cluster's maintenance windows.

Outside every window of its cluster no approved plan starts executing: it waits (the DAG's
``wait_for_window`` task) until one opens, or expires. No windows = executions start at any time.
The setting is JSON (``core.windows``)::

    pulsar-rebalance windows set --cluster standalone \\
        '{"timezone": "Europe/Berlin", "windows": [{"cron": "0 2 * * *", "duration_minutes": 120}]}'

The database comes from ``PULSAR_REBALANCE_DATABASE_URL`` (or ``DATABASE_URL``); the actor is ``--by``,
``PULSAR_REBALANCE_USER`` or the login name. Every change writes an audit row.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
from pathlib import Path

from pulsar_rebalance.cli.brokers import _actor, _session
from pulsar_rebalance.errors import ConfigError


def register(sub: argparse._SubParsersAction) -> None:
    windows = sub.add_parser("windows", help="maintenance windows: when approved plans may start executing")
    wsub = windows.add_subparsers(dest="windows_command", metavar="ACTION")
    wsub.required = True
    p = wsub.add_parser("show", help="each cluster's windows, whether one is open now and the next opening")
    p.add_argument("--cluster", default=None, help="Pulsar cluster name (default: every cluster)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_show)
    p = wsub.add_parser("set", help="set (replace) a cluster's windows")
    p.add_argument("setting", help="the setting as JSON, or @FILE to read it from a file")
    p.add_argument("--cluster", default=None, help="Pulsar cluster name (default: the only one recorded)")
    p.add_argument("--by", default=None, help="who (default: PULSAR_REBALANCE_USER or the login name)")
    p.set_defaults(func=_set)
    p = wsub.add_parser("clear", help="remove a cluster's windows (executions start at any time again)")
    p.add_argument("--cluster", default=None, help="Pulsar cluster name (default: the only one recorded)")
    p.add_argument("--by", default=None, help="who (default: PULSAR_REBALANCE_USER or the login name)")
    p.set_defaults(func=_clear)


def _read_setting(text: str) -> object:
    source = "the setting"
    if text.startswith("@"):
        source = text[1:]
        try:
            text = Path(source).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read {source}: {exc.strerror}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{source} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None


def _show(args: argparse.Namespace) -> int:
    from pulsar_rebalance.core.windows import describe, window_state
    from pulsar_rebalance.store import repository as repo
    from pulsar_rebalance.store import windows as store_windows

    now = dt.datetime.now(dt.UTC)
    with _session() as s:
        cid = repo.cluster_id_named(s, args.cluster) if args.cluster else None
        rows = store_windows.all_windows(s, cluster_id=cid)
    out = []
    for r in rows:
        state = window_state(r.setting, now)
        out.append(
            {
                "cluster": r.cluster,
                "setting": r.setting.as_json(),
                "open": state.open,
                "closesAt": state.closes_at.isoformat() if state.closes_at else None,
                "opensAt": state.opens_at.isoformat() if state.opens_at else None,
                "updatedAt": r.updated_at.isoformat(),
                "updatedBy": r.updated_by,
            }
        )
        if not args.json:
            now_text = (
                f"open now, closes {state.closes_at:%Y-%m-%d %H:%M} UTC"
                if state.open
                else f"closed, opens {state.opens_at:%Y-%m-%d %H:%M} UTC"
                if state.opens_at
                else "closed, never opens (no opening within five years)"
            )
            print(
                f"{r.cluster}  {describe(r.setting)}  — {now_text}  (set by {r.updated_by} {r.updated_at:%Y-%m-%d %H:%M} UTC)"
            )
    if args.json:
        print(json.dumps(out, indent=2))
    elif not rows:
        print("no maintenance window: approved plans execute at any time")
    return 0


def _set(args: argparse.Namespace) -> int:
    from pulsar_rebalance.core.windows import describe
    from pulsar_rebalance.store import repository as repo
    from pulsar_rebalance.store import windows as store_windows

    raw = _read_setting(args.setting)
    if not isinstance(raw, dict):
        raise ConfigError("the maintenance-window setting must be a JSON object")
    with _session() as s:
        cid = repo.cluster_id_named(s, args.cluster)
        parsed = store_windows.set_windows(s, cluster_id=cid, setting=raw, by=_actor(args.by))
    print(f"maintenance windows set: {describe(parsed)} (approved plans start executing only inside them)")
    return 0


def _clear(args: argparse.Namespace) -> int:
    from pulsar_rebalance.store import repository as repo
    from pulsar_rebalance.store import windows as store_windows

    with _session() as s:
        cid = repo.cluster_id_named(s, args.cluster)
        had = store_windows.clear_windows(s, cluster_id=cid, by=_actor(args.by))
    print("maintenance windows cleared: approved plans execute at any time" if had else "no maintenance window was set")
    return 0
