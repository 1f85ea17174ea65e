"""One validation layer for a cluster snapshot: what collect read, checked before anything is written.

The same rules guard the decision core's JSON contracts (``decide``): a snapshot that contradicts
itself is rejected with a :class:`~pulsar_rebalance.errors.SnapshotError` naming the broker, bundle,
topic and field; a state Pulsar itself can be in for a moment (a bundle mid-transfer, a split
between two reads) or that Pulsar accepts but an operator should know about (a broker reporting
every limit as 0, so its usage reads 0 %) becomes a :class:`SnapshotWarning` that reaches the
plan (``plans.summary.warnings``), and the affected bundle is left out of the plan.

Rules (Pulsar's types: ``NamespaceBundleStats``, ``LocalBrokerData``, ``ResourceUsage`` and the
``broker-stats/topics`` stream):

* **Boundaries** of every namespace cover ``0x00000000``–``0xffffffff``, strictly increasing (no
  gap, no overlap): Pulsar creates a namespace over the full range and splits keep it covered.
* **Ownership**: a claim comes from a listed broker, names a valid bundle (bundles nobody lists are
  normal in Pulsar - ownership is taken on first lookup - but also what a broker missing from the
  broker list looks like: one warning per namespace); a bundle claimed by two
  brokers is rejected in the contract and, in collect (each broker's ``ownedNamespaces`` is read at
  a different moment, so an unload in flight shows it twice), left out of the plan with a warning.
  A bundle owned under a range the boundaries do not have (split meanwhile) is left out likewise.
* **Load reports**: every counter within its Java type (``int``: ``numTopics``, ``numBundles``,
  ``numConsumers``, ``numProducers``, ``consumerCount``, ``producerCount``; ``long``: ``topics``,
  ``cacheSize``, ``lastUpdate``), every double finite (NaN/Infinity/negative are already refused by
  the parsers) and every derived value Pulsar computes (float ``percentUsage``, summed throughput)
  finite; a bundle appears in at most one broker's ``lastStats`` and never in the ``lastStats`` of
  a broker other than its owner (a load report listing another broker's bundles is rejected).
  A resource whose ``limit`` is 0 reads 0 % (Pulsar's formula): accepted, with a warning.
* **Topic stats** (``broker-stats/topics``): rates finite non-negative doubles, ``producerCount``
  and subscription ``consumerCount`` Java ints (validated with pydantic).
* **Text**: every name and every string of a load report (stored as JSONB) is storable: no U+0000,
  valid UTF-8.

Pure: no I/O, no Airflow/Spark/SQLAlchemy/HTTP.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from pulsar_rebalance.core.pulsar.bundles import (
    FULL_LOWER_BOUND,
    FULL_UPPER_BOUND,
    BundleRange,
    format_boundary,
    split_full_name,
)
from pulsar_rebalance.core.pulsar.load import LocalBrokerData, ResourceUsage
from pulsar_rebalance.errors import ScenarioError, SnapshotError

JAVA_INT_MAX = 2**31 - 1
JAVA_LONG_MAX = 2**63 - 1

RESOURCES = (
    ("cpu", "cpu"),
    ("memory", "memory"),
    ("directMemory", "direct_memory"),
    ("bandwidthIn", "bandwidth_in"),
    ("bandwidthOut", "bandwidth_out"),
)
"""(Pulsar JSON name, LocalBrokerData attribute) of the five ``ResourceUsage`` members."""

# Java types of LocalBrokerData / NamespaceBundleStats counters (attribute -> (JSON name, max)).
_BROKER_COUNTERS = {
    "num_topics": ("numTopics", JAVA_INT_MAX),
    "num_bundles": ("numBundles", JAVA_INT_MAX),
    "num_consumers": ("numConsumers", JAVA_INT_MAX),
    "num_producers": ("numProducers", JAVA_INT_MAX),
    "last_update": ("lastUpdate", JAVA_LONG_MAX),
}
_BUNDLE_COUNTERS = {
    "consumer_count": ("consumerCount", JAVA_INT_MAX),
    "producer_count": ("producerCount", JAVA_INT_MAX),
    "topics": ("topics", JAVA_LONG_MAX),
    "cache_size": ("cacheSize", JAVA_LONG_MAX),
}


@dataclass(frozen=True)
class SnapshotWarning:
    """Something the plan's reviewer must know; ``bundle`` set = that bundle is left out of the plan."""

    kind: str
    message: str
    broker: str | None = None
    bundle: str | None = None
    field: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            k: v
            for k, v in (
                ("kind", self.kind),
                ("message", self.message),
                ("broker", self.broker),
                ("bundle", self.bundle),
                ("field", self.field),
            )
            if v is not None
        }


