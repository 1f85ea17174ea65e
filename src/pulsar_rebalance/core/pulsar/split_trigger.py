"""Which bundles should be split: Pulsar's two split *triggers* (not the boundary algorithms).

* Modular load manager: ``BundleSplitterTask.findBundlesToSplit`` (newest seen, commit af0bc205)
  followed by ``ModularLoadManagerImpl.checkNamespaceBundleSplit``'s ``canSplitBundle`` filter ->
  :func:`modular_bundles_to_split`.
* Extensible load manager: ``DefaultNamespaceBundleSplitStrategyImpl.findBundlesToSplit`` ->
  :func:`extensible_bundles_to_split`. Its hit-count map is Pulsar's hidden per-strategy state; here it
  is explicit input and output (the caller stores it between cycles).

Both are gated on ``loadBalancerAutoBundleSplitEnabled`` (Pulsar's callers return early when it is
false; for the extensible trigger the hit counts are then returned unchanged, since Pulsar does not
run the strategy at all).

Every candidate carries ``reason`` (the threshold(s) crossed, with the numbers) and ``metric`` (the
first crossed, in Pulsar's precedence Topics > Sessions > MsgRate > Bandwidth). Candidates come out
in discovery order (broker order, then each broker's ``lastStats`` order); Pulsar collects them in a
``HashSet`` whose order is arbitrary, so only the set - not the order - is Pulsar's.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pulsar_rebalance.core.pulsar.bundles import BundleRange, split_full_name
from pulsar_rebalance.core.pulsar.config import MIBI
from pulsar_rebalance.errors import ScenarioError

if TYPE_CHECKING:
    from pulsar_rebalance.core.pulsar.config import LoadBalancerConfig
    from pulsar_rebalance.core.pulsar.load import BundleData, LocalBrokerData, NamespaceBundleStats

logger = logging.getLogger(__name__)

SplitMetric = Literal["topics", "sessions", "msgRate", "bandwidth"]


@dataclass(frozen=True, slots=True)
class SplitCandidate:
    """A bundle chosen for splitting: full bundle name, owning broker, why, and the first metric crossed."""

    bundle: str
    broker: str
    reason: str
    metric: SplitMetric

    def to_json(self) -> dict[str, str]:
        return {"bundle": self.bundle, "broker": self.broker, "reason": self.reason, "metric": self.metric}


def _java_int_mul(a: int, b: int) -> int:
    """Java ``int * int``: the product wraps to 32-bit two's complement (before any widening to long).

    Both split triggers compute ``long maxBundleBandwidth = conf.getLoadBalancerNamespaceBundleMaxBandwidthMbytes()
    * LoadManagerShared.MIBI`` where both operands are ``int``, so the limit wraps for 2048 MiB and
    above (2048 -> -2^31: every bundle "exceeds" it; 4096 -> 0). Reproduced on purpose.
    """
    r = (a * b) & 0xFFFFFFFF
    return r - (1 << 32) if r >= (1 << 31) else r


def _crossed(
    *,
    topics: int,
    sessions: int,
    msg_rate: float,
    throughput: float,
    config: LoadBalancerConfig,
    rate_label: str,
) -> list[tuple[SplitMetric, str]]:
    """The thresholds crossed (strict ``>``), in Pulsar's precedence order."""
    max_topics = config.load_balancer_namespace_bundle_max_topics
    max_sessions = config.load_balancer_namespace_bundle_max_sessions
    max_rate = config.load_balancer_namespace_bundle_max_msg_rate
    max_mbytes = config.load_balancer_namespace_bundle_max_bandwidth_mbytes
    max_bw = _java_int_mul(max_mbytes, MIBI)
    out: list[tuple[SplitMetric, str]] = []
    if topics > max_topics:
        out.append(("topics", f"topics {topics} > loadBalancerNamespaceBundleMaxTopics {max_topics}"))
    if max_sessions > 0 and sessions > max_sessions:
        out.append(
            ("sessions", f"producers+consumers {sessions} > loadBalancerNamespaceBundleMaxSessions {max_sessions}")
        )
    if msg_rate > max_rate:
        out.append(
            (
                "msgRate",
                f"{rate_label} msg rate {msg_rate:.15g} msg/s > loadBalancerNamespaceBundleMaxMsgRate {max_rate}",
            )
        )
    if throughput > max_bw:
        out.append(
            (
                "bandwidth",
                f"{rate_label} throughput {throughput / MIBI:.6g} MiB/s ({throughput:.15g} B/s) > "
                f"loadBalancerNamespaceBundleMaxBandwidthMbytes {max_mbytes} ({max_bw} B/s"
                + (", wrapped by Java int arithmetic)" if max_bw != max_mbytes * MIBI else ")"),
            )
        )
    return out


