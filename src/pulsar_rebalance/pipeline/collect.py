"""collect_load: read the cluster through Pulsar's admin REST API into one validated snapshot.

All HTTP happens first and every response is validated before anything is written, so an
unreachable URL, a broker answering 500 or a malformed load report fails the task with a clear
error and leaves nothing half-written (the run row is not even created).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pulsar_rebalance.core.bundles import BundleRange, parse_boundary, split_full_name
from pulsar_rebalance.core.load import LocalBrokerData
from pulsar_rebalance.errors import MalformedResponseError, PulsarAdminError, ScenarioError

log = logging.getLogger(__name__)

TOPIC_COLUMNS = (
    "broker", "namespace", "reported_bundle", "domain", "topic",
    "msg_rate_in", "msg_rate_out", "msg_throughput_in", "msg_throughput_out",
    "producer_count", "consumer_count", "subscription_count",
)
BUNDLE_STATS_COLUMNS = (
    "broker", "bundle", "namespace", "range", "msg_rate_in", "msg_rate_out", "msg_throughput_in",
    "msg_throughput_out", "consumer_count", "producer_count", "topics", "cache_size",
)


@dataclass
class Snapshot:
    """Everything one collect_load run read from Pulsar, validated."""

    cluster: str
    admin_url: str
    leader: str | None
    brokers: dict[str, str]  # broker id -> web service URL
    namespaces: dict[str, list[int]]  # namespace -> live boundaries
    load_reports: dict[str, dict[str, Any]]  # broker id -> LocalBrokerData JSON as received
    ownership: dict[str, str]  # full bundle name -> broker id
    topic_rows: list[dict[str, Any]] = field(default_factory=list)
    bundle_stats_rows: list[dict[str, Any]] = field(default_factory=list)
    collected_at_ms: int = 0
    parsed: dict[str, LocalBrokerData] = field(default_factory=dict)  # load_reports, validated and parsed once
    # brokers that did not answer (connect error, timeout, 5xx after the client's retries): broker -> error
    unanswered: dict[str, str] = field(default_factory=dict)  # no load report: left out of this run
    without_topic_stats: dict[str, str] = field(default_factory=dict)  # load report, but no topic stats

    def data_quality(self) -> dict[str, Any]:
        return {"brokers": len(self.brokers), "unansweredBrokers": dict(sorted(self.unanswered.items())),
                "brokersWithoutTopicStats": dict(sorted(self.without_topic_stats.items()))}

    def weighted_usage(self, weights: tuple[float, float, float, float, float]) -> dict[str, float]:
        """Pulsar's weighted max resource usage per broker (a fraction; > 1 when over 100%)."""
        return {b: d.max_resource_usage_with_weight(*weights) for b, d in sorted(self.parsed.items())}

    def max_weighted_usage(self, weights: tuple[float, float, float, float, float]) -> float:
        return max(self.weighted_usage(weights).values(), default=0.0)