@dataclass
class SnapshotCheck:
    """What :func:`validate_snapshot` concluded: the resolved ownership and what the plan must say."""

    ownership: dict[str, str]
    warnings: list[SnapshotWarning] = field(default_factory=list)

    @property
    def excluded_bundles(self) -> list[str]:
        """Bundles left out of the plan (mid-transition), sorted."""
        return sorted({w.bundle for w in self.warnings if w.bundle and w.kind in EXCLUDING_KINDS})

    def to_json(self) -> dict[str, Any]:
        return {"warnings": [w.to_json() for w in self.warnings], "excludedBundles": self.excluded_bundles}


EXCLUDING_KINDS = frozenset({"bundle_claimed_twice", "bundle_not_in_boundaries", "bundle_stats_without_owner"})


# ------------------------------------------------------------------------------------------- text
def check_text(
    value: str, field: str, *, broker: str | None = None, bundle: str | None = None, topic: str | None = None
) -> None:
    """A string Postgres (text, JSONB) and Parquet can hold: no U+0000 and valid UTF-8 (no lone surrogate)."""
    if "\x00" in value:
        problem = "contains the character U+0000, which PostgreSQL cannot store"
    else:
        try:
            value.encode("utf-8")
            return
        except UnicodeEncodeError:
            problem = "is not valid UTF-8 (a lone surrogate)"
    raise SnapshotError(f"{field} {value[:60]!r} {problem}", broker=broker, bundle=bundle, topic=topic, field=field)


def check_storable(doc: Any, field: str, *, broker: str | None = None) -> None:
    """Every key and string of a JSON document passes :func:`check_text` (iterative: any depth)."""
    stack: list[tuple[Any, str]] = [(doc, field)]
    while stack:
        value, path = stack.pop()
        if len(path) > 240:  # deep nesting: keep the message readable
            path = f"{path[:120]}...{path[-80:]}"
        if isinstance(value, str):
            check_text(value, path, broker=broker)
        elif isinstance(value, Mapping):
            for k, v in value.items():
                if isinstance(k, str):
                    check_text(k, f"{path} key", broker=broker)
                stack.append((v, f"{path}.{k}"))
        elif isinstance(value, (list, tuple)):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(value))


# ------------------------------------------------------------------------------------------- boundaries
def check_namespace_boundaries(namespace: str, boundaries: Sequence[int], path: str = "boundaries") -> None:
    """A live namespace's boundaries: from 0x00000000 to 0xffffffff, strictly increasing."""
    if len(boundaries) < 2:
        raise SnapshotError(f"namespace {namespace}: need at least 2 boundaries, got {len(boundaries)}", field=path)
    if boundaries[0] != FULL_LOWER_BOUND:
        raise SnapshotError(
            f"namespace {namespace}: boundaries start at {format_boundary(boundaries[0])}, not 0x00000000 "
            "(hashes below it would belong to no bundle)",
            field=f"{path}[0]",
        )
    if boundaries[-1] != FULL_UPPER_BOUND:
        raise SnapshotError(
            f"namespace {namespace}: boundaries end at {format_boundary(boundaries[-1])}, not 0xffffffff "
            "(hashes above it would belong to no bundle)",
            field=f"{path}[{len(boundaries) - 1}]",
        )
    for i in range(1, len(boundaries)):
        if boundaries[i] <= boundaries[i - 1]:
            raise SnapshotError(
                f"namespace {namespace}: boundaries overlap: {format_boundary(boundaries[i])} does not follow "
                f"{format_boundary(boundaries[i - 1])} (boundaries must be strictly increasing)",
                field=f"{path}[{i}]",
            )


def live_bundles(boundaries: Mapping[str, Sequence[int]]) -> set[str]:
    return {f"{ns}/0x{a:08x}_0x{b:08x}" for ns, bs in boundaries.items() for a, b in zip(bs, bs[1:])}


