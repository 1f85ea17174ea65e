"""One leader cycle, typed: the cycle analyzer that the ``decide`` contract and the pipeline both call.

:func:`run_cycle` takes a validated :class:`CycleInput` (one cycle of load data), the strategy state
carried between cycles, the :class:`CycleSettings` (strategies, config) and the seeded random stream,
and returns a :class:`CycleResult`: the decision at the strategy level (unloads, splits, placements,
stats), what the load manager executes and drops, and the state after the cycle. The order inside a
cycle is Pulsar's (docs/core-decide.md, "Order inside a cycle"): age the recently-unloaded maps;
``updateAll`` (bundle data, then the split trigger); ``doLoadShedding`` (strategy, then each unload's
destination); then the ``place`` lookups. ``core.contract.decide`` only parses the JSON, calls this,
and renders :meth:`CycleResult.to_json`.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pulsar_rebalance.core.contract.json_input import field_path
from pulsar_rebalance.core.contract.load_json import broker_load_data_from_json, bundle_data_from_json
from pulsar_rebalance.core.decision import (
    Decision,
    DroppedUnload,
    DropReason,
    Placement,
    Reason,
    SplitDecision,
    Unload,
    skip,
)
from pulsar_rebalance.core.planner import PlannerInput
from pulsar_rebalance.core.pulsar.bundles import BundleRange, format_boundary, split_full_name
from pulsar_rebalance.core.pulsar.config import LoadBalancerConfig
from pulsar_rebalance.core.pulsar.load import (
    BrokerLoadData,
    BundleData,
    LocalBrokerData,
    NamespaceBundleStats,
    SystemResourceUsage,
    TimeAverageBrokerData,
)
from pulsar_rebalance.core.pulsar.placement import EXTENSIBLE_PLACEMENTS
from pulsar_rebalance.core.pulsar.placement.assignment import (
    ModularPlacementContext,
    select_broker,
    select_broker_for_assignment,
)
from pulsar_rebalance.core.pulsar.policies import (
    NO_POLICIES,
    PlacementPolicies,
    extensible_filter,
    should_anti_affinity_namespace_unload,
    should_namespace_policies_unload,
)
from pulsar_rebalance.core.pulsar.shedders import BASE_NAME, EXTENSIBLE_SHEDDERS, SHEDDERS
from pulsar_rebalance.core.pulsar.shedders.base import ModularInput, namespace_of
from pulsar_rebalance.core.pulsar.shedders.transfer_shedder import ExtensibleInput, top_k_bundles
from pulsar_rebalance.core.pulsar.split_algorithms import TopicRates, get_split_boundaries
from pulsar_rebalance.core.pulsar.split_trigger import extensible_bundles_to_split, modular_bundles_to_split
from pulsar_rebalance.core.pulsar.state import StrategyState
from pulsar_rebalance.core.strategies import plans_splits


@dataclass(frozen=True, slots=True)
class CycleInput:
    """One validated cycle of input (``core.contract.decide`` parses it from the JSON ``cycles[i]``)."""

    path: str
    brokers: dict[str, LocalBrokerData] | None
    bundle_data: dict[str, BundleData]
    bundle_data_given: bool
    time_average: dict[str, TimeAverageBrokerData] | None
    broker_load_data: dict[str, BrokerLoadData] | None
    top_bundles: dict[str, list[tuple[str, NamespaceBundleStats]]] | None
    recently_unloaded_bundles: dict[str, int]
    recently_unloaded_brokers: dict[str, int]
    now_ms: int | None
    place: list[str]
    namespace_bundle_counts: dict[str, int] | None
    available_brokers: list[str] | None
    bundle_topics: dict[str, dict[str, TopicRates]] | None = None
    """GlobalPlanner only: per bundle, its topics' rates (lets a split isolate a hot topic)."""
    policies: PlacementPolicies = NO_POLICIES
    """Namespace isolation policies, anti-affinity groups, failure domains (core.pulsar.policies)."""


@dataclass(frozen=True, slots=True)
class CycleSettings:
    """What stays the same across cycles: the strategies (registered names, core.strategies) and the config."""

    shedding: str
    placement: str
    config: LoadBalancerConfig
    assign_destinations: bool = False

    @property
    def extensible(self) -> bool:
        return self.shedding in EXTENSIBLE_SHEDDERS