def collect_snapshot(
    client, *, namespaces: Iterable[str] | None = None, cluster: str | None = None, topic_stats: bool = True,
    max_missing_brokers: float = 0.0,
) -> Snapshot:
    """Read brokers, namespaces, bundle boundaries, load reports, topic stats and ownership.

    ``topic_stats=False`` leaves topic rows to :class:`TopicStatsFetcher` (Spark tasks). A broker that
    does not answer (``PulsarAdminError.retryable``: connect, timeout, 5xx after the client's retries)
    is recorded in ``Snapshot.unanswered`` and left out, unless more than ``max_missing_brokers`` (a
    fraction) of the brokers are missing: then the first such error is raised.
    """
    wanted = set(namespaces or [])
    clusters = client.clusters()
    if not cluster:
        if not clusters:
            raise MalformedResponseError("GET /admin/v2/clusters returned no cluster", url=client.base_url)
        cluster = clusters[0]
    brokers = client.brokers(cluster)
    if not brokers:
        raise MalformedResponseError(f"cluster {cluster!r} has no active brokers", url=client.base_url)
    leader_info = client.leader_broker()
    leader = leader_info.get("brokerId") or leader_info.get("serviceUrl")

    ns_boundaries: dict[str, list[int]] = {}
    for tenant in client.tenants():
        for ns in client.namespaces(tenant):
            if wanted and ns not in wanted:
                continue
            data = client.bundles(ns)
            try:
                bounds = [parse_boundary(b, f"{ns}.boundaries[{i}]") for i, b in enumerate(data["boundaries"])]
            except (KeyError, TypeError, ScenarioError) as exc:
                raise MalformedResponseError(f"bundles of {ns}: {exc}", url=client.base_url) from exc
            ns_boundaries[ns] = bounds
    missing = wanted - set(ns_boundaries)
    if missing:
        from pulsar_rebalance.errors import NotFoundError

        raise NotFoundError(f"namespaces not found in cluster {cluster!r}: {sorted(missing)}", status_code=404)

    reports: dict[str, dict[str, Any]] = {}
    parsed_reports: dict[str, LocalBrokerData] = {}
    topic_rows: list[dict[str, Any]] = []
    stats_rows: list[dict[str, Any]] = []
    ownership: dict[str, str] = {}
    unanswered: dict[str, str] = {}
    first_error: PulsarAdminError | None = None
    for broker in brokers:
        try:
            report = client.load_report(broker)
            stats = client.topic_stats(broker) if topic_stats else {}
            owned = client.owned_namespaces(cluster, broker)
        except PulsarAdminError as exc:
            if not exc.retryable:
                raise
            unanswered[broker] = _describe(exc)
            first_error = first_error or exc
            continue
        try:
            parsed = LocalBrokerData.from_json(report, f"load-report[{broker}]")
        except ScenarioError as exc:
            raise MalformedResponseError(
                f"load report of broker {broker} is not a LocalBrokerData: {exc}", url=f"{broker}/admin/v2/broker-stats/load-report"
            ) from exc
        reports[broker] = report
        parsed_reports[broker] = parsed
        stats_rows.extend(_bundle_stats_rows(broker, parsed, ns_boundaries))
        topic_rows.extend(topic_rows_from_stats(broker, stats, ns_boundaries))
        if not isinstance(owned, Mapping):
            raise MalformedResponseError(f"ownedNamespaces of {broker} is not a JSON object", url=broker)
        for bundle in owned:
            ns, rng = split_full_name(bundle)
            if ns in ns_boundaries:
                ownership[bundle] = broker
    check_missing_brokers(len(brokers), unanswered, max_missing_brokers, first_error)
    # Ownership and boundaries are read at slightly different moments; a bundle split in between is
    # owned under a name our boundaries do not know yet. It is left for the next run, not guessed.
    live = {f"{ns}/0x{a:08x}_0x{b:08x}" for ns, bs in ns_boundaries.items() for a, b in zip(bs, bs[1:])}
    unknown = sorted(set(ownership) - live)
    for bundle in unknown:
        log.warning("bundle %s is owned by %s but not in the namespace's boundaries read earlier "
                    "(split meanwhile?): left for the next run", bundle, ownership.pop(bundle))
    return Snapshot(
        cluster=cluster,
        admin_url=client.base_url,
        leader=leader,
        brokers={b: client.broker_url(b) for b in brokers},
        namespaces=ns_boundaries,
        load_reports=reports,
        ownership=ownership,
        topic_rows=topic_rows,
        bundle_stats_rows=stats_rows,
        collected_at_ms=int(time.time() * 1000),
        parsed=parsed_reports,
        unanswered=unanswered,
    )