def _namespace_and_range(bundle: str, field: str) -> tuple[str, BundleRange]:
    try:
        namespace, range_name = split_full_name(bundle)
    except ValueError as exc:
        raise ScenarioError(field, str(exc)) from None
    return namespace, BundleRange.parse(range_name, field)


def _bundle_count(namespace_bundle_counts: Mapping[str, int], namespace: str, bundle: str) -> int:
    try:
        return namespace_bundle_counts[namespace]
    except KeyError:
        # Pulsar asks the metadata store (getBundleCount); we need it as input.
        raise ScenarioError(
            f"namespaceBundleCounts.{namespace}",
            f"bundle count of namespace {namespace!r} (of bundle {bundle}) is missing",
        ) from None


def modular_bundles_to_split(
    *,
    brokers: Mapping[str, LocalBrokerData],
    bundle_data: Mapping[str, BundleData],
    namespace_bundle_counts: Mapping[str, int],
    config: LoadBalancerConfig,
    path: str = "brokers",
) -> list[SplitCandidate]:
    """Bundles the modular load manager's leader would split this cycle.

    For each broker, for each ``(bundle, stats)`` of its ``lastStats``:

    1. ``stats.topics < 2`` -> skip.
    2. Rates are the bundle's **long-term** averages from ``bundle_data`` (in+out; 0 when the bundle
       has no BundleData - "otherwise effectively ignore"); topics and sessions come from ``stats``.
    3. Candidate if ``topics > maxTopics`` or (``maxSessions > 0`` and ``sessions > maxSessions``) or
       ``rate > maxMsgRate`` or ``throughput > maxBandwidthMbytes * MiB`` (all strict).
    4. Accepted if ``bundleCount(ns) + acceptedThisCycle(ns) < loadBalancerNamespaceMaximumBundles``.
       The per-namespace counter increments on every acceptance - also when the same bundle is seen
       again under a second broker (Pulsar's quirk: the result is a map, the counter is not); the
       map keeps the **last** broker reporting the bundle (``bundleCache.put(bundle, broker)``).
    5. ``checkNamespaceBundleSplit`` then drops bundles with ``!canSplitBundle`` (range width <= 1).

    ``namespace_bundle_counts`` maps ``tenant/ns`` to its current bundle count (Pulsar's
    ``getBundleCount``); a namespace missing from it is a ``ScenarioError``. ``path`` prefixes error
    fields (e.g. ``brokers.b1.lastStats.<bundle>``).
    """
    if not config.load_balancer_auto_bundle_split_enabled:
        logger.info("auto bundle split disabled (loadBalancerAutoBundleSplitEnabled=false)")
        return []
    max_bundles = config.load_balancer_namespace_maximum_bundles
    accepted: dict[str, SplitCandidate] = {}
    per_namespace: dict[str, int] = {}
    ranges: dict[str, BundleRange] = {}
    for broker, local in brokers.items():
        for bundle, stats in local.last_stats.items():
            if stats.topics < 2:
                logger.debug("[%s] %d topic(s), less than 2: skip split", bundle, stats.topics)
                continue
            data = bundle_data.get(bundle)
            if data is not None:
                rate = data.long_term_data.total_msg_rate()
                throughput = data.long_term_data.total_msg_throughput()
            else:
                rate = throughput = 0.0
            crossed = _crossed(
                topics=stats.topics,
                sessions=stats.consumer_count + stats.producer_count,
                msg_rate=rate,
                throughput=throughput,
                config=config,
                rate_label="long-term",
            )
            if not crossed:
                continue
            field = f"{path}.{broker}.lastStats.{bundle}"
            namespace, bundle_range = _namespace_and_range(bundle, field)
            count = _bundle_count(namespace_bundle_counts, namespace, bundle)
            already = per_namespace.get(namespace, 0)
            if count + already >= max_bundles:
                logger.warning(
                    "Could not split namespace bundle %s because namespace %s has too many bundles: %d",
                    bundle,
                    namespace,
                    count,
                )
                continue
            per_namespace[namespace] = already + 1
            ranges[bundle] = bundle_range
            # bundleCache.put(bundle, broker): a bundle reported by two brokers keeps the last one
            reason = "; ".join(text for _, text in crossed) + (
                f" (namespace {namespace}: {count} bundles + {already} already chosen this cycle "
                f"< loadBalancerNamespaceMaximumBundles {max_bundles})"
            )
            accepted[bundle] = SplitCandidate(bundle, broker, reason, crossed[0][0])
            logger.info("[%s] split candidate on %s: %s", bundle, broker, reason)
    result: list[SplitCandidate] = []
    for bundle, candidate in accepted.items():
        if not ranges[bundle].can_split():
            logger.info("[%s] can't be split further (range width <= 1): skip", bundle)
            continue
        result.append(candidate)
    return result