@dataclass(frozen=True, slots=True)
class CycleResult:
    """One cycle's outcome: ``decision`` at the strategy level (label/reason of the unload decision, the
    unloads as selected - with executed destinations when ``assign_destinations`` -, splits, placements,
    stats), what the load manager ``executed`` and ``dropped``, and the ``state`` after the cycle."""

    decision: Decision
    executed: tuple[Unload, ...]
    dropped: tuple[DroppedUnload, ...]
    state: StrategyState

    def to_json(self) -> dict[str, Any]:
        """The ``decide`` output of one cycle (``cycles[i]``)."""
        out = self.decision.to_json()
        out["executed"] = {
            "unloads": [u.to_json() for u in self.executed],
            "dropped": [d.to_json() for d in self.dropped],
        }
        return out


def seeded_random(seed: int, state: StrategyState) -> random.Random:
    """The seeded stream of random tie-breaks, continued where the state's last call stopped."""
    rng = random.Random(seed)
    if state.random_state is not None:
        rng.setstate((3, state.random_state, None))
    return rng


def with_random_position(state: StrategyState, rng: random.Random) -> StrategyState:
    """The state to hand to the next call: it remembers the position of the random stream."""
    return state.evolve(random_state=rng.getstate()[1])


def _now(cycle: CycleInput) -> tuple[int | None, str]:
    if cycle.now_ms is not None:
        return cycle.now_ms, "input"
    stamps = [d.last_update for d in (cycle.brokers or {}).values() if d.last_update > 0]
    if stamps:
        return max(stamps), "derived: latest brokers.*.lastUpdate"
    return None, "unknown (no nowMs and no lastUpdate): recently-unloaded entries are not aged or recorded"


def _merge_recent(base: Mapping[str, int], extra: Mapping[str, int]) -> dict[str, int]:
    merged = dict(base)
    for key, ts in extra.items():
        if ts > merged.get(key, -1):
            merged[key] = ts
    return merged


def _derive_extensible(
    cycle: CycleInput, config: LoadBalancerConfig, state: StrategyState
) -> tuple[dict[str, BrokerLoadData], dict[str, list[tuple[str, NamespaceBundleStats]]], StrategyState]:
    """Extension 4: the extensible reporters' output computed from modular load reports.

    ``BrokerLoadData.update`` with the report's resources and rates (EMA continued from the state,
    updatedAt = the report's lastUpdate or nowMs), and ``TopKBundles`` over ``lastStats`` with
    ``loadBalancerMaxNumberOfBundlesInBundleLoadReport``.
    """
    assert cycle.brokers is not None and cycle.now_ms is not None
    load: dict[str, BrokerLoadData] = {}
    top: dict[str, list[tuple[str, NamespaceBundleStats]]] = {}
    previous = state.transfer_broker_load_data
    saved: dict[str, Mapping[str, Any]] = {}  # brokers gone lose their BrokerLoadData (and its EMAs)
    k = config.load_balancer_max_number_of_bundles_in_bundle_load_report
    policies = cycle.policies
    skip_with_policies = (
        policies.has_policies
        if not policies.empty and not config.load_balancer_shedding_bundles_with_policies_enabled
        else None
    )
    for broker, data in cycle.brokers.items():
        prev = previous.get(broker)
        bld = (
            broker_load_data_from_json(prev, f"state.transferShedder.brokerLoadData.{broker}")
            if prev
            else BrokerLoadData()
        )
        usage = SystemResourceUsage(data.cpu, data.memory, data.direct_memory, data.bandwidth_in, data.bandwidth_out)
        bld.update(
            usage,
            data.msg_throughput_in,
            data.msg_throughput_out,
            data.msg_rate_in,
            data.msg_rate_out,
            data.num_bundles,
            data.num_topics,
            config,
            now_ms=data.last_update if data.last_update > 0 else cycle.now_ms,
        )
        load[broker] = bld
        saved[broker] = bld.to_json()
        top[broker] = top_k_bundles(data.last_stats, k, skip_with_policies)
    return load, top, state.evolve(transfer_broker_load_data=saved)


def _namespace_counts(cycle: CycleInput, top: Mapping[str, Sequence[tuple[str, Any]]] | None) -> dict[str, int]:
    """Distinct bundles per namespace present anywhere in the cycle (when not given)."""
    seen: set[str] = set(cycle.bundle_data)
    for data in (cycle.brokers or {}).values():
        seen.update(data.bundles)
        seen.update(data.last_stats)
    for entries in (top or {}).values():
        seen.update(b for b, _ in entries)
    counts: dict[str, int] = {}
    for bundle in seen:
        ns = namespace_of(bundle)
        counts[ns] = counts.get(ns, 0) + 1
    return counts


