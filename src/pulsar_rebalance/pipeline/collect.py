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

from pulsar_rebalance.core.bundles import BundleRange, parse_boundary
from pulsar_rebalance.core.load import LocalBrokerData
from pulsar_rebalance.core.snapshot import SnapshotCheck, check_text, validate_snapshot, validate_topic_stats
from pulsar_rebalance.errors import MalformedResponseError, ScenarioError

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
    check: SnapshotCheck | None = None  # core.snapshot's verdict: warnings for the plan, bundles left out

    def weighted_usage(self, weights: tuple[float, float, float, float, float]) -> dict[str, float]:
        """Pulsar's weighted max resource usage per broker (a fraction; > 1 when over 100%)."""
        return {b: d.max_resource_usage_with_weight(*weights) for b, d in sorted(self.parsed.items())}

    def max_weighted_usage(self, weights: tuple[float, float, float, float, float]) -> float:
        return max(self.weighted_usage(weights).values(), default=0.0)


def collect_snapshot(client, *, namespaces: Iterable[str] | None = None, cluster: str | None = None) -> Snapshot:
    """Read brokers, namespaces, bundle boundaries, load reports, topic stats and ownership."""
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
    claims: dict[str, list[str]] = {}
    for broker in brokers:
        report = client.load_report(broker)
        try:
            parsed = LocalBrokerData.from_json(report, f"load-report[{broker}]")
        except ScenarioError as exc:
            raise MalformedResponseError(
                f"load report of broker {broker} is not a LocalBrokerData: {exc}", url=f"{broker}/admin/v2/broker-stats/load-report"
            ) from exc
        reports[broker] = report
        parsed_reports[broker] = parsed
        stats_rows.extend(_bundle_stats_rows(broker, parsed, ns_boundaries))
        topic_rows.extend(topic_rows_from_stats(broker, client.topic_stats(broker), ns_boundaries))
        owned = client.owned_namespaces(cluster, broker)
        if not isinstance(owned, Mapping):
            raise MalformedResponseError(f"ownedNamespaces of {broker} is not a JSON object", url=broker)
        claims[broker] = [b for b in owned if b.rpartition("/")[0] in ns_boundaries]
    # Everything has been read and nothing written: one validation layer (core.snapshot) rejects a
    # snapshot that contradicts itself, and turns what Pulsar can show mid-transition (a bundle
    # claimed twice, split between two reads) into warnings for the plan with the bundle left out.
    check = validate_snapshot(brokers=brokers, boundaries=ns_boundaries, claims=claims, reports=parsed_reports,
                              raw_reports=reports, leader=leader, cluster=cluster)
    for w in check.warnings:
        log.warning("%s", w.message)
    return Snapshot(
        cluster=cluster,
        admin_url=client.base_url,
        leader=leader,
        brokers={b: client.broker_url(b) for b in brokers},
        namespaces=ns_boundaries,
        load_reports=reports,
        ownership=check.ownership,
        topic_rows=topic_rows,
        bundle_stats_rows=stats_rows,
        collected_at_ms=int(time.time() * 1000),
        parsed=parsed_reports,
        check=check,
    )


def _bundle_stats_rows(broker: str, data: LocalBrokerData, wanted_ns: Mapping[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for bundle, st in data.last_stats.items():
        ns, _, rng = bundle.rpartition("/")  # a malformed name is rejected by validate_snapshot
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
                check_text(domain, "domain", broker=broker, bundle=f"{ns}/{rng}")
                for topic, ts in _mapping(topics, broker, f"{ns}/{rng}/{domain}").items():
                    st = validate_topic_stats(ts, broker=broker, bundle=f"{ns}/{rng}", topic=topic)
                    rows.append({
                        "broker": broker, "namespace": ns, "reported_bundle": rng, "domain": domain, "topic": topic,
                        "msg_rate_in": st.msgRateIn, "msg_rate_out": st.msgRateOut,
                        "msg_throughput_in": st.msgThroughputIn, "msg_throughput_out": st.msgThroughputOut,
                        "producer_count": st.producers(),
                        "consumer_count": sum(sub.consumer_total() for sub in st.subscriptions.values()),
                        "subscription_count": len(st.subscriptions),
                    })
    return rows


def _mapping(value: Any, broker: str, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise MalformedResponseError(f"broker-stats/topics of {broker}: {where} is not a JSON object", url=broker)
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
    if snapshot.check is not None:
        repo.record_snapshot_check(session, run_id=run_id, check=snapshot.check.to_json())
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