def check_no_overlap(bundles: Iterable[str], path: str) -> None:
    """Distinct bundles of one namespace must not overlap (``0x0_0x8`` and ``0x4_0xc`` cannot both exist)."""
    by_ns: dict[str, list[tuple[int, int, str]]] = {}
    parsed: dict[str, BundleRange] = {}  # range strings repeat across namespaces
    for name in bundles:
        ns, rng = split_full_name(name)
        r = parsed.get(rng) or parsed.setdefault(rng, BundleRange.parse(rng, path))
        by_ns.setdefault(ns, []).append((r.lower, r.upper, name))
    for ranges in by_ns.values():
        ranges.sort()
        for (_lo1, hi1, a), (lo2, _hi2, b) in zip(ranges, ranges[1:]):
            if lo2 < hi1 and a != b:
                raise SnapshotError(f"bundle ranges overlap: {a} and {b}", bundle=b, field=path)


# ------------------------------------------------------------------------------------------- ownership
def resolve_ownership(
    claims: Mapping[str, Iterable[str]],
    *,
    brokers: Sequence[str],
    boundaries: Mapping[str, Sequence[int]],
    transitional: bool = True,
) -> SnapshotCheck:
    """Turn per-broker ownership claims (broker -> owned bundle names, wanted namespaces only) into
    bundle -> owner.

    ``transitional``: the claims were read at different moments (collect), so a bundle claimed
    twice or unknown to the boundaries is a warning (left out of the plan) instead of an error.
    """
    listed = set(brokers)
    live = live_bundles(boundaries)
    owners: dict[str, list[str]] = {}
    for broker, bundles in claims.items():
        if broker not in listed:
            first = next(iter(bundles), None)
            raise SnapshotError(
                f"broker {broker} owns bundles but is not in the cluster's broker list {sorted(listed)}",
                broker=broker,
                bundle=first,
                field="ownedNamespaces",
            )
        for bundle in bundles:
            _check_bundle_name(bundle, broker=broker, field="ownedNamespaces")
            owners.setdefault(bundle, []).append(broker)
    check = SnapshotCheck(ownership={})
    for bundle, who in owners.items():
        if len(who) > 1:
            kind, error = "bundle_claimed_twice", f"bundle {bundle} is owned by {len(who)} brokers: {', '.join(who)}"
            warning = (
                f"bundle {bundle} is listed as owned by {' and '.join(who)} (their ownedNamespaces were read "
                "at different moments: an unload in flight?): left out of this plan"
            )
        elif bundle not in live:
            kind, error = (
                "bundle_not_in_boundaries",
                f"bundle {bundle} owned by {who[0]} is not a bundle of its namespace's boundaries",
            )
            warning = (
                f"bundle {bundle} is owned by {who[0]} but is not in the namespace's boundaries read earlier "
                "(split meanwhile?): left out of this plan"
            )
        else:
            check.ownership[bundle] = who[0]
            continue
        if not transitional:
            raise SnapshotError(error, broker=who[-1], bundle=bundle, field="ownedNamespaces")
        check.warnings.append(SnapshotWarning(kind, warning, broker=who[0], bundle=bundle, field="ownedNamespaces"))
    return check


# ------------------------------------------------------------------------------------------- load reports
def check_load_report(
    broker: str,
    data: LocalBrokerData,
    path: str,
    present: Iterable[str] | None = None,
) -> list[SnapshotWarning]:
    """Java ranges of one parsed LocalBrokerData, finite derived values, and limit warnings.

    ``present``: the JSON members of the raw report (an absent ``memory``/``directMemory`` defaults to
    limit 0 and is not worth a warning); None = all five resources were given.
    """
    given = None if present is None else set(present)
    for bundle, st in data.last_stats.items():  # first: the broker's counters may be sums of these
        _check_bundle_name(bundle, broker=broker, field=f"{path}.lastStats")
        for attr, (name, top) in _BUNDLE_COUNTERS.items():
            _java_range(getattr(st, attr), top, broker=broker, bundle=bundle, field=f"{path}.lastStats.{bundle}.{name}")
        if not math.isfinite(st.total_msg_throughput) or not math.isfinite(st.total_msg_rate):
            raise SnapshotError(
                f"load report of broker {broker}: bundle {bundle}'s in + out rates overflow a double",
                broker=broker,
                bundle=bundle,
                field=f"{path}.lastStats.{bundle}",
            )
    for attr, (name, top) in _BROKER_COUNTERS.items():
        _java_range(getattr(data, attr), top, broker=broker, field=f"{path}.{name}")
    if not math.isfinite(data.total_msg_throughput) or not math.isfinite(data.total_msg_rate):
        raise SnapshotError(
            f"load report of broker {broker}: msgThroughputIn + msgThroughputOut overflows a double",
            broker=broker,
            field=f"{path}.msgThroughputIn",
        )
    warnings: list[SnapshotWarning] = []
    zero = []
    for name, attr in RESOURCES:
        usage: ResourceUsage = getattr(data, attr)
        if not math.isfinite(usage.percent_usage()):
            raise SnapshotError(
                f"load report of broker {broker}: {name} usage {usage.usage!r} / limit {usage.limit!r} is not a finite "
                "float percentage (Pulsar computes percentUsage in 32-bit float)",
                broker=broker,
                field=f"{path}.{name}",
            )
        if usage.limit <= 0 and (given is None or name in given):
            zero.append(name)
    if zero:
        every = len(zero) == len(RESOURCES)
        warnings.append(
            SnapshotWarning(
                "limit_zero",
                f"broker {broker} reports {'every' if every else 'a'} resource limit as 0 ({', '.join(zero)}): "
                f"{'its usage reads' if every else 'those resources read'} 0 % (Pulsar's formula), so the plan "
                f"{'treats it as idle' if every else 'ignores them for it'}; check the broker's load reporting",
                broker=broker,
                field=f"{path}.{zero[0]}.limit",
            )
        )
    return warnings