def _leader_bundle_data(cycle: CycleInput, state: StrategyState) -> dict[str, BundleData]:
    """``updateBundleData`` when the caller gives no ``bundleData``: the leader's map from the state,
    each broker's ``lastStats`` sample added (unknown bundles start from Pulsar's defaults), and
    bundles no broker reports any more removed."""
    known = state.bundle_data
    out: dict[str, BundleData] = {}
    for data in (cycle.brokers or {}).values():
        for bundle, stats in data.last_stats.items():
            bd = out.get(bundle)
            if bd is None:
                prev = known.get(bundle)
                bd = bundle_data_from_json(prev, f"state.bundleData.{bundle}") if prev else BundleData.new_default()
                out[bundle] = bd
            bd.update(stats)
    return out


def _split_decision(candidate: Any, config: LoadBalancerConfig) -> SplitDecision:
    """A split trigger's candidate with the boundaries/children the default algorithm gives on its range."""
    namespace, range_name = split_full_name(candidate.bundle)
    algorithm = config.default_namespace_bundle_split_algorithm
    boundaries: list[str] | None = None
    children: list[str] | None = None
    note = ""
    if algorithm == "range_equally_divide":
        rng_ = BundleRange.parse(range_name, "bundle")
        cut = get_split_boundaries(algorithm, rng_, config=config)
        if cut:
            points = [rng_.lower, *cut, rng_.upper]
            boundaries = [format_boundary(x) for x in cut]
            children = [
                f"{namespace}/{format_boundary(lo)}_{format_boundary(hi)}" for lo, hi in zip(points, points[1:])
            ]
    else:
        note = f"{algorithm} needs the bundle's topics: boundaries are computed at execution (pulsar-rebalance split)"
    return SplitDecision(
        candidate.bundle,
        candidate.broker,
        candidate.reason,
        algorithm,
        boundaries,
        children,
        config.load_balancer_auto_unload_split_bundles_enabled,
        note or None,
    )


def _executed_unloads(
    settings: CycleSettings,
    decision: Decision,
    available: Sequence[str],
    modular_ctx: Any,
    state: StrategyState,
    rng: random.Random,
) -> tuple[list[Unload], list[DroppedUnload], StrategyState]:
    """``ModularLoadManagerImpl.doLoadShedding`` after ``findBundlesForUnloading``.

    For each selected (broker, bundle), brokers in order of first selection: an excluded namespace
    is skipped; so is a bundle that ``shouldNamespacePoliciesUnload`` (no broker but the owner satisfies
    the isolation policy) or ``shouldAntiAffinityNamespaceUnload`` (every candidate owns as many
    namespaces of its anti-affinity group as the owner) refuses; ``selectBroker(bundle)`` runs over all available brokers, the source included, with
    no preallocation; no broker -> dropped; the source itself -> dropped; else the bundle is
    unloaded to that destination.
    """
    config = settings.config
    excluded = frozenset(config.load_balancer_shedding_excluded_namespaces)
    ctx: ModularPlacementContext = modular_ctx()
    avail = list(available)
    by_broker: dict[str, list[Unload]] = {}
    for u in decision.unloads:
        by_broker.setdefault(u.broker, []).append(u)
    executed: list[Unload] = []
    dropped: list[DroppedUnload] = []
    for _broker, items in by_broker.items():
        for u in items:
            ns = namespace_of(u.bundle)
            if ns in excluded:
                dropped.append(
                    DroppedUnload(
                        u.broker,
                        u.bundle,
                        DropReason.EXCLUDED_NAMESPACE,
                        f"namespace {ns} is in loadBalancerSheddingExcludedNamespaces",
                        u.reason,
                    )
                )
                continue
            if not should_namespace_policies_unload(u.bundle, u.broker, ctx.policies, avail, ctx.persistent_enabled):
                dropped.append(
                    DroppedUnload(
                        u.broker,
                        u.bundle,
                        DropReason.NAMESPACE_POLICIES,
                        f"no broker other than {u.broker} satisfies the namespace policies of {ns} "
                        "(shouldNamespacePoliciesUnload)",
                        u.reason,
                    )
                )
                continue
            group = ctx.policies.anti_affinity_group(ns)
            if group is not None and not should_anti_affinity_namespace_unload(
                u.broker, ctx.policy_candidates(u.bundle, avail), ctx.anti_affinity_counts(ns)
            ):
                dropped.append(
                    DroppedUnload(
                        u.broker,
                        u.bundle,
                        DropReason.ANTI_AFFINITY_NAMESPACE,
                        f"every candidate broker owns as many namespaces of the anti-affinity group {group!r} as "
                        f"{u.broker}: the bundle would come back (shouldAntiAffinityNamespaceUnload)",
                        u.reason,
                    )
                )
                continue
            p, state = select_broker(
                u.bundle,
                strategy=settings.placement,
                candidates=avail,
                ctx=ctx,
                config=config,
                state=state,
                rng=rng,
            )
            if p.broker is None:
                dropped.append(
                    DroppedUnload(
                        u.broker,
                        u.bundle,
                        DropReason.NO_BROKER,
                        f"no broker available to unload the bundle to ({p.reason})",
                        u.reason,
                    )
                )
            elif p.broker == u.broker:
                dropped.append(
                    DroppedUnload(
                        u.broker,
                        u.bundle,
                        DropReason.DESTINATION_IS_SOURCE,
                        f"{settings.placement} picked the current owner {u.broker}: {p.reason}",
                        u.reason,
                        p.tied,
                    )
                )
            else:
                executed.append(Unload(u.broker, u.bundle, p.broker, u.reason, p.tied, p.reason))
    return executed, dropped, state


