"""``TransferShedder`` (``pulsar-broker/.../loadbalance/extensions/scheduler/TransferShedder.java``,
newest version) - the extensible load manager's shedder, which also pre-assigns destinations.

Load metric per broker: ``BrokerLoadData.weightedMaxEMA`` (fraction). Per cycle:

1. ``LoadStats.update``: brokers whose data is older than ``loadBalancerBrokerLoadDataTTLInSeconds``
   are left out of avg/std (reason OutDatedData if none remain); a broker unloaded less than
   ``loadBalanceSheddingDelayInSeconds`` before its data was updated aborts the cycle (CoolDown),
   otherwise it leaves ``recentlyUnloadedBrokers``; an available broker without data -> NoLoadData.
   ``avg`` and population ``std``. The brokers sorted by load include the outdated ones (quirk:
   Pulsar sorts the whole store before filtering).
2. Hysteresis: the condition ``std > loadBalancerBrokerLoadTargetStd`` or min broker underloaded
   or max broker overloaded must hold in more than ``loadBalancerSheddingConditionHitCountThreshold``
   consecutive cycles (HitCount); the counter resets when a cycle sheds.
3. Pair the highest with the lowest broker (then 2nd highest with the same lowest unless it was
   relieved...), up to ``loadBalancerMaxNumberOfBrokerSheddingPerCycle`` brokers: offload
   ``(maxLoad - minLoad) / 2`` of load, converted to throughput ``maxThr * offload / maxLoad``, from
   the max broker's top bundles in the order reported (ascending), never its last one; a bundle
   that would overshoot ends the scan unless a *swap* (min-broker bundles moved to the max broker)
   keeps both brokers below the max broker's throughput. Destination = the min broker when
   ``loadBalancerTransferEnabled``.

Quirks reproduced: the swap gain is only subtracted when ``loadBalancerDebugModeEnabled`` (Pulsar
adds it inside its debug-logging block); ``std`` is NaN when rounding makes the variance negative
in step 1 (Java's ``Math.sqrt``), which disables the std trigger.

``isTransferable`` (newest): a bundle whose namespace has an isolation policy or an anti-affinity
group is not transferable unless ``loadBalancerSheddingBundlesWithPoliciesEnabled``
(``isLoadBalancerSheddingBundlesWithPoliciesEnabled``); the candidates are the available brokers
through the policy filters of the pipeline (``AntiAffinityGroupPolicyFilter``, then
``BrokerIsolationPoliciesFilter``: :func:`core.pulsar.policies.extensible_filter`); a given destination must
survive them; then, the owner removed, a transfer needs the destination among them and an unload any
broker. Not modelled: the pipeline's other filters (``BrokerMaxTopicCountFilter``,
``BrokerVersionFilter``, ``BrokerLoadManagerClassFilter``). The ownership check (and the
anti-affinity counts, over owned bundles) use the cycle's ``brokers`` reports when given.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pulsar_rebalance.core.decision import Reason, Unload, skip, success
from pulsar_rebalance.core.pulsar.policies import NO_POLICIES, PlacementPolicies, extensible_filter
from pulsar_rebalance.core.pulsar.shedders.base import is_system_namespace, java_div, java_sqrt, namespace_of

if TYPE_CHECKING:
    from pulsar_rebalance.core.decision import Decision
    from pulsar_rebalance.core.pulsar.config import LoadBalancerConfig
    from pulsar_rebalance.core.pulsar.load import BrokerLoadData, NamespaceBundleStats
    from pulsar_rebalance.core.pulsar.state import StrategyState

TopBundles = Sequence[tuple[str, "NamespaceBundleStats"]]


@dataclass(slots=True)
class ExtensibleInput:
    """The extensible load manager's view: load store, top-bundles store, registry, recent unloads."""

    broker_load_data: Mapping[str, BrokerLoadData]
    top_bundles: Mapping[str, TopBundles]
    available_brokers: Collection[str]
    recently_unloaded_bundles: Mapping[str, int]
    recently_unloaded_brokers: Mapping[str, int]
    now_ms: int
    owned_bundles: Mapping[str, Collection[str]] | None = None
    """broker -> bundles it owns (``channel.isOwner``); None skips the check, as Pulsar's tests do."""
    excluded: frozenset[str] = field(default_factory=frozenset)
    policies: PlacementPolicies = NO_POLICIES
    """Isolation policies, anti-affinity groups, failure domains (``isTransferable``'s filters)."""