def extensible_bundles_to_split(
    *,
    broker: str,
    bundle_stats: Mapping[str, NamespaceBundleStats],
    namespace_bundle_counts: Mapping[str, int],
    split_condition_hit_counts: Mapping[str, int],
    config: LoadBalancerConfig,
    path: str = "bundleStats",
) -> tuple[list[SplitCandidate], dict[str, int]]:
    """Bundles the extensible load manager's split scheduler on ``broker`` would split this cycle.

    Pulsar's ``DefaultNamespaceBundleSplitStrategyImpl`` over this broker's *current* bundle stats
    (no long-term averages):

    1. Hit counts of bundles no longer in ``bundle_stats`` are dropped.
    2. Per bundle: ``topics < 2`` -> skip; ``!canSplitBundle`` -> skip (Pulsar counts a failure).
    3. Reason, first match wins: Topics (``topics > maxTopics``), Sessions (``maxSessions > 0`` and
       ``sessions > maxSessions``), MsgRate (``in+out > maxMsgRate``), Bandwidth
       (``in+out bytes > maxMbytes * MiB``).
    4. A reason increments the bundle's hit count; no reason removes it.
    5. Count ``> loadBalancerNamespaceBundleSplitConditionHitCountThreshold`` (default 3: the 4th
       consecutive hit) -> accepted if ``bundleCount(ns) + acceptedThisCycle(ns) <
       loadBalancerNamespaceMaximumBundles``; the count is then reset (removed).
    6. Stop as soon as the number of decisions **equals**
       ``loadBalancerMaxNumberOfBundlesToSplitPerCycle`` (so 0 never stops: no cap); bundles after
       that point are not examined and keep their previous hit counts.

    Returns ``(candidates, new_hit_counts)``; the input mapping is not modified.
    """
    counts = dict(split_condition_hit_counts)
    if not config.load_balancer_auto_bundle_split_enabled:
        logger.info("auto bundle split disabled (loadBalancerAutoBundleSplitEnabled=false)")
        return [], counts
    for bundle in [b for b in counts if b not in bundle_stats]:
        del counts[bundle]
    threshold = config.load_balancer_namespace_bundle_split_condition_hit_count_threshold
    max_bundles = config.load_balancer_namespace_maximum_bundles
    max_split = config.load_balancer_max_number_of_bundles_to_split_per_cycle
    per_namespace: dict[str, int] = {}
    decisions: list[SplitCandidate] = []
    for bundle, stats in bundle_stats.items():
        if stats.topics < 2:
            logger.debug("[%s] %d topic(s), less than 2: skip split", bundle, stats.topics)
            continue
        field = f"{path}.{bundle}"
        namespace, bundle_range = _namespace_and_range(bundle, field)
        if not bundle_range.can_split():
            logger.info("[%s] can't be split further (range width <= 1): skip", bundle)
            continue
        crossed = _crossed(
            topics=stats.topics,
            sessions=stats.consumer_count + stats.producer_count,
            msg_rate=stats.msg_rate_in + stats.msg_rate_out,
            throughput=stats.msg_throughput_in + stats.msg_throughput_out,
            config=config,
            rate_label="current",
        )
        if crossed:
            counts[bundle] = counts.get(bundle, 0) + 1
        else:
            counts.pop(bundle, None)
        hits = counts.get(bundle, 0)
        if hits <= threshold:
            continue
        count = _bundle_count(namespace_bundle_counts, namespace, bundle)
        already = per_namespace.get(namespace, 0)
        if count + already >= max_bundles:
            logger.info(
                "Could not split namespace bundle %s because namespace %s has too many bundles: %d",
                bundle,
                namespace,
                count,
            )
            continue
        metric, text = crossed[0]
        reason = (
            f"{text} for {hits} consecutive cycles (> loadBalancerNamespaceBundleSplitConditionHitCountThreshold "
            f"{threshold}); namespace {namespace}: {count} bundles + {already} already chosen this cycle "
            f"< loadBalancerNamespaceMaximumBundles {max_bundles}"
        )
        decisions.append(SplitCandidate(bundle, broker, reason, metric))
        logger.info("[%s] split candidate on %s: %s", bundle, broker, reason)
        per_namespace[namespace] = already + 1
        del counts[bundle]
        if len(decisions) == max_split:
            logger.info("Too many bundles to split in this split cycle %d / %d. Stop.", len(decisions), max_split)
            break
    return decisions, counts
