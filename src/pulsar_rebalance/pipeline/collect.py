"""collect_load: read the cluster through Pulsar's admin REST API into one validated snapshot.

All HTTP happens first and every response is validated before anything is written, so an
unreachable URL, a broker answering 500 or a malformed load report fails the task with a clear
error and leaves nothing half-written (the run row is not even created).

At scale the driver holds broker-level data only: ``collect_load`` reads brokers, boundaries, load
reports, ownership and the placement constraints here (:func:`read_placement_policies`), and each
broker's topic stats inside Spark tasks (:class:`TopicStatsFetcher`, validated there with the same
rules), written straight to Parquet.
A broker that does not answer (connect error, timeout, 5xx after the client's retries) is left out
of the run with a warning that reaches the plan, unless more than ``max_missing_brokers`` of them
are missing; a broker answering something invalid fails the run, naming it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from pulsar_rebalance.core.contract.json_input import field_path
from pulsar_rebalance.core.contract.load_json import local_broker_data_from_json
from pulsar_rebalance.core.contract.policies_json import (
    POLICY_KEYS,
    namespace_isolation_policy_from_json,
    parse_anti_affinity_groups,
    parse_failure_domains,
)
from pulsar_rebalance.core.pulsar.bundles import BundleRange, parse_boundary
from pulsar_rebalance.core.pulsar.load import LocalBrokerData
from pulsar_rebalance.core.pulsar.policies import NO_POLICIES, NamespaceIsolationPolicy, PlacementPolicies
from pulsar_rebalance.core.snapshot import (
    SnapshotCheck,
    SnapshotWarning,
    check_text,
    validate_snapshot,
    validate_topic_stats,
)
from pulsar_rebalance.errors import MalformedResponseError, PulsarAdminError, RebalanceError, ScenarioError

log = logging.getLogger(__name__)

TOPIC_COLUMNS = (
    "broker",
    "namespace",
    "reported_bundle",
    "domain",
    "topic",
    "msg_rate_in",
    "msg_rate_out",
    "msg_throughput_in",
    "msg_throughput_out",
    "producer_count",
    "consumer_count",
    "subscription_count",
)
BUNDLE_STATS_COLUMNS = (
    "broker",
    "bundle",
    "namespace",
    "range",
    "msg_rate_in",
    "msg_rate_out",
    "msg_throughput_in",
    "msg_throughput_out",
    "consumer_count",
    "producer_count",
    "topics",
    "cache_size",
)


def no_placement_policies() -> dict[str, Any]:
    """No placement constraint (Pulsar's default), in the ``decide`` contract's three fields."""
    return {key: {} for key in POLICY_KEYS}


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
    # brokers that did not answer (connect error, timeout, 5xx after the client's retries): broker -> error
    unanswered: dict[str, str] = field(default_factory=dict)  # no load report: left out of this run
    without_topic_stats: dict[str, str] = field(default_factory=dict)  # load report, but no topic stats
    # the placement constraints as the admin API answered them (validated): stored with the run, passed to
    # decide and the guard; ``policies`` is the same, parsed
    placement_policies: dict[str, Any] = field(default_factory=no_placement_policies)
    policies: PlacementPolicies = NO_POLICIES
    # set by execute_unload's re-read after execution: the measured weighted max usage per broker, and its max
    broker_usage: dict[str, float] = field(default_factory=dict)
    max_usage: float = 0.0

    def data_quality(self) -> dict[str, Any]:
        return {
            "brokers": len(self.brokers),
            "unansweredBrokers": dict(sorted(self.unanswered.items())),
            "brokersWithoutTopicStats": dict(sorted(self.without_topic_stats.items())),
        }

    def weighted_usage(self, weights: tuple[float, float, float, float, float]) -> dict[str, float]:
        """Pulsar's weighted max resource usage per broker (a fraction; > 1 when over 100%)."""
        return {b: d.max_resource_usage_with_weight(*weights) for b, d in sorted(self.parsed.items())}

    def max_weighted_usage(self, weights: tuple[float, float, float, float, float]) -> float:
        return max(self.weighted_usage(weights).values(), default=0.0)

    def add_topic_fetch(self, outcome: Mapping[str, tuple], *, max_missing_brokers: float) -> int:
        """Take in what :class:`TopicStatsFetcher` reported per broker (Spark tasks); returns the topic rows written.

        The first broker (in broker-list order) whose answer was invalid raises its error, as the
        driver-side read would have; brokers whose topic stats did not answer are recorded in
        ``without_topic_stats`` with a warning for the plan, and fail the run above ``max_missing_brokers``.
        """
        order = {b: i for i, b in enumerate(self.brokers)}
        first_missing: Exception | None = None
        rows = 0
        for broker in sorted(outcome, key=lambda b: order.get(b, len(order))):
            kind, *rest = outcome[broker]
            if kind == "ok":
                rows += rest[0]
                continue
            exc = rebuild_exception(*rest)
            if kind == "error":
                exc.add_note(f"(broker-stats/topics of {broker}, read in a Spark task)")
                raise exc
            self.without_topic_stats[broker] = _describe(exc)
            first_missing = first_missing or exc
        check_missing_brokers(
            len(self.brokers), {**self.unanswered, **self.without_topic_stats}, max_missing_brokers, first_missing
        )
        if self.check is not None:
            self.check.warnings.extend(
                SnapshotWarning(
                    "broker_without_topic_stats",
                    f"broker {b} did not answer for its topic stats ({err}): its bundles have no topic rows "
                    "in this run (their load samples come from its load report); a split of one of them "
                    "has no topic rates to work with",
                    broker=b,
                    field="broker-stats/topics",
                )
                for b, err in sorted(self.without_topic_stats.items())
            )
        return rows


def collect_snapshot(
    client,
    *,
    namespaces: Iterable[str] | None = None,
    cluster: str | None = None,
    topic_stats: bool = True,
    max_missing_brokers: float = 0.0,
    placement_policies: bool = True,
) -> Snapshot:
    """Read brokers, namespaces, bundle boundaries, load reports, topic stats and ownership.

    ``topic_stats=False`` leaves topic rows to :class:`TopicStatsFetcher` (Spark tasks, ``collect_load``)
    or skips them (the re-read after execution). ``placement_policies=False`` skips the placement
    constraints (the re-read after execution measures load only; the snapshot then has none). A broker that does not answer
    (``PulsarAdminError.retryable``: connect error, timeout, 5xx after the client's retries) is left
    out with a ``broker_unanswered`` warning, unless more than ``max_missing_brokers`` (a fraction) of
    the brokers are missing: then the first such error is raised. Any other failure, and any answer
    the validation layer rejects, raises before anything is written.
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

    placement_raw, policies = (
        read_placement_policies(client, cluster, ns_boundaries)
        if placement_policies
        else (no_placement_policies(), NO_POLICIES)
    )

    reports: dict[str, dict[str, Any]] = {}
    parsed_reports: dict[str, LocalBrokerData] = {}
    topic_rows: list[dict[str, Any]] = []
    stats_rows: list[dict[str, Any]] = []
    claims: dict[str, list[str]] = {}
    unanswered: dict[str, str] = {}
    first_error: PulsarAdminError | None = None
    for broker in brokers:
        try:
            report = client.load_report(broker)
            stats = client.topic_stats(broker) if topic_stats else None
            owned = client.owned_namespaces(cluster, broker)
        except PulsarAdminError as exc:
            if not exc.retryable:
                raise
            unanswered[broker] = _describe(exc)
            first_error = first_error or exc
            continue
        try:
            parsed = local_broker_data_from_json(report, f"load-report[{broker}]")
        except ScenarioError as exc:
            raise MalformedResponseError(
                f"load report of broker {broker} is not a LocalBrokerData: {exc}",
                url=f"{broker}/admin/v2/broker-stats/load-report",
            ) from exc
        reports[broker] = report
        parsed_reports[broker] = parsed
        stats_rows.extend(_bundle_stats_rows(broker, parsed, ns_boundaries))
        if stats is not None:
            topic_rows.extend(topic_rows_from_stats(broker, stats, ns_boundaries))
        if not isinstance(owned, Mapping):
            raise MalformedResponseError(f"ownedNamespaces of {broker} is not a JSON object", url=broker)
        claims[broker] = [b for b in owned if b.rpartition("/")[0] in ns_boundaries]
    check_missing_brokers(len(brokers), unanswered, max_missing_brokers, first_error)
    # Everything has been read and nothing written: one validation layer (core.snapshot) rejects a
    # snapshot that contradicts itself, and turns what Pulsar can show mid-transition (a bundle
    # claimed twice, split between two reads) into warnings for the plan with the bundle left out.
    check = validate_snapshot(
        brokers=brokers,
        boundaries=ns_boundaries,
        claims=claims,
        reports=parsed_reports,
        raw_reports=reports,
        leader=leader,
        cluster=cluster,
    )
    check.warnings.extend(
        SnapshotWarning(
            "broker_unanswered",
            f"broker {b} did not answer ({err}): its load report and owned bundles are missing from this "
            "run, so the plan neither moves its bundles nor places any on it",
            broker=b,
            field="broker-stats/load-report",
        )
        for b, err in sorted(unanswered.items())
    )
    shedding = pulsar_shedding_warning(client)
    if shedding is not None:
        check.warnings.append(shedding)
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
        unanswered=unanswered,
        placement_policies=placement_raw,
        policies=policies,
    )


def read_placement_policies(
    client, cluster: str, namespaces: Iterable[str]
) -> tuple[dict[str, Any], PlacementPolicies]:
    """The cluster's placement constraints, read and validated before anything is written.

    ``GET .../clusters/{cluster}/namespaceIsolationPolicies``, ``GET .../clusters/{cluster}/failureDomains``
    and one ``GET .../namespaces/{tenant}/{namespace}/antiAffinity`` per namespace of the run, returned
    as the ``decide`` contract's three fields (the answers unchanged; namespaces without a group left
    out) and parsed by the decision core. An answer the core rejects - an invalid regex, a policy with no
    namespace or no primary, an unknown ``auto_failover_policy``, a negative ``min_limit`` (Pulsar accepts
    it and never fails over to secondaries; most likely a typo, refused rather than planned around) -
    raises :class:`MalformedResponseError` naming the policy or domain.
    """
    base = client.base_url
    isolation_url = f"{base}/admin/v2/clusters/{cluster}/namespaceIsolationPolicies"
    isolation = client.namespace_isolation_policies(cluster)
    parsed: list[NamespaceIsolationPolicy] = []
    for name, data in isolation.items():
        path = field_path("namespaceIsolationPolicies", name)
        try:
            policy = namespace_isolation_policy_from_json(name, data, path)
        except ScenarioError as exc:
            raise MalformedResponseError(
                f"namespace isolation policy {name!r} of cluster {cluster} is invalid: {exc}", url=isolation_url
            ) from exc
        parsed.append(policy)
    domains_raw = client.failure_domains(cluster)
    domains: dict[str, tuple[str, ...]] = {}
    for name, data in domains_raw.items():
        try:
            domains.update(parse_failure_domains({name: data}, "failureDomains"))
        except ScenarioError as exc:
            raise MalformedResponseError(
                f"failure domain {name!r} of cluster {cluster} is invalid: {exc}",
                url=f"{base}/admin/v2/clusters/{cluster}/failureDomains",
            ) from exc
    groups_raw: dict[str, str] = {}
    for ns in sorted(namespaces):
        group = client.namespace_anti_affinity_group(ns)
        if group is not None:
            groups_raw[ns] = group
    groups = parse_anti_affinity_groups(groups_raw, "antiAffinityGroups")
    raw = {
        "namespaceIsolationPolicies": dict(isolation),
        "failureDomains": dict(domains_raw),
        "antiAffinityGroups": groups,
    }
    return raw, PlacementPolicies(tuple(parsed), domains, groups)


def shedding_enabled(value: str | None) -> bool:
    """Pulsar's ``loadBalancerSheddingEnabled`` from its dynamic config overrides (absent: broker.conf,
    whose default is true)."""
    return value is None or value.strip().lower() == "true"


def pulsar_shedding_warning(client) -> SnapshotWarning | None:
    """A warning for the plan when Pulsar's own shedder is on (the two balancers would fight; the
    executor refuses unless ``allow_pulsar_shedding``), or when its dynamic config cannot be read."""
    try:
        value = client.dynamic_config().get("loadBalancerSheddingEnabled")
    except PulsarAdminError as exc:
        return SnapshotWarning(
            "pulsar_shedding_unknown",
            f"could not read Pulsar's dynamic configuration to check "
            f"loadBalancerSheddingEnabled ({exc}); execution checks it again",
            field="loadBalancerSheddingEnabled",
        )
    if not shedding_enabled(value):
        return None
    source = "set to true" if value is not None else "not overridden, and Pulsar's default is true"
    return SnapshotWarning(
        "pulsar_shedding_enabled",
        f"Pulsar's own load shedding is on (loadBalancerSheddingEnabled "
        f"{source}): its leader would keep moving bundles too, so execution is refused unless the "
        "run allows it (allow_pulsar_shedding); turn it off with pulsar-admin brokers "
        "update-dynamic-config --config loadBalancerSheddingEnabled --value false",
        field="loadBalancerSheddingEnabled",
    )


def _describe(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"


def check_missing_brokers(
    total: int, missing: Mapping[str, str], max_fraction: float, error: Exception | None = None
) -> None:
    """Raise when more than ``max_fraction`` of ``total`` brokers are missing (``error``, or a summary)."""
    if len(missing) <= max_fraction * total:
        return
    note = (
        f"{len(missing)} of {total} brokers did not answer ({', '.join(sorted(missing)[:5])}"
        f"{', ...' if len(missing) > 5 else ''}); at most max_missing_brokers={max_fraction:g} of them may be missing"
    )
    if error is None:
        error = PulsarAdminError(f"{note}: {next(iter(sorted(missing.items())))[1]}")
    else:
        error.add_note(note)
    raise error


def exception_state(exc: Exception) -> tuple[type[Exception], tuple[Any, ...], dict[str, Any]]:
    """What a Spark task sends back of an exception (class, args, attributes): rebuilt as it was raised."""
    return type(exc), exc.args, dict(vars(exc))


def rebuild_exception(cls: type[Exception], args: tuple[Any, ...], state: Mapping[str, Any]) -> Exception:
    exc = cls.__new__(cls)
    exc.args = args
    vars(exc).update(state)
    return exc


TOPIC_STATS_CONCURRENCY = 16
"""At most this many brokers' topic stats are fetched at once (Spark partitions of the broker list)."""


