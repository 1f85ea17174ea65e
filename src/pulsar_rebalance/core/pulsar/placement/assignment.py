"""``ModularLoadManagerImpl.selectBrokerForAssignment``: the pipeline around the placement strategy.

For a bundle to place (steps numbered as in ``pulsar-load-balancing.md`` §4):

1. Already preallocated this cycle -> that broker.
2. Its BundleData, or Pulsar's default (50 msg/s and 50000 B/s each way, 0 samples).
3. Candidates = ``LoadManagerShared.applyNamespacePolicies`` over the given brokers
   (:func:`core.pulsar.policies.apply_namespace_policies`: the namespace isolation policy's primaries, plus its
   secondaries when fewer than ``min_limit`` primaries; without a policy the shared brokers that enable
   persistent topics). None left -> no broker.
4. ``filterBrokersWithLargeTopicCount``: drop brokers whose topics (reported + preallocated) exceed
   ``loadBalancerBrokerMaxTopics``, unless that would drop them all.
5. ``filterAntiAffinityGroupOwnedBrokers``: for a namespace in an anti-affinity group, keep (with
   ``failureDomainsEnabled``, in the failure domains owning the fewest first) the brokers owning the
   fewest namespaces of the group (owned + preallocated bundles).
6. ``removeMostServicingBrokersForNamespace`` (when ``loadBalancerDistributeBundlesEvenlyEnabled``, or
   always for ``pulsar/system``):
   keep the brokers owning the fewest bundles of the bundle's namespace (owned + preallocated).
7. (``BrokerVersionFilter``: broker versions are not compared.) An empty set is restored to step 3
   (``applyNamespacePolicies`` again: the policies hold even then).
8. The placement strategy picks a broker (seeded pick among ties).
9. If the pick's ``getMaxResourceUsageWithWeight`` (4 resources: cpu, directMemory, bandwidthIn,
   bandwidthOut - no memory) is above the overload threshold, the strategy runs again on the
   step-3 candidates (``applyNamespacePolicies`` only: the isolation policy still holds, the
   anti-affinity and even-spread filters do not; AvgShedder then ignores its planned destination,
   PR #26246).
10. Lookup only (``selectBrokerForAssignment``): the bundle is preallocated to the pick, so later
   placements in the same cycle see it. ``doLoadShedding`` calls ``selectBroker`` (steps 2-9) and
   does not preallocate.

Preallocations live for one cycle here (Pulsar keeps them until the broker reports the bundle).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pulsar_rebalance.core.decision import Placement
from pulsar_rebalance.core.pulsar.load import BundleData, NamespaceBundleStats, TimeAverageBrokerData
from pulsar_rebalance.core.pulsar.placement.least_long_term_message_rate import LeastLongTermMessageRate
from pulsar_rebalance.core.pulsar.placement.least_resource_usage_with_weight import LeastResourceUsageWithWeight
from pulsar_rebalance.core.pulsar.policies import (
    NO_POLICIES,
    PlacementPolicies,
    anti_affinity_namespace_counts,
    apply_namespace_policies,
    filter_anti_affinity_group_owned_brokers,
)
from pulsar_rebalance.core.pulsar.shedders import avg_shedder
from pulsar_rebalance.core.pulsar.shedders.base import namespace_of, unweighted_usage, weighted_usage

SYSTEM_NAMESPACE = "pulsar/system"
"""``NamespaceName.SYSTEM_NAMESPACE``: its bundles are always spread evenly."""

if TYPE_CHECKING:
    from pulsar_rebalance.core.pulsar.config import LoadBalancerConfig
    from pulsar_rebalance.core.pulsar.load import LocalBrokerData
    from pulsar_rebalance.core.pulsar.state import StrategyState


@dataclass(slots=True)
class ModularPlacementContext:
    """The leader's placement view for one cycle (mutable: step 10 preallocates into it)."""

    brokers: Mapping[str, LocalBrokerData]
    bundle_data: Mapping[str, BundleData]
    time_average: Mapping[str, TimeAverageBrokerData]
    preallocated: dict[str, dict[str, BundleData]] = field(default_factory=dict)
    preallocated_owner: dict[str, str] = field(default_factory=dict)
    preallocated_rate: dict[str, float] = field(default_factory=dict)
    """broker -> sum of its preallocated bundles' long-term msgRateIn + msgRateOut (in preallocation order)."""
    preallocated_topics: dict[str, int] = field(default_factory=dict)
    policies: PlacementPolicies = NO_POLICIES
    """Namespace isolation policies, anti-affinity groups and failure domains (core.pulsar.policies)."""
    _ns_ranges: dict[str, dict[str, set[str]]] | None = None
    """namespace -> broker -> bundles of that namespace owned by or preallocated to the broker."""
    _usage: dict[tuple[bool, bool], dict[str, float]] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        brokers: Mapping[str, LocalBrokerData],
        bundle_data: Mapping[str, BundleData],
        time_average: Mapping[str, TimeAverageBrokerData] | None,
        policies: PlacementPolicies = NO_POLICIES,
    ) -> ModularPlacementContext:
        """``time_average`` defaults to Pulsar's ``TimeAverageBrokerData.reset`` over each broker's bundles."""
        ta: dict[str, TimeAverageBrokerData] = dict(time_average or {})
        if len(ta) < len(brokers):
            default_stats = NamespaceBundleStats.new_default()
            for broker, data in brokers.items():
                if broker not in ta:
                    ta[broker] = TimeAverageBrokerData.from_bundles(data.bundles, bundle_data, default_stats)
        return cls(brokers=brokers, bundle_data=bundle_data, time_average=ta, policies=policies)

    def _index(self) -> dict[str, dict[str, set[str]]]:
        if self._ns_ranges is None:
            ranges: dict[str, dict[str, set[str]]] = {}
            for b, data in self.brokers.items():
                for bundle in data.bundles:
                    ranges.setdefault(namespace_of(bundle), {}).setdefault(b, set()).add(bundle)
            self._ns_ranges = ranges
        return self._ns_ranges

    def namespace_count(self, broker: str, namespace: str) -> int:
        """Bundles of ``namespace`` owned by or preallocated to ``broker`` (``brokerToNamespaceToBundleRange``)."""
        return len(self._index().get(namespace, {}).get(broker, ()))

    def namespace_counts(self, namespace: str) -> dict[str, set[str]]:
        """broker -> its bundles of ``namespace`` (brokers without any are absent)."""
        return self._index().get(namespace, {})

    def persistent_enabled(self, broker: str) -> bool:
        """``brokerTopicLoadingPredicate.isEnablePersistentTopics``: the broker's report says so."""
        data = self.brokers.get(broker)
        return data is None or data.persistent_topics_enabled

    def policy_candidates(self, bundle: str, available: Sequence[str]) -> list[str]:
        """``applyNamespacePolicies(bundle, available)`` with the reports' persistent-topics flags."""
        return apply_namespace_policies(bundle, self.policies, available, self.persistent_enabled)

    def anti_affinity_counts(self, namespace: str) -> dict[str, int] | None:
        """``getAntiAffinityNamespaceOwnedBrokers`` over the owned and preallocated bundles."""
        return anti_affinity_namespace_counts(namespace, self.policies, self.namespace_counts)

    def usage(self, broker: str, config: LoadBalancerConfig, *, weighted: bool = True) -> float:
        """Cached max resource usage of a broker (weighted 5-argument form, or unweighted)."""
        cache = self._usage.setdefault((weighted, True), {})
        value = cache.get(broker)
        if value is None:
            data = self.brokers[broker]
            value = weighted_usage(data, config) if weighted else unweighted_usage(data)
            cache[broker] = value
        return value

    def usage4(self, broker: str, config: LoadBalancerConfig) -> float:
        """Cached ``getMaxResourceUsageWithWeight`` 4-resource form (no memory): the re-check's metric."""
        cache = self._usage.setdefault((True, False), {})
        value = cache.get(broker)
        if value is None:
            value = weighted_usage(self.brokers[broker], config, with_memory=False)
            cache[broker] = value
        return value

    def usages(self, config: LoadBalancerConfig, *, weighted: bool = True) -> dict[str, float]:
        """Every broker's cached usage (see :meth:`usage`)."""
        cache = self._usage.setdefault((weighted, True), {})
        if len(cache) < len(self.brokers):
            for broker in self.brokers:
                self.usage(broker, config, weighted=weighted)
        return cache

    def preallocate(self, bundle: str, broker: str, data: BundleData) -> None:
        self.preallocated.setdefault(broker, {})[bundle] = data
        self.preallocated_owner[bundle] = broker
        lt = data.long_term_data
        self.preallocated_rate[broker] = self.preallocated_rate.get(broker, 0.0) + (lt.msg_rate_in + lt.msg_rate_out)
        self.preallocated_topics[broker] = self.preallocated_topics.get(broker, 0) + data.topics
        self._index().setdefault(namespace_of(bundle), {}).setdefault(broker, set()).add(bundle)