def check_bundle_stats_owners(
    reports: Mapping[str, LocalBrokerData],
    ownership: Mapping[str, str],
    wanted: Iterable[str] | None = None,
    excluded: Iterable[str] = (),
) -> list[SnapshotWarning]:
    """A bundle is in at most one report's ``lastStats``, and only in its owner's.

    Every bundle is checked for duplicates (compute_usage keys samples by bundle); ownership is
    only checked for ``wanted`` namespaces (None = every namespace).
    """
    reporter: dict[str, str] = {}
    warnings: list[SnapshotWarning] = []
    wanted_ns = None if wanted is None else set(wanted)
    skip = set(excluded)
    for broker, data in reports.items():
        for bundle in data.last_stats:
            other = reporter.setdefault(bundle, broker)
            if other != broker:
                raise SnapshotError(
                    f"bundle {bundle} is in the load reports of both {other} and {broker}: a load report lists "
                    "another broker's bundle",
                    broker=broker,
                    bundle=bundle,
                    field=f"load-report[{broker}].lastStats",
                )
    for bundle, broker in reporter.items():
        ns, _ = split_full_name(bundle)
        if bundle in skip or (wanted_ns is not None and ns not in wanted_ns):
            continue
        owner = ownership.get(bundle)
        if owner is None:
            warnings.append(
                SnapshotWarning(
                    "bundle_stats_without_owner",
                    f"bundle {bundle} is in the load report of {broker} but no broker lists it as owned "
                    "(unloaded meanwhile?): left out of this plan",
                    broker=broker,
                    bundle=bundle,
                    field=f"load-report[{broker}].lastStats",
                )
            )
        elif owner != broker:
            raise SnapshotError(
                f"the load report of {broker} lists bundle {bundle}, which is owned by {owner}",
                broker=broker,
                bundle=bundle,
                field=f"load-report[{broker}].lastStats",
            )
    return warnings


def _check_bundle_name(bundle: str, *, broker: str, field: str) -> None:
    """``tenant/namespace/0x..._0x...`` (what Pulsar's LoadManagerShared splits at the last '/')."""
    try:
        ns, rng = split_full_name(bundle)
        if "/" not in ns:
            raise ValueError("the namespace must be 'tenant/namespace'")
        BundleRange.parse(rng, field)
    except (ValueError, ScenarioError) as exc:
        raise SnapshotError(
            f"broker {broker} reports {bundle!r:.80}, which is not a bundle name: {exc}",
            broker=broker,
            bundle=bundle,
            field=field,
        ) from None


def _java_range(value: int, top: int, *, broker: str, field: str, bundle: str | None = None) -> None:
    if value > top:
        kind = "int" if top == JAVA_INT_MAX else "long"
        raise SnapshotError(
            f"load report of broker {broker}: {value} does not fit in a Java {kind} (at most {top})",
            broker=broker,
            bundle=bundle,
            field=field,
        )


# ------------------------------------------------------------------------------------------- topic stats
def _integral(value: Any) -> Any:
    """Jackson reads an integral JSON float (``3.0``) into an int field; booleans are never numbers."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return value


JavaInt = Annotated[int, BeforeValidator(_integral), Field(ge=0, le=JAVA_INT_MAX)]
Rate = Annotated[float, Field(ge=0)]


class SubscriptionStats(BaseModel):
    """The members of a subscription's stats we read (``consumers`` wins over ``consumerCount``)."""

    model_config = ConfigDict(strict=True, allow_inf_nan=False, extra="ignore")
    consumers: list[Any] | None = None
    consumerCount: JavaInt = 0

    def consumer_total(self) -> int:
        return len(self.consumers) if self.consumers is not None else self.consumerCount