def _partition_sort(arr: list[tuple[str, NamespaceBundleStats]], k: int) -> None:
    """``TopKBundles.partitionSort``: quickselect the k largest (``NamespaceBundleStats.compareTo``) to
    the front, then sort the strictly-greater prefix descending. Ported line by line."""
    start = 0
    end = len(arr) - 1
    target = k - 1
    while start < end:
        lo = start
        hi = end
        mid = lo
        pivot = arr[hi][1]
        while mid <= hi:
            cmp = pivot.compare_to(arr[mid][1])
            if cmp < 0:
                arr[lo], arr[mid] = arr[mid], arr[lo]
                lo += 1
                mid += 1
            elif cmp > 0:
                arr[mid], arr[hi] = arr[hi], arr[mid]
                hi -= 1
            else:
                mid += 1
        if lo <= target < mid:
            end = lo
            break
        if target < lo:
            end = lo - 1
        else:
            start = mid
    if end > 0:
        head = sorted(arr[:end], key=functools.cmp_to_key(_descending))
        arr[:end] = head


def _descending(a: tuple[str, NamespaceBundleStats], b: tuple[str, NamespaceBundleStats]) -> int:
    return b[1].compare_to(a[1])


def top_k_bundles(
    bundle_stats: Mapping[str, NamespaceBundleStats],
    k: int,
    has_policies: Callable[[str], bool] | None = None,
) -> list[tuple[str, NamespaceBundleStats]]:
    """``TopKBundles.update`` (newest): the k highest-loaded bundles, emitted in **ascending** order.

    Skips zero-throughput bundles, system namespaces and - ``has_policies`` given, i.e. unless
    ``loadBalancerSheddingBundlesWithPoliciesEnabled`` - bundles whose namespace has an isolation
    policy or an anti-affinity group (``hasPolicies``). ``k <= 0`` yields an empty list.
    """
    arr = [
        (b, s)
        for b, s in bundle_stats.items()
        if s.msg_throughput_in + s.msg_throughput_out != 0
        and not is_system_namespace(namespace_of(b))
        and (has_policies is None or not has_policies(namespace_of(b)))
    ]
    if not arr or k <= 0:
        return []
    k = min(k, len(arr))
    _partition_sort(arr, k)
    return [arr[i] for i in range(k - 1, -1, -1)]


class _LoadStats:
    """``TransferShedder.LoadStats``."""

    def __init__(self, store: Mapping[str, BrokerLoadData]) -> None:
        self.sum = 0.0
        self.sq_sum = 0.0
        self.total = 0
        self.avg = 0.0
        self.std = 0.0
        self.sorted = sorted(store, key=lambda b: store[b].weighted_max_ema)  # stable
        self.max_index = len(self.sorted) - 1
        self.min_index = 0
        self.shed_count = 0
        self.max_shed = 0

    def set(self, s: float, sq: float, n: int) -> None:
        self.sum, self.sq_sum, self.total = s, sq, n
        if n == 0:
            self.avg = 0.0
            self.std = 0.0
        else:
            self.avg = s / n
            self.std = java_sqrt(sq / n - self.avg * self.avg)

    def offload(self, max_load: float, min_load: float, offload: float) -> None:
        self.sq_sum -= max_load * max_load + min_load * min_load
        maxd = max(0.0, max_load - offload)
        mind = min_load + offload
        self.sq_sum += maxd * maxd + mind * mind
        self.std = java_sqrt(abs(java_div(self.sq_sum, self.total) - self.avg * self.avg))
        self.shed_count += 1
        self.min_index += 1

    def peek_min(self) -> str:
        return self.sorted[self.min_index]

    def peek_max(self) -> str:
        return self.sorted[self.max_index]

    def poll_max(self) -> str:
        broker = self.sorted[self.max_index]
        self.max_index -= 1
        return broker

    def has_transferable_brokers(self) -> bool:
        return self.shed_count < self.max_shed and self.min_index < self.max_index