def _describe(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"


def check_missing_brokers(
    total: int, missing: Mapping[str, str], max_fraction: float, error: Exception | None = None
) -> None:
    """Raise when more than ``max_fraction`` of ``total`` brokers are missing (``error``, or a summary)."""
    if len(missing) <= max_fraction * total:
        return
    note = (f"{len(missing)} of {total} brokers did not answer ({', '.join(sorted(missing)[:5])}"
            f"{', ...' if len(missing) > 5 else ''}); at most max_missing_brokers={max_fraction:g} of them may be missing")
    if error is None:
        error = PulsarAdminError(f"{note}: {next(iter(sorted(missing.items())))[1]}")
    else:
        error.add_note(note)
    raise error


TOPIC_STATS_CONCURRENCY = 16
"""At most this many brokers' topic stats are fetched at once (Spark partitions of the broker list)."""


@dataclass(frozen=True)
class TopicStatsFetcher:
    """Runs inside Spark tasks: ``GET /admin/v2/broker-stats/topics`` of each broker, flattened to topic rows.

    Each task builds its own admin client from ``settings`` (``PulsarAdminClient.settings``: URL, TLS,
    timeout, retries -- no secret) and the admin token from its own environment (``PULSAR_ADMIN_TOKEN``:
    on a cluster, give it to the executors with ``spark.executorEnv.PULSAR_ADMIN_TOKEN`` or your
    cluster's secret mechanism). A broker that does not answer (after the client's retries) is reported
    through ``missing`` (a Spark accumulator) and skipped; a malformed answer fails the task.
    """

    settings: Mapping[str, Any]
    namespaces: tuple[str, ...]

    @classmethod
    def for_client(cls, client, namespaces: Iterable[str]) -> TopicStatsFetcher:
        settings = dict(getattr(client, "settings", None) or {"url": client.base_url})
        return cls(settings=settings, namespaces=tuple(sorted(namespaces)))

    def __call__(self, brokers: Iterable[str], missing) -> Iterable[tuple]:
        import os

        from pulsar_rebalance.pipeline.context import ENV_ADMIN_TOKEN
        from pulsar_rebalance.pulsar_admin import PulsarAdminClient

        settings = dict(self.settings)
        wanted = dict.fromkeys(self.namespaces)
        with PulsarAdminClient.from_url(settings.pop("url"), token=os.environ.get(ENV_ADMIN_TOKEN) or None,
                                        **settings) as client:
            for broker in brokers:
                try:
                    stats = client.topic_stats(broker)
                except PulsarAdminError as exc:
                    if not exc.retryable:
                        raise
                    missing.add({broker: _describe(exc)})
                    continue
                for row in topic_rows_from_stats(broker, stats, wanted):
                    yield tuple(row[c] for c in TOPIC_COLUMNS)


def _bundle_stats_rows(broker: str, data: LocalBrokerData, wanted_ns: Mapping[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for bundle, st in data.last_stats.items():
        ns, rng = split_full_name(bundle)
        if ns not in wanted_ns:
            continue
        rows.append({
            "broker": broker, "bundle": bundle, "namespace": ns, "range": rng,
            "msg_rate_in": float(st.msg_rate_in), "msg_rate_out": float(st.msg_rate_out),
            "msg_throughput_in": float(st.msg_throughput_in), "msg_throughput_out": float(st.msg_throughput_out),
            "consumer_count": int(st.consumer_count), "producer_count": int(st.producer_count),
            "topics": int(st.topics), "cache_size": int(st.cache_size),
        })
    return rows


def topic_rows_from_stats(broker: str, stats: Any, wanted_ns: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Flatten GET /admin/v2/broker-stats/topics: namespace -> bundle -> domain -> topic -> stats."""
    if not isinstance(stats, Mapping):
        raise MalformedResponseError(f"broker-stats/topics of {broker} is not a JSON object", url=broker)
    rows: list[dict[str, Any]] = []
    for ns, bundles in stats.items():
        if ns not in wanted_ns:
            continue
        for rng, domains in _mapping(bundles, broker, ns).items():
            BundleRange.parse(rng, f"broker-stats/topics[{broker}].{ns}")
            for domain, topics in _mapping(domains, broker, f"{ns}/{rng}").items():
                for topic, ts in _mapping(topics, broker, f"{ns}/{rng}/{domain}").items():
                    ts = _mapping(ts, broker, topic)
                    subs = ts.get("subscriptions") or {}
                    consumers = 0
                    for sub in subs.values() if isinstance(subs, Mapping) else []:
                        cons = sub.get("consumers") if isinstance(sub, Mapping) else None
                        consumers += len(cons) if isinstance(cons, list) else int(sub.get("consumerCount", 0) or 0)
                    publishers = ts.get("publishers")
                    producers = ts.get("producerCount", len(publishers) if isinstance(publishers, list) else 0)
                    try:
                        rows.append({
                            "broker": broker, "namespace": ns, "reported_bundle": rng, "domain": domain, "topic": topic,
                            "msg_rate_in": _rate(ts, "msgRateIn"), "msg_rate_out": _rate(ts, "msgRateOut"),
                            "msg_throughput_in": _rate(ts, "msgThroughputIn"),
                            "msg_throughput_out": _rate(ts, "msgThroughputOut"),
                            "producer_count": int(producers), "consumer_count": consumers,
                            "subscription_count": len(subs) if isinstance(subs, Mapping) else 0,
                        })
                    except (TypeError, ValueError) as exc:
                        raise MalformedResponseError(f"topic stats of {topic} on {broker}: {exc}", url=broker) from exc
    return rows


def _mapping(value: Any, broker: str, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise MalformedResponseError(f"broker-stats/topics of {broker}: {where} is not a JSON object", url=broker)
    return value


def _rate(stats: Mapping[str, Any], key: str) -> float:
    value = float(stats.get(key, 0.0) or 0.0)
    if value != value or value < 0:
        raise ValueError(f"{key} must be a non-negative number, got {stats.get(key)!r}")
    return value


def record_snapshot(
    session, snapshot: Snapshot, *, run_id: str, params: Mapping[str, Any], work_dir: str,
    weights: tuple[float, float, float, float, float],
) -> int:
    """Write the snapshot (run, brokers, raw reports, live ranges, ownership) in the caller's transaction."""
    from pulsar_rebalance.store import repository as repo

    cluster_id = repo.get_or_create_cluster(session, name=snapshot.cluster, admin_url=snapshot.admin_url)
    repo.start_run(session, run_id=run_id, cluster_id=cluster_id, params=dict(params), work_dir=work_dir)
    repo.upsert_brokers(session, cluster_id=cluster_id, run_id=run_id, brokers=snapshot.brokers)
    repo.record_broker_load(
        session, run_id=run_id, rows=[broker_load_row(b, r, weights=weights, parsed=snapshot.parsed.get(b))
              for b, r in snapshot.load_reports.items()]
    )
    for ns, bounds in sorted(snapshot.namespaces.items()):
        repo.sync_bundle_ranges(session, cluster_id=cluster_id, run_id=run_id, namespace=ns, boundaries=bounds)
    repo.sync_ownership(
        session, cluster_id=cluster_id, run_id=run_id, ownership=snapshot.ownership,
        cause="observed by collect_load",
    )
    repo.set_run_stage(session, run_id=run_id, stage="collect_load")
    return cluster_id


def broker_load_row(
    broker: str,
    report: Mapping[str, Any],
    *,
    weights: tuple[float, float, float, float, float],
    ema: float | None = None,
    parsed: LocalBrokerData | None = None,
) -> dict[str, Any]:
    """One broker_load row from a raw LocalBrokerData JSON report (``parsed``: the same report, if already parsed)."""
    d = parsed or LocalBrokerData.from_json(report, f"load-report[{broker}]")
    weighted = d.max_resource_usage_with_weight(*weights)
    return {
        "broker_id": broker,
        "raw_report": dict(report),
        "cpu_usage": d.cpu.percent_usage(),
        "memory_usage": d.memory.percent_usage(),
        "direct_memory_usage": d.direct_memory.percent_usage(),
        "bandwidth_in_usage": d.bandwidth_in.percent_usage(),
        "bandwidth_out_usage": d.bandwidth_out.percent_usage(),
        "msg_rate_in": d.msg_rate_in,
        "msg_rate_out": d.msg_rate_out,
        "msg_throughput_in": d.msg_throughput_in,
        "msg_throughput_out": d.msg_throughput_out,
        "num_bundles": d.num_bundles,
        "num_topics": d.num_topics,
        "max_usage": d.max_resource_usage(),
        "weighted_max_usage": weighted,
        "usage_ema": weighted if ema is None else ema,
    }