@dataclass(frozen=True)
class TopicStatsFetcher:
    """Runs inside Spark tasks: ``GET /admin/v2/broker-stats/topics`` of each broker, validated
    (:func:`topic_rows_from_stats`, the same rules as the driver) and flattened to topic rows.

    Each task builds its own admin client from ``client`` (``PulsarAdminClient.spec()``: URL, TLS,
    timeout, retries and the credential, which travels inside the serialized task like the data --
    never on argv, in a Spark property or in a log line, and not in ``repr``). Per broker it reports
    to ``outcome`` (a Spark accumulator: broker -> ``("ok", rows)``, ``("missing", *exception)`` for
    a broker that did not answer after the client's retries, or ``("error", *exception)`` for an
    invalid answer, after which the task stops); the driver turns that into data quality or the error
    (:meth:`Snapshot.add_topic_fetch`).
    """

    client: Any  # pulsar_admin.client.ClientSpec
    namespaces: tuple[str, ...]

    @classmethod
    def for_client(cls, client, namespaces: Iterable[str]) -> TopicStatsFetcher:
        return cls(client=client.spec(), namespaces=tuple(sorted(namespaces)))

    def __call__(self, brokers: Iterable[str], outcome) -> Iterator[tuple]:
        wanted = dict.fromkeys(self.namespaces)
        with self.client.build() as client:
            for broker in brokers:
                try:
                    rows = topic_rows_from_stats(broker, client.topic_stats(broker), wanted)
                except RebalanceError as exc:
                    retryable = isinstance(exc, PulsarAdminError) and exc.retryable
                    outcome.add({broker: ("missing" if retryable else "error", *exception_state(exc))})
                    if retryable:
                        continue
                    return
                outcome.add({broker: ("ok", len(rows))})
                for row in rows:
                    yield tuple(row[c] for c in TOPIC_COLUMNS)