@dataclass(frozen=True)
class TransferShedder:
    name: str = "TransferShedder"

    def find_bundles_for_unloading(
        self, inp: ExtensibleInput, config: LoadBalancerConfig, state: StrategyState
    ) -> tuple[Decision, StrategyState]:
        store = inp.broker_load_data
        recent_brokers = dict(inp.recently_unloaded_brokers)
        hit = state.transfer_hit_count
        ls = _LoadStats(store)
        target = config.load_balancer_broker_load_target_std
        stats: dict[str, Any] = {
            "targetStd": target,
            "brokers": {
                b: {"load": d.weighted_max_ema, "msgThroughputEMA": d.msg_throughput_ema, "updatedAt": d.updated_at}
                for b, d in store.items()
            },
        }

        def finish(decision: Decision, hit_count: int) -> tuple[Decision, StrategyState]:
            stats["hitCount"] = hit_count
            return decision, state.evolve(transfer_hit_count=hit_count, recently_unloaded_brokers=recent_brokers)

        # ---- LoadStats.update --------------------------------------------------------------------
        ls.max_shed = config.load_balancer_max_number_of_broker_shedding_per_cycle
        ttl_ms = config.load_balancer_broker_load_data_ttl_in_seconds * 1000
        delay_ms = config.load_balance_shedding_delay_in_seconds * 1000
        missing = set(inp.available_brokers)
        outdated: list[str] = []
        total = 0
        s = sq = 0.0
        for broker, data in store.items():
            missing.discard(broker)
            if inp.now_ms - data.updated_at > ttl_ms:
                outdated.append(broker)
                continue
            if broker in recent_brokers:
                elapsed = data.updated_at - recent_brokers[broker]
                if elapsed < delay_ms:
                    ls.set(0.0, 0.0, 0)
                    stats["coolDownBroker"] = broker
                    return finish(
                        skip(
                            Reason.COOL_DOWN,
                            f"{broker} load data is {elapsed / 1000:.0f}s after its last unload < {delay_ms / 1000:.0f}s",
                            stats,
                        ),
                        hit,
                    )
                del recent_brokers[broker]
            load = data.weighted_max_ema
            s += load
            sq += load * load
            total += 1
        stats["outdatedBrokers"] = outdated
        if total == 0:
            reason = Reason.OUTDATED_DATA if outdated else Reason.NO_BROKERS
            return finish(
                skip(
                    reason, "no usable broker load data" + (f" ({len(outdated)} outdated)" if outdated else ""), stats
                ),
                hit,
            )
        if missing:
            stats["missingLoadData"] = sorted(missing)
            return finish(
                skip(Reason.NO_LOAD_DATA, f"no load data from available broker(s) {sorted(missing)}", stats), hit
            )
        ls.set(s, sq, total)
        stats["avg"] = ls.avg
        stats["std"] = ls.std
        stats["sortedByLoad"] = list(ls.sorted)

        # ---- hysteresis ----------------------------------------------------------------------------
        def underloaded(broker: str) -> bool:
            data = store.get(broker)
            if data is None:
                return False
            multiplier = min(0.5, max(0.0, target / 2.0))
            if data.weighted_max_ema < ls.avg * multiplier:
                return True
            max_data = store.get(ls.peek_max())
            if max_data is None:
                return False
            return data.msg_throughput_ema < max_data.msg_throughput_ema * multiplier

        overload_threshold = config.load_balancer_broker_overloaded_threshold_percentage / 100.0

        def overloaded(broker: str, avg: float) -> bool:
            data = store.get(broker)
            if data is None:
                return False
            load = data.weighted_max_ema
            return load > overload_threshold and load > avg + target

        if ls.std > target or underloaded(ls.peek_min()) or overloaded(ls.peek_max(), ls.avg):
            hit += 1
        else:
            hit = 0
        threshold = config.load_balancer_shedding_condition_hit_count_threshold
        if hit <= threshold:
            return finish(
                skip(
                    Reason.HIT_COUNT,
                    f"shedding condition hit count {hit} <= threshold {threshold} (std {ls.std:.4f}, target {target})",
                    stats,
                ),
                hit,
            )

        # ---- the shedding loop -------------------------------------------------------------------
        transfer = config.load_balancer_transfer_enabled
        debug = config.load_balancer_debug_mode_enabled
        available = set(inp.available_brokers)
        recent_bundles = inp.recently_unloaded_bundles
        owned = inp.owned_bundles

        policies = inp.policies
        with_policies = config.load_balancer_shedding_bundles_with_policies_enabled
        domains_enabled = config.failure_domains_enabled
        available_list = list(inp.available_brokers)

        def transferable(bundle: str, src: str, dst: str | None) -> bool:
            candidates: Collection[str] = available
            if not policies.empty:
                if not with_policies and policies.has_policies(namespace_of(bundle)):
                    return False  # isLoadBalancerSheddingBundlesWithPoliciesEnabled
                candidates = extensible_filter(bundle, available_list, policies, owned, domains_enabled)
            if dst is not None and dst not in candidates:
                return False
            others = len(candidates) - (1 if src in candidates else 0)
            if dst is None or not transfer:
                return others > 0
            return dst != src

        unloads: list[Unload] = []
        n_empty = 0
        n_few = 0
        pairs: list[dict[str, Any]] = []
        stats["pairs"] = pairs
        while True:
            if not ls.has_transferable_brokers():
                break
            if ls.std > target:
                reason = Reason.OVERLOADED
                why_pair = f"std {ls.std:.4f} > target {target}"
            elif underloaded(ls.peek_min()):
                reason = Reason.UNDERLOADED
                why_pair = f"{ls.peek_min()} is underloaded"
            elif overloaded(ls.peek_max(), ls.avg):
                reason = Reason.OVERLOADED
                why_pair = f"{ls.peek_max()} is overloaded"
            else:
                break
            max_b = ls.poll_max()
            min_b = ls.peek_min()
            max_d, min_d = store[max_b], store[min_b]
            max_load = max_d.weighted_max_ema
            min_load = min_d.weighted_max_ema
            offload = (max_load - min_load) / 2
            max_thr = max_d.msg_throughput_in + max_d.msg_throughput_out
            min_thr = min_d.msg_throughput_in + min_d.msg_throughput_out
            offload_thr = java_div(max_thr * offload, max_load)
            pair: dict[str, Any] = {
                "max": max_b,
                "min": min_b,
                "maxLoad": max_load,
                "minLoad": min_load,
                "offloadThroughput": offload_thr,
                "reason": reason.value,
            }
            pairs.append(pair)
            marked = 0.0
            gained = 0.0
            top = inp.top_bundles.get(max_b)
            if not top:
                n_empty += 1
                pair["status"] = "no top-bundles load data"
                continue
            if len(top) == 1:
                n_few += 1
                pair["status"] = f"sole bundle {top[0][0]}"
                continue
            min_top = inp.top_bundles.get(min_b)
            min_iter: Iterator[tuple[str, NamespaceBundleStats]] | None = iter(min_top) if min_top is not None else None
            remaining = len(top)
            for bundle, bst in top:
                if owned is not None and bundle not in owned.get(max_b, ()):
                    continue
                if inp.excluded and namespace_of(bundle) in inp.excluded:
                    continue
                if bundle in recent_bundles:
                    continue
                if not transferable(bundle, max_b, min_b):
                    continue
                if remaining <= 1:
                    break
                thr = bst.msg_throughput_in + bst.msg_throughput_out
                if thr == 0:
                    continue
                swap = False
                min_to_max: list[str] = []
                swap_thr = 0.0
                if marked - gained + thr > offload_thr:
                    if transfer and min_iter is not None:
                        max_new = max_thr - marked + gained - thr
                        min_new = min_thr + marked - gained + thr
                        for mb, mst in min_iter:
                            if not transferable(mb, min_b, max_b):
                                continue
                            mthr = mst.msg_throughput_in + mst.msg_throughput_out
                            if mthr == 0:
                                continue
                            max_tmp = max_new + mthr
                            min_tmp = min_new - mthr
                            if max_tmp < max_thr and min_tmp < max_thr:
                                min_to_max.append(mb)
                                max_new, min_new = max_tmp, min_tmp
                                swap_thr += mthr
                                if min_new <= max_new and max_new < max_thr * 0.75:
                                    swap = True
                                    break
                    if not swap:
                        break
                why = (
                    f"{reason.value}: {why_pair}; {max_b} load {max_load:.4f} -> {min_b} load {min_load:.4f}, "
                    f"offload {offload:.4f} (~{offload_thr:.0f} B/s)"
                )
                if transfer:
                    if swap:
                        unloads.extend(
                            Unload(min_b, mb, max_b, f"{reason.value}: swap into {max_b} to make room for {bundle}")
                            for mb in min_to_max
                        )
                        if debug:
                            gained += swap_thr  # quirk: only accounted in debug mode
                    unloads.append(Unload(max_b, bundle, min_b, why))
                else:
                    unloads.append(Unload(max_b, bundle, None, why))
                marked += thr
                remaining -= 1
            if marked > 0:
                adjusted = java_div((marked - gained) * max_load, max_thr)
                ls.offload(max_load, min_load, adjusted)
                pair.update({"markedThroughput": marked, "gainedThroughput": gained, "stdAfter": ls.std})
                pair["status"] = "shedding"
            else:
                n_few += 1
                pair["status"] = "no bundle could be unloaded from the top bundles"
        stats["stdAfter"] = ls.std
        if not unloads:
            if n_empty > 0:
                reason, detail = Reason.NO_LOAD_DATA, "max broker(s) have no top-bundles load data"
            elif n_few > 0:
                reason, detail = Reason.NO_BUNDLES, "no unloadable bundle among the max brokers' top bundles"
            else:
                reason, detail = Reason.HIT_COUNT, f"std {ls.std:.4f} <= target {target} and no under/overloaded broker"
            return finish(skip(reason, detail, stats), hit)
        overall = Reason.OVERLOADED if any(u.reason.startswith("Overloaded") for u in unloads) else Reason.UNDERLOADED
        return finish(
            success(overall, f"{len(unloads)} transfer(s) across {len(pairs)} broker pair(s)", unloads, stats), 0
        )