class TopicStats(BaseModel):
    """One topic of ``GET /admin/v2/broker-stats/topics`` (PersistentTopic's stats stream)."""

    model_config = ConfigDict(strict=True, allow_inf_nan=False, extra="ignore")
    msgRateIn: Rate = 0.0
    msgRateOut: Rate = 0.0
    msgThroughputIn: Rate = 0.0
    msgThroughputOut: Rate = 0.0
    producerCount: JavaInt | None = None
    publishers: list[Any] | None = None
    subscriptions: dict[str, SubscriptionStats] = Field(default_factory=dict)

    def producers(self) -> int:
        if self.producerCount is not None:
            return self.producerCount
        return len(self.publishers) if self.publishers is not None else 0


def validate_topic_stats(raw: Any, *, broker: str, bundle: str, topic: str) -> TopicStats:
    """Parse one topic's stats, or raise a SnapshotError naming broker, bundle, topic and field."""
    check_text(topic, "topic", broker=broker, bundle=bundle, topic=topic)
    try:
        return TopicStats.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "$"
        got = err.get("input")
        raise SnapshotError(
            f"topic stats of {topic} on broker {broker} (bundle {bundle}): {where}: {err['msg']}, got {got!r:.80}",
            broker=broker,
            bundle=bundle,
            topic=topic,
            field=where,
        ) from None


# ------------------------------------------------------------------------------------------- the snapshot
def validate_snapshot(
    *,
    brokers: Sequence[str],
    boundaries: Mapping[str, Sequence[int]],
    claims: Mapping[str, Iterable[str]],
    reports: Mapping[str, LocalBrokerData],
    raw_reports: Mapping[str, Mapping[str, Any]] | None = None,
    leader: Any = None,
    cluster: str | None = None,
) -> SnapshotCheck:
    """Every rule of this module over what collect read (``claims``: wanted namespaces only;
    ``raw_reports``: the load reports as received, to tell an absent resource from a zero limit)."""
    if cluster is not None:
        check_text(cluster, "clusters")
    if leader is not None:
        if not isinstance(leader, str):
            raise SnapshotError(f"the leader broker is not a string: {leader!r:.60}", field="leaderBroker")
        check_text(leader, "leaderBroker", broker=leader)
    seen: set[str] = set()
    for b in brokers:
        check_text(b, "brokers", broker=b)
        if b in seen:
            raise SnapshotError(f"broker {b} is listed twice in the cluster's broker list", broker=b, field="brokers")
        seen.add(b)
    for ns, bs in boundaries.items():
        check_text(ns, "namespaces")
        check_namespace_boundaries(ns, bs, f"bundles[{ns}].boundaries")
    for broker, raw in (raw_reports or {}).items():
        check_storable(raw, f"load-report[{broker}]", broker=broker)
    check = resolve_ownership(claims, brokers=brokers, boundaries=boundaries, transitional=True)
    claimed = {b for bs in claims.values() for b in bs}
    for ns, bs in sorted(boundaries.items()):
        unowned = [f"0x{a:08x}_0x{b:08x}" for a, b in zip(bs, bs[1:]) if f"{ns}/0x{a:08x}_0x{b:08x}" not in claimed]
        if unowned:
            check.warnings.append(
                SnapshotWarning(
                    "bundles_without_owner",
                    f"namespace {ns}: {len(unowned)} of {len(bs) - 1} bundles have no owner among the listed brokers "
                    f"({', '.join(unowned[:5])}{', ...' if len(unowned) > 5 else ''}): not loaded yet, or owned by a broker "
                    "outside the broker list; the plan neither moves nor places them",
                    field=f"bundles[{ns}]",
                )
            )
    for broker, data in reports.items():
        received = (raw_reports or {}).get(broker)
        check.warnings.extend(
            check_load_report(broker, data, f"load-report[{broker}]", None if received is None else received.keys())
        )
    check.warnings.extend(check_bundle_stats_owners(reports, check.ownership, boundaries, check.excluded_bundles))
    if leader and leader not in seen and not any(leader.endswith(f"//{b}") for b in seen):
        check.warnings.append(
            SnapshotWarning(
                "leader_not_listed",
                f"the leader broker {leader} is not in the broker list (leader election in progress?)",
                broker=leader,
                field="leaderBroker",
            )
        )
    return check