def _bundle_stats_rows(broker: str, data: LocalBrokerData, wanted_ns: Mapping[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for bundle, st in data.last_stats.items():
        ns, _, rng = bundle.rpartition("/")  # a malformed name is rejected by validate_snapshot
        if ns not in wanted_ns:
            continue
        rows.append(
            {
                "broker": broker,
                "bundle": bundle,
                "namespace": ns,
                "range": rng,
                "msg_rate_in": float(st.msg_rate_in),
                "msg_rate_out": float(st.msg_rate_out),
                "msg_throughput_in": float(st.msg_throughput_in),
                "msg_throughput_out": float(st.msg_throughput_out),
                "consumer_count": int(st.consumer_count),
                "producer_count": int(st.producer_count),
                "topics": int(st.topics),
                "cache_size": int(st.cache_size),
            }
        )
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
                    rows.append(
                        {
                            "broker": broker,
                            "namespace": ns,
                            "reported_bundle": rng,
                            "domain": domain,
                            "topic": topic,
                            "msg_rate_in": st.msgRateIn,
                            "msg_rate_out": st.msgRateOut,
                            "msg_throughput_in": st.msgThroughputIn,
                            "msg_throughput_out": st.msgThroughputOut,
                            "producer_count": st.producers(),
                            "consumer_count": sum(sub.consumer_total() for sub in st.subscriptions.values()),
                            "subscription_count": len(st.subscriptions),
                        }
                    )
    return rows


def _mapping(value: Any, broker: str, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise MalformedResponseError(f"broker-stats/topics of {broker}: {where} is not a JSON object", url=broker)
    return value


def record_snapshot(
    session,
    snapshot: Snapshot,
    *,
    run_id: str,
    params: Mapping[str, Any],
    work_dir: str,
    weights: tuple[float, float, float, float, float],
) -> int:
    """Write the snapshot (run, brokers, raw reports, live ranges, ownership) in the caller's transaction."""
    from pulsar_rebalance.store import repository as repo

    cluster_id = repo.get_or_create_cluster(session, name=snapshot.cluster, admin_url=snapshot.admin_url)
    repo.start_run(session, run_id=run_id, cluster_id=cluster_id, params=dict(params), work_dir=work_dir)
    repo.upsert_brokers(session, cluster_id=cluster_id, run_id=run_id, brokers=snapshot.brokers)
    repo.record_broker_load(
        session,
        run_id=run_id,
        rows=[
            broker_load_row(b, r, weights=weights, parsed=snapshot.parsed.get(b))
            for b, r in snapshot.load_reports.items()
        ],
    )
    for ns, bounds in sorted(snapshot.namespaces.items()):
        repo.sync_bundle_ranges(session, cluster_id=cluster_id, run_id=run_id, namespace=ns, boundaries=bounds)
    repo.sync_ownership(
        session,
        cluster_id=cluster_id,
        run_id=run_id,
        ownership=snapshot.ownership,
        cause="observed by collect_load",
    )
    repo.record_placement_policies(session, run_id=run_id, cluster_id=cluster_id, policies=snapshot.placement_policies)
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
    d = parsed or local_broker_data_from_json(report, f"load-report[{broker}]")
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