def run_cycle(cycle: CycleInput, state: StrategyState, settings: CycleSettings, rng: random.Random) -> CycleResult:
    """One leader cycle, in this order: age the recently-unloaded maps; refresh the leader's view
    (``updateAll``: bundle data, then ``checkNamespaceBundleSplit``); ``doLoadShedding`` (strategy,
    then each unload's destination); then the ``place`` lookups (``selectBrokerForAssignment``)."""
    config = settings.config
    now, now_source = _now(cycle)
    grace_ms = config.load_balancer_shedding_grace_period_minutes * 60_000
    recent_bundles = _merge_recent(state.recently_unloaded_bundles, cycle.recently_unloaded_bundles)
    if now is not None:
        # doLoadShedding / UnloadScheduler: forget bundles unloaded longer ago than the grace period.
        recent_bundles = {b: ts for b, ts in recent_bundles.items() if ts >= now - grace_ms}
    recent_brokers = _merge_recent(state.recently_unloaded_brokers, cycle.recently_unloaded_brokers)
    state = state.evolve(recently_unloaded_bundles=recent_bundles, recently_unloaded_brokers=recent_brokers)

    if settings.placement == "LeastResourceUsageWithWeight" and not settings.extensible and cycle.brokers is not None:
        # LeastResourceUsageWithWeight.onActiveBrokersChange: history of brokers no longer active is dropped
        kept = {b: v for b, v in state.lruww_avg_usage.items() if b in cycle.brokers}
        if len(kept) != len(state.lruww_avg_usage):
            state = state.evolve(lruww_avg_usage=kept)

    # updateBundleData: the leader's BundleData (given, or kept in the state and updated with lastStats)
    if cycle.bundle_data_given:
        bundle_data = dict(cycle.bundle_data)
    elif cycle.brokers is not None:
        bundle_data = _leader_bundle_data(cycle, state)
    else:
        bundle_data = {}

    shedder = SHEDDERS[settings.shedding]
    top: dict[str, list[tuple[str, NamespaceBundleStats]]] | None = cycle.top_bundles
    load_data = cycle.broker_load_data
    if settings.extensible:
        derived = load_data is None
        if derived:
            load_data, top, state = _derive_extensible(cycle, config, state)
        assert load_data is not None
        available = (
            cycle.available_brokers
            if cycle.available_brokers is not None
            else list(dict.fromkeys([*load_data, *(cycle.brokers or {})]))
        )
    else:
        assert cycle.brokers is not None
        available = list(cycle.brokers)

    # Splits first (updateAll -> checkNamespaceBundleSplit runs when load reports arrive). A planner
    # (GlobalPlanner) plans its own splits together with its moves: Pulsar's split trigger is not run.
    planner = plans_splits(shedder)
    splits: list[SplitDecision] = []
    split_notes: list[str] = []
    if config.load_balancer_auto_bundle_split_enabled and not planner:
        derived_counts = _namespace_counts(cycle, top)
        counts = cycle.namespace_bundle_counts if cycle.namespace_bundle_counts is not None else derived_counts
        if settings.extensible:
            # one split strategy per broker (Pulsar runs it on each broker): counts of brokers gone are dropped
            previous = state.split_hit_counts
            hit_counts: dict[str, dict[str, int]] = {}
            sources: Mapping[str, Mapping[str, NamespaceBundleStats]]
            if cycle.brokers is not None:
                sources = {b: d.last_stats for b, d in cycle.brokers.items()}
                src_path = "brokers.{}.lastStats"
            else:
                sources = {b: dict(entries) for b, entries in (top or {}).items()}
                src_path = "topBundlesLoadData.{}"
            for broker, stats in sources.items():
                found, hit_counts[broker] = extensible_bundles_to_split(
                    broker=broker,
                    bundle_stats=stats,
                    namespace_bundle_counts=_with_counts(counts, derived_counts, stats),
                    split_condition_hit_counts=previous.get(broker, {}),
                    config=config,
                    path=field_path(cycle.path, src_path.format(broker)),
                )
                splits.extend(_split_decision(c, config) for c in found)
            state = state.evolve(split_hit_counts=hit_counts)
        elif len(available) <= 1:
            # checkNamespaceBundleSplit: returns early when knownBrokers.size() <= 1
            split_notes.append(f"{len(available)} known broker(s): checkNamespaceBundleSplit does nothing")
        else:
            found = modular_bundles_to_split(
                brokers=cycle.brokers or {},
                bundle_data=bundle_data,
                namespace_bundle_counts=_with_counts(counts, derived_counts, _all_last_stats(cycle)),
                config=config,
                path=field_path(cycle.path, "brokers"),
            )
            for c in found:
                splits.append(_split_decision(c, config))
                # "Make sure the same bundle is not selected again": its BundleData is removed, so the
                # shedder of this cycle cannot select the split parent.
                bundle_data.pop(c.bundle, None)

    extra: dict[str, Any] = {"nowMs": now, "nowSource": now_source, "availableBrokers": len(available)}
    if split_notes:
        extra["splitNotes"] = split_notes
    if not (config.load_balancer_enabled and config.load_balancer_shedding_enabled):
        decision: Decision = skip(Reason.DISABLED, "loadBalancerEnabled or loadBalancerSheddingEnabled is false")
    elif len(available) <= 1:
        decision = skip(Reason.NO_BROKERS, f"{len(available)} available broker(s): no load shedding is performed")
    elif settings.extensible:
        assert load_data is not None
        owned = None
        if cycle.brokers is not None:
            owned = {b: frozenset(d.bundles) for b, d in cycle.brokers.items()}
        inp = ExtensibleInput(
            broker_load_data=load_data,
            top_bundles=top or {},
            available_brokers=available,
            recently_unloaded_bundles=recent_bundles,
            recently_unloaded_brokers=recent_brokers,
            now_ms=cycle.now_ms or 0,
            owned_bundles=owned,
            excluded=frozenset(config.load_balancer_shedding_excluded_namespaces),
            policies=cycle.policies,
        )
        decision, state = shedder.find_bundles_for_unloading(inp, config, state)
    elif planner:
        # GlobalPlanner: one whole-cluster plan (moves with destinations, splits with boundaries)
        inp_p = PlannerInput(
            cycle.brokers or {},
            bundle_data,
            recent_bundles,
            now,
            cycle.bundle_topics,
            cycle.namespace_bundle_counts,
            policies=cycle.policies,
        )
        decision, state = shedder.plan(inp_p, config, state)
        splits = list(decision.splits)
    else:
        inp_m = ModularInput(cycle.brokers or {}, bundle_data, recent_bundles)
        decision, state = shedder.find_bundles_for_unloading(inp_m, config, state)

    # Placement context (modular), built lazily: only destinations and `place` need it.
    ctx: ModularPlacementContext | None = None

    def modular_ctx() -> ModularPlacementContext:
        nonlocal ctx
        if ctx is None:
            ctx = ModularPlacementContext.build(cycle.brokers or {}, bundle_data, cycle.time_average, cycle.policies)
        return ctx

    owners = {b: d.bundles for b, d in cycle.brokers.items()} if cycle.brokers is not None else None

    def extensible_candidates(bundle: str) -> list[str]:
        """The extensible lookup's policy filters (``getBrokerFilterPipeline``) over the available brokers."""
        return extensible_filter(bundle, available, cycle.policies, owners, config.failure_domains_enabled)

    # The load manager's level: what is executed, and what is dropped with the reason.
    dropped: list[DroppedUnload] = []
    if settings.extensible:
        executed = list(decision.unloads)  # UnloadScheduler executes every decision as given
    elif planner:
        # The planner's moves are placed in its own plan (destination chosen with every other move of
        # the cycle in view, never an excluded namespace): executed as planned, selectBroker is not run.
        executed = list(decision.unloads)
    elif decision.unloads:
        executed, dropped, state = _executed_unloads(settings, decision, available, modular_ctx, state, rng)
    else:
        executed = []
    if BASE_NAME.get(settings.shedding, settings.shedding) == "AvgShedder":
        state = state.evolve(avg_bundle_broker={})  # onUnloadAttemptCompleted: the plans end with the attempt

    # Record what was unloaded (ModularLoadManagerImpl / UnloadScheduler do it after each unload).
    if executed and now is not None:
        rb = dict(state.recently_unloaded_bundles)
        rk = dict(state.recently_unloaded_brokers)
        for u in executed:
            rb[u.bundle] = now
            if settings.extensible:
                rk[u.broker] = now
        state = state.evolve(recently_unloaded_bundles=rb, recently_unloaded_brokers=rk)

    unloads = list(decision.unloads)
    if settings.assign_destinations and unloads:
        assigned: list[Unload] = []
        if settings.extensible:
            for u in unloads:
                if u.destination is not None:
                    assigned.append(u)
                    continue
                assert load_data is not None
                p = EXTENSIBLE_PLACEMENTS[settings.placement].select_broker(
                    bundle=u.bundle,
                    candidates=[b for b in extensible_candidates(u.bundle) if b != u.broker],
                    load_data=load_data,
                    config=config,
                    rng=rng,
                )
                assigned.append(Unload(u.broker, u.bundle, p.broker, u.reason, p.tied, p.reason))
            executed = assigned
        else:
            # the strategy level shows the executed destination where the load manager unloads the bundle
            done = {(u.broker, u.bundle): u for u in executed}
            for u in unloads:
                e = done.get((u.broker, u.bundle))
                assigned.append(e if e is not None else u)
        unloads = assigned

    placements: list[Placement] = []
    for bundle in cycle.place:
        if settings.extensible:
            assert load_data is not None
            placements.append(
                EXTENSIBLE_PLACEMENTS[settings.placement].select_broker(
                    bundle=bundle,
                    candidates=extensible_candidates(bundle),
                    load_data=load_data,
                    config=config,
                    rng=rng,
                )
            )
        else:
            p, state = select_broker_for_assignment(
                bundle,
                strategy=settings.placement,
                candidates=list(available),
                ctx=modular_ctx(),
                config=config,
                state=state,
                rng=rng,
            )
            placements.append(p)

    if not cycle.bundle_data_given and cycle.brokers is not None:
        state = state.evolve(bundle_data={b: d.to_json() for b, d in bundle_data.items()})
    else:
        state = state.evolve(bundle_data={})

    stats = dict(decision.stats)
    stats.update(extra)
    # The label/reason describe the unload decision (Pulsar's UnloadDecision); splits ride alongside.
    final = Decision(
        label=decision.label,
        reason=decision.reason,
        detail=decision.detail,
        unloads=tuple(unloads),
        splits=tuple(splits),
        placements=tuple(placements),
        stats=stats,
    )
    return CycleResult(final, tuple(executed), tuple(dropped), state)


def _with_counts(counts: Mapping[str, int], derived: Mapping[str, int], stats: Mapping[str, Any]) -> Mapping[str, int]:
    """The given counts, completed from the cycle's own bundles for namespaces they do not mention."""
    missing = {namespace_of(b) for b in stats} - set(counts)
    if not missing:
        return counts
    merged = dict(counts)
    for ns in missing:
        merged[ns] = derived[ns]
    return merged


def _all_last_stats(cycle: CycleInput) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for data in (cycle.brokers or {}).values():
        out.update(data.last_stats)
    return out


__all__ = ["CycleInput", "CycleResult", "CycleSettings", "run_cycle", "seeded_random", "with_random_position"]