_LLTMR = LeastLongTermMessageRate()
_LLTMR_UNWEIGHTED = LeastLongTermMessageRate(name="LeastLongTermMessageRateUnweighted", weighted=False)
_LRUWW = LeastResourceUsageWithWeight()


def _run_strategy(
    strategy: str,
    bundle: str,
    data: BundleData,
    candidates: Sequence[str],
    ctx: ModularPlacementContext,
    config: LoadBalancerConfig,
    state: StrategyState,
    rng: random.Random,
    *,
    retry: bool = False,
) -> tuple[Placement, StrategyState]:
    if strategy in ("LeastLongTermMessageRate", "LeastLongTermMessageRateUnweighted"):
        impl = _LLTMR if strategy == "LeastLongTermMessageRate" else _LLTMR_UNWEIGHTED
        return impl.select_broker(
            bundle=bundle,
            candidates=candidates,
            brokers=ctx.brokers,
            time_average=ctx.time_average,
            preallocated=ctx.preallocated,
            config=config,
            state=state,
            rng=rng,
            usage_of=ctx.usages(config, weighted=impl.weighted),
            preallocated_rate=ctx.preallocated_rate,
        )
    if strategy == "LeastResourceUsageWithWeight":
        return _LRUWW.select_broker(
            bundle=bundle, candidates=candidates, brokers=ctx.brokers, config=config, state=state, rng=rng
        )
    if strategy == "AvgShedder":
        return avg_shedder.select_broker(
            bundle=bundle, candidates=candidates, state=state, rng=rng, bypass_planned=retry
        )
    raise ValueError(f"unknown modular placement strategy {strategy!r}")


