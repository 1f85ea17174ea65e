"""Bundle ranges: the live ``bundle_ranges`` of each namespace, synced from Pulsar's boundaries."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from pulsar_rebalance.store._shared import InvalidRowError, _aware, _for_update, _require_text
from pulsar_rebalance.store.tables import BundleRange
from pulsar_rebalance.store.views import BundleRangeView, RangeDiff, _range_view

logger = logging.getLogger(__name__)

MAX_BOUNDARY = 0xFFFFFFFF
"""Pulsar's ``NamespaceBundles.FULL_UPPER_BOUND``: bundle hash ranges live in [0, 2^32 - 1]."""

_RANGE_NAME = re.compile(r"0x[0-9a-f]{8}_0x[0-9a-f]{8}")


def range_name(lower: int, upper: int) -> str:
    """Pulsar's bundle range string: ``String.format("0x%08x_0x%08x", lower, upper)``."""
    return f"0x{lower:08x}_0x{upper:08x}"


def split_bundle_name(bundle: str, *, field: str = "bundle") -> tuple[str, str]:
    """``tenant/ns/0x.._0x..`` -> (``tenant/ns``, ``0x.._0x..``), Pulsar's split at the last ``/``."""
    if not isinstance(bundle, str):
        raise InvalidRowError(field, f"must be a bundle name string, got {type(bundle).__name__}")
    namespace, sep, bundle_range = bundle.rpartition("/")
    if not sep or not namespace or not _RANGE_NAME.fullmatch(bundle_range):
        raise InvalidRowError(field, f"{bundle!r} is not a bundle name like tenant/namespace/0x00000000_0xffffffff")
    return namespace, bundle_range


def sync_bundle_ranges(
    s: Session,
    *,
    cluster_id: int,
    run_id: str,
    namespace: str,
    boundaries: Sequence[int],
    action_id: int | None = None,
    at: datetime | None = None,
) -> RangeDiff:
    """Make the live ranges of ``namespace`` equal to the ones ``boundaries`` define.

    ``boundaries`` is Pulsar's ``BundlesData.boundaries`` as integers (``p0 < p1 < ... < pn``; bundle i
    is ``[p_i, p_i+1)``, the last one closed). Live ranges not in it are retired (``retired_run_id``,
    ``retired_at``); new ones are created with ``parent_id`` = the range retired here that contains
    them (a split) and ``created_by_action_id = action_id`` (the split action that caused it, if any).
    Nothing is written when nothing changed. Concurrent syncs of one namespace serialise on an
    advisory lock.
    """
    _require_text("namespace", namespace)
    bounds = _validate_boundaries(boundaries)
    when = _aware("at", at)
    s.execute(
        text("SELECT pg_advisory_xact_lock(hashtext(:key))"),
        {"key": f"pulsar_rebalance.bundle_ranges:{cluster_id}:{namespace}"},
    )
    live_stmt = select(BundleRange).where(
        BundleRange.cluster_id == cluster_id, BundleRange.namespace == namespace, BundleRange.retired_at.is_(None)
    )
    live = {row.range_name: row for row in s.execute(_for_update(live_stmt)).scalars()}
    wanted = {range_name(lo, hi): (lo, hi) for lo, hi in zip(bounds, bounds[1:], strict=False)}
    retired = [row for name, row in live.items() if name not in wanted]
    for row in retired:
        row.retired_run_id = run_id
        row.retired_at = when
    created = []
    for name, (lo, hi) in wanted.items():
        if name in live:
            continue
        parent = next((p for p in retired if p.lower <= lo and hi <= p.upper), None)
        row = BundleRange(
            cluster_id=cluster_id,
            namespace=namespace,
            range_name=name,
            lower=lo,
            upper=hi,
            created_run_id=run_id,
            created_at=when,
            parent_id=parent.id if parent is not None else None,
            created_by_action_id=action_id,
        )
        s.add(row)
        created.append(row)
    s.flush()
    if retired or created:
        logger.info(
            "[%s] bundle ranges: %d retired, %d created (run %s)", namespace, len(retired), len(created), run_id
        )
    return RangeDiff(
        namespace=namespace,
        created=tuple(_range_view(r) for r in sorted(created, key=lambda r: r.lower)),
        retired=tuple(_range_view(r) for r in sorted(retired, key=lambda r: r.lower)),
        unchanged=tuple(sorted(name for name in live if name in wanted)),
    )


def live_bundle_ranges(s: Session, *, cluster_id: int, namespace: str | None = None) -> list[BundleRangeView]:
    """The ranges currently live (not retired), ordered by namespace then lower bound."""
    stmt = select(BundleRange).where(BundleRange.cluster_id == cluster_id, BundleRange.retired_at.is_(None))
    if namespace is not None:
        stmt = stmt.where(BundleRange.namespace == namespace)
    return [_range_view(r) for r in s.execute(stmt.order_by(BundleRange.namespace, BundleRange.lower)).scalars()]


def _validate_boundaries(boundaries: Sequence[int]) -> list[int]:
    bounds = list(boundaries)
    if len(bounds) < 2:
        raise InvalidRowError("boundaries", f"need at least 2 boundaries, got {len(bounds)}")
    for i, b in enumerate(bounds):
        if not isinstance(b, int) or isinstance(b, bool):
            raise InvalidRowError(f"boundaries[{i}]", f"must be an integer, got {b!r}")
        if not 0 <= b <= MAX_BOUNDARY:
            raise InvalidRowError(f"boundaries[{i}]", f"{b} is outside [0, 0xffffffff]")
        if i and b <= bounds[i - 1]:
            raise InvalidRowError(f"boundaries[{i}]", f"{b:#010x} is not greater than {bounds[i - 1]:#010x}")
    return bounds


def live_boundaries(s: Session, *, cluster_id: int, namespace: str | None = None) -> dict[str, list[int]]:
    """``{namespace: sorted boundaries}`` of the live bundle ranges (what Pulsar's ``bundles`` returns)."""
    out: dict[str, set[int]] = {}
    for r in live_bundle_ranges(s, cluster_id=cluster_id, namespace=namespace):
        out.setdefault(r.namespace, set()).update((r.lower, r.upper))
    return {ns: sorted(bs) for ns, bs in sorted(out.items())}