def select_broker(
    bundle: str,
    *,
    strategy: str,
    candidates: Sequence[str],
    ctx: ModularPlacementContext,
    config: LoadBalancerConfig,
    state: StrategyState,
    rng: random.Random,
) -> tuple[Placement, StrategyState]:
    """``ModularLoadManagerImpl.selectBroker`` (steps 2-9): no preallocation.

    ``doLoadShedding`` calls this for every bundle the shedder selected, over all available brokers
    (the source included); ``selectBrokerForAssignment`` (lookup) wraps it with steps 1 and 10.
    """
    data = ctx.bundle_data.get(bundle) or BundleData.new_default()
    base = ctx.policy_candidates(bundle, candidates)
    if not base:
        why = "no candidate brokers"
        if candidates:
            why += f": none of the {len(candidates)} available satisfies {namespace_of(bundle)}'s namespace policies"
        return Placement(bundle, None, (), why), state
    cands = base
    notes: list[str] = []
    if len(base) < len(candidates):
        notes.append(f"{len(base)} of {len(candidates)} broker(s) allowed by the namespace policies")
    max_topics = config.load_balancer_broker_max_topics
    brokers = ctx.brokers
    pre_topics = ctx.preallocated_topics
    small = [b for b in cands if brokers[b].num_topics + pre_topics.get(b, 0) <= max_topics]
    if small and len(small) < len(cands):
        notes.append(f"{len(cands) - len(small)} broker(s) above {max_topics} topics dropped")
        cands = small
    if ctx.policies.anti_affinity_groups:
        counts = ctx.anti_affinity_counts(namespace_of(bundle))
        if counts is not None:
            kept = filter_anti_affinity_group_owned_brokers(
                cands, counts, ctx.policies.broker_to_domain, config.failure_domains_enabled
            )
            if len(kept) < len(cands):
                notes.append(
                    f"kept {len(kept)} broker(s) owning the fewest namespaces of the anti-affinity group "
                    f"{ctx.policies.anti_affinity_group(namespace_of(bundle))!r}"
                )
            cands = kept
    if config.load_balancer_distribute_bundles_evenly_enabled or namespace_of(bundle) == SYSTEM_NAMESPACE:
        ns = namespace_of(bundle)
        owned = ctx.namespace_counts(ns)
        least = 2**31 - 1
        for b in cands:
            n = len(owned[b]) if b in owned else 0
            if n < least:
                least = n
                if n == 0:
                    break
        even = (
            [b for b in cands if b not in owned] if least == 0 else [b for b in cands if len(owned.get(b, ())) <= least]
        )
        if len(even) < len(cands):
            notes.append(f"kept {len(even)} broker(s) owning the fewest ({least}) bundles of {ns}")
        cands = even
    if not cands:
        cands = base
    placement, state = _run_strategy(strategy, bundle, data, cands, ctx, config, state, rng)
    if placement.broker is None:
        return placement, state
    overload = config.load_balancer_broker_overloaded_threshold_percentage / 100.0
    # getMaxResourceUsageWithWeight(cpu, directMemory, bandwidthIn, bandwidthOut): the 4-resource form
    usage = ctx.usage4(placement.broker, config)
    if usage > overload:
        notes.append(f"{placement.broker} overloaded ({usage:.4f}): re-run on all candidates")
        retry, state = _run_strategy(strategy, bundle, data, base, ctx, config, state, rng, retry=True)
        if retry.broker is not None:
            placement = retry
    if notes:
        placement = Placement(
            placement.bundle, placement.broker, placement.tied, placement.reason + "; " + "; ".join(notes)
        )
    return placement, state


def select_broker_for_assignment(
    bundle: str,
    *,
    strategy: str,
    candidates: Sequence[str],
    ctx: ModularPlacementContext,
    config: LoadBalancerConfig,
    state: StrategyState,
    rng: random.Random,
) -> tuple[Placement, StrategyState]:
    """``selectBrokerForAssignment`` (lookup): a preallocated bundle keeps its broker; else
    :func:`select_broker`, and the pick is preallocated so later lookups in the cycle see it."""
    owner = ctx.preallocated_owner.get(bundle)
    if owner is not None:
        return Placement(bundle, owner, (owner,), "already preallocated this cycle"), state
    placement, state = select_broker(
        bundle, strategy=strategy, candidates=candidates, ctx=ctx, config=config, state=state, rng=rng
    )
    if placement.broker is not None:
        ctx.preallocate(bundle, placement.broker, ctx.bundle_data.get(bundle) or BundleData.new_default())
    return placement, state
