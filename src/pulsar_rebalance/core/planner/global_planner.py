"""GlobalPlanner: plan the whole cluster at once toward a target spread, with as few moves as possible.

Not a Pulsar class (Pulsar's shedders decide broker by broker, inside the leader, with no memory of
their own moves); this strategy uses what a planner outside the brokers has: every broker's report at
once, the move history, and splits and placement decided together. Same cycle input and output shape
as the shedders (``decide``'s ``shedding: "GlobalPlanner"``): unloads with their destination, reason and
predicted before/after; splits with their boundaries (applied before the unloads, so an unload may
name a child of a split of the same cycle); warnings for what no move can fix.

One cycle:

1. **Model** (:mod:`.load_model`): per broker the absolute usage and limit of Pulsar's five resources,
   per bundle its contribution (fitted from the reports), planned at the recent peak (max of the last
   sample and Pulsar's short-term average). Usage is capacity-normalised (weighted max of usage/limit).
2. **Ideal** = total usage / total capacity (binding resource). **Target** = ideal + max(2 points,
   4 % of ideal); **trigger** = ideal + max(5 points, 10 % of ideal). Nothing happens unless the
   busiest broker is above the trigger (hysteresis: a balanced cluster gets zero moves, noise and
   on/off traffic inside the band are ignored).
3. **Greedy descent of the maximum**: take the busiest broker above target; if one bundle can bring
   it to the target without pushing its destination above the target, move the *smallest* such
   bundle; otherwise make the move that lowers max(source, destination) the most. A destination is
   never excluded (zero limits) and never ends above the source's usage or Pulsar's overload
   threshold. Each move strictly lowers the pair's maximum: the plan is never worse than before.
4. **Split when no move can help**: if the busiest broker's biggest bundle fits nowhere below the
   target, split it - isolating a topic that carries more than half of it (boundaries at its hash
   and hash+1), otherwise into equal-load parts by topic hash - and place the children in the same
   plan. A bundle that is a single hot topic, or whose namespace is at
   ``loadBalancerNamespaceMaximumBundles``, gets a **warning**, not a move.
5. **History**: bundles this planner moved within the cool-down (30 min), or that anyone unloaded within
   Pulsar's grace period, stay put; a bundle is never moved back to the broker it left within 6 h.
   A broker that stopped reporting less than 10 min ago may be restarting: the planner waits (unless a
   broker is above Pulsar's overload threshold) instead of spreading load it will move back.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pulsar_rebalance.core.bundles import BundleRange, bundle_full_name, format_boundary, split_full_name, split_range, topic_hash
from pulsar_rebalance.core.config import LoadBalancerConfig
from pulsar_rebalance.core.decision import Decision, Label, Reason, SplitDecision, Unload, skip
from pulsar_rebalance.core.load import BundleData, LocalBrokerData
from pulsar_rebalance.core.planner.load_model import BundleLoad, ClusterView, features_of
from pulsar_rebalance.core.planner.memory import PlannerMemory
from pulsar_rebalance.core.state import StrategyState

PLANNER_NAME = "GlobalPlanner"


@dataclass(frozen=True, slots=True)
class PlannerSettings:
    target_abs: float = 0.02
    target_rel: float = 0.04
    trigger_abs: float = 0.03
    trigger_rel: float = 0.06
    min_gain: float = 0.005
    """A move must lower the source by at least this (usage fraction): smaller ones are not worth a disconnect."""
    cooldown_ms: int = 30 * 60_000
    history_ms: int = 6 * 60 * 60_000
    peak_ms: int = 60 * 60_000
    """How long a swinging bundle's peak is remembered after it was last seen."""
    swing: float = 0.25
    """A bundle whose last sample differs from its short-term average by more than this (relative) swings."""
    settle_ms: int = 10 * 60_000
    """A broker that stopped reporting less than this ago may be restarting: wait (unless one is overloaded)."""
    forget_broker_ms: int = 24 * 60 * 60_000
    max_actions: int = 1000
    candidate_destinations: int = 8
    max_split_parts: int = 8
    min_split_gain: float = 0.02
    """Isolating a hot topic must free at least this much of its broker (usage fraction) to be worth a split."""


@dataclass(frozen=True, slots=True)
class PlannedUnload(Unload):
    """An unload with the planner's predicted usage of source and destination before/after."""

    predicted: Mapping[str, float] | None = None

    def to_json(self) -> dict[str, Any]:
        out = Unload.to_json(self)
        if self.predicted is not None:
            out["predicted"] = dict(self.predicted)
        return out


def planned_split(bundle: str, broker: str, reason: str, points: Sequence[int], children: Sequence[str]) -> SplitDecision:
    """A planner's split: Pulsar's ``specified_positions_divide`` at the planned boundaries, children
    named (so unloads of the same plan can name them) and not unloaded by the split itself."""
    return SplitDecision(bundle, broker, reason, "specified_positions_divide", [format_boundary(b) for b in points],
                         list(children), False)


@dataclass(slots=True)
class PlannerInput:
    brokers: Mapping[str, LocalBrokerData]
    bundle_data: Mapping[str, BundleData]
    recently_unloaded_bundles: Mapping[str, int]
    now_ms: int | None = None
    bundle_topics: Mapping[str, Mapping[str, Any]] | None = None
    """bundle -> {full topic name -> TopicRates}: lets splits isolate hot topics (optional)."""
    namespace_bundle_counts: Mapping[str, int] | None = None


SPLIT_CANDIDATES_PER_BROKER = 3


def split_candidates(reports: Mapping[str, Mapping[str, Any]], per_broker: int = SPLIT_CANDIDATES_PER_BROKER) -> list[str]:
    """Each broker's busiest bundles in LocalBrokerData JSON reports (by bytes/s + 1 KiB per msg/s):
    the ones a caller should send topic rates for (``bundleTopics``) so that splits can isolate hot topics."""
    out: list[str] = []
    for rep in reports.values():
        stats = rep.get("lastStats") or rep.get("bundleStats") or {}

        def weight(b: str) -> float:
            s = stats[b]
            return (s.get("msgThroughputIn", 0.0) + s.get("msgThroughputOut", 0.0)
                    + 1024 * (s.get("msgRateIn", 0.0) + s.get("msgRateOut", 0.0)))

        out.extend(sorted(stats, key=lambda b: (-weight(b), b))[:per_broker])
    return out


def _r(x: float) -> float:
    return round(x, 4)


class GlobalPlanner:
    name = PLANNER_NAME
    plans_splits = True
    """Splits come from the plan itself (with boundaries); Pulsar's split trigger is not run."""

    def __init__(self, settings: PlannerSettings | None = None) -> None:
        self.settings = settings or PlannerSettings()

    # The shedder interface (ModularInput): no clock, no topic rates.
    def find_bundles_for_unloading(self, inp: Any, config: LoadBalancerConfig, state: StrategyState) -> tuple[Decision, StrategyState]:
        return self.plan(PlannerInput(inp.brokers, inp.bundle_data, inp.recently_unloaded_bundles), config, state)

    def plan(self, inp: PlannerInput, config: LoadBalancerConfig, state: StrategyState) -> tuple[Decision, StrategyState]:
        # imported here: core.shedders registers this planner, so a module-level import would be circular
        from pulsar_rebalance.core.shedders.base import is_system_namespace, namespace_of

        st = self.settings
        now = inp.now_ms
        mem = PlannerMemory.of(state.planner)
        if now is not None:
            self._update_peaks(mem, inp, now)
        view = ClusterView(
            inp.brokers, inp.bundle_data, config,
            {b: (p["msgRate"], p["msgThroughputIn"], p["msgThroughputOut"]) for b, p in mem.peaks.items()},
        )
        eligible = [b for b in view.brokers if any(lim > 0 and w > 0 for lim, w in zip(view.limit[b], view.weights))]
        history = mem.moves
        if now is not None:
            history = {b: m for b, m in history.items() if m["atMs"] >= now - st.history_ms}
            mem.moves = history
        before = {b: view.usage(b) for b in view.brokers}
        ideal = view.ideal(eligible)
        target = ideal + max(st.target_abs, st.target_rel * ideal)
        trigger = ideal + max(st.trigger_abs, st.trigger_rel * ideal)
        overload = config.load_balancer_broker_overloaded_threshold_percentage / 100.0
        max_before = max((before[b] for b in eligible), default=0.0)
        stats: dict[str, Any] = {
            "ideal": _r(ideal), "target": _r(target), "trigger": _r(trigger), "maxUsageBefore": _r(max_before),
        }
        seen = mem.brokers_seen
        left: list[str] = []
        if now is not None:
            left = sorted(b for b, t in seen.items() if b not in inp.brokers and t >= now - st.settle_ms)
            seen.update({b: now for b in inp.brokers})
            mem.brokers_seen = {b: t for b, t in seen.items() if t >= now - st.forget_broker_ms}
        new_state = state.evolve(planner=mem.to_json())
        if len(eligible) < 2:
            return skip(Reason.NO_BROKERS, f"{len(eligible)} broker(s) with reported limits: nothing to balance", stats), new_state
        if max_before <= trigger:
            stats["brokers"] = {b: {"usage": _r(before[b])} for b in view.brokers}
            return skip(
                Reason.BALANCED,
                f"busiest broker {max_before:.4f} <= trigger {trigger:.4f} (ideal {ideal:.4f}): within the band, no move",
                stats,
            ), new_state

        if left and max_before < overload:
            stats["brokers"] = {b: {"usage": _r(before[b])} for b in view.brokers}
            return skip(
                Reason.COOL_DOWN,
                f"broker(s) {', '.join(left)} stopped reporting less than {st.settle_ms // 60_000} min ago (a restart?): "
                f"waiting before re-planning; busiest broker {max_before:.4f} < overload threshold {overload:.2f}",
                stats,
            ), new_state

        excluded_ns = set(config.load_balancer_shedding_excluded_namespaces)
        counts = dict(inp.namespace_bundle_counts or {})
        if not counts:
            for name in view.bundles:
                counts[namespace_of(name)] = counts.get(namespace_of(name), 0) + 1

        def is_frozen(bundle: str) -> bool:
            m = history.get(bundle)
            if m is not None and (now is None or m["atMs"] >= now - st.cooldown_ms):
                return True
            if bundle in inp.recently_unloaded_bundles:
                return True
            ns = namespace_of(bundle)
            return ns in excluded_ns or is_system_namespace(ns)

        frozen = {name for name in view.bundles if is_frozen(name)}
        unloads: list[PlannedUnload] = []
        splits: list[SplitDecision] = []
        warnings: list[str] = []
        stuck: set[str] = set()
        stuck_max = 0.0
        unsplittable: set[str] = set()
        moved_in_plan: set[str] = set()
        topic_cache: dict[str, list[tuple[int, list[float]]]] = {}
        """Topic hashes and load vectors of bundles split in this plan (their children inherit them)."""
        child_features: dict[str, tuple[float, float, float]] = {}
        # lazy heaps of (usage, broker): the busiest first, the least used first
        busiest = [(-view.usage(b), b) for b in eligible]
        idlest = [(view.usage(b), b) for b in eligible]
        heapq.heapify(busiest)
        heapq.heapify(idlest)

        def changed(*brokers: str) -> None:
            for b in brokers:
                heapq.heappush(busiest, (-view.usage(b), b))
                heapq.heappush(idlest, (view.usage(b), b))

        def dest_candidates(exclude: str) -> list[str]:
            out: list[tuple[float, str]] = []
            while idlest and len(out) < st.candidate_destinations + 1:
                u, b = heapq.heappop(idlest)
                if u != view.usage(b) or any(b == o for _, o in out):
                    continue
                out.append((u, b))
            for entry in out:
                heapq.heappush(idlest, entry)
            return [b for _, b in out if b != exclude][: st.candidate_destinations]

        def movable(name: str) -> bool:
            return name not in moved_in_plan and name not in frozen

        actions = 0
        # Brokers above the target are planned down to it while the busiest one can still be lowered;
        # once the busiest broker is stuck (its load cannot move), only brokers above the trigger are
        # worth disrupting clients for.
        floor_at = target
        while actions < st.max_actions:
            while busiest and (busiest[0][1] in stuck or -busiest[0][0] != view.usage(busiest[0][1])):
                heapq.heappop(busiest)
            if not busiest:
                break
            s = busiest[0][1]
            us = view.usage(s)
            if stuck_max >= us and floor_at == target:
                floor_at = trigger
            if us <= floor_at:
                break
            dests = dest_candidates(s)
            excess = us - target
            cands: list[tuple[float, str, float]] = []  # (size, bundle, source usage after)
            biggest: tuple[float, str] | None = None
            for name in view.owned[s]:
                if not movable(name):
                    continue
                a = view.usage_after(s, view.bundles[name].vec, -1.0)
                size = us - a
                if biggest is None or size > biggest[0]:
                    biggest = (size, name)
                if size >= st.min_gain:
                    cands.append((size, name, a))
            cands.sort()

            def best_dest(name: str, a: float) -> tuple[float, str] | None:
                """The destination with the lowest usage after receiving ``name`` (allowed ones only)."""
                bl = view.bundles[name]
                back = history.get(name, {}).get("from")
                best: tuple[float, str] | None = None
                for d in dests:
                    if d == back or view.usage(d) >= overload:
                        continue
                    bd = view.usage_after(d, bl.vec, 1.0)
                    if bd >= us - st.min_gain or bd > max(overload, target):
                        continue
                    if best is None or bd < best[0]:
                        best = (bd, d)
                return best

            choice: tuple[str, str, float, float] | None = None  # (bundle, dest, source after, dest after)
            # 1. the smallest bundle that alone brings the source to the target, its destination staying within it
            first = bisect.bisect_left(cands, (excess,))
            for size, name, a in cands[first:]:
                found = best_dest(name, a)
                if found is not None and found[0] <= target:
                    choice = (name, found[1], a, found[0])
                    break
            if choice is None and biggest is not None and biggest[1] not in unsplittable:
                # 2. split, only when moves cannot do it: the biggest bundle fits on no broker below the
                # target, and the other movable bundles together are smaller than the excess
                bl = view.bundles[biggest[1]]
                fits = any(view.usage_after(d, bl.vec, 1.0) <= target for d in dests)
                others = sum(size for size, name, _ in cands if name != biggest[1])
                if not fits and biggest[0] > excess and others < excess:
                    split = self._split(view, biggest[1], inp, config, counts, target, warnings, topic_cache, child_features)
                    if split is not None:
                        splits.append(split)
                        actions += 1
                        changed(s)
                        continue
                    unsplittable.add(biggest[1])
                    continue
            if choice is None:
                # 3. the largest bundle whose destination stays within the target; else the lowest pair maximum
                for size, name, a in reversed(cands):
                    found = best_dest(name, a)
                    if found is not None and found[0] <= target:
                        choice = (name, found[1], a, found[0])
                        break
            if choice is None:
                best_pair: tuple[float, str, str, float, float] | None = None
                for size, name, a in cands:
                    found = best_dest(name, a)
                    if found is not None:
                        pair = max(a, found[0])
                        if pair < us - st.min_gain and (best_pair is None or pair < best_pair[0]):
                            best_pair = (pair, name, found[1], a, found[0])
                if best_pair is not None:
                    choice = best_pair[1:]
            if choice is None:
                stuck.add(s)
                stuck_max = max(stuck_max, us)
                if us > target:
                    warnings.append(
                        f"{s}: predicted usage {us:.4f} stays above target {target:.4f}: no bundle can move without "
                        "overloading its destination (or all are in cool-down)"
                    )
                continue
            name, d, a, bd = choice
            ud = view.usage(d)
            bl = view.bundles[name]
            view.move(name, d)
            changed(s, d)
            moved_in_plan.add(name)
            actions += 1
            reason = (
                f"Overloaded: GlobalPlanner: {s} predicted usage {us:.4f} > target {target:.4f} (ideal {ideal:.4f}); "
                f"moving {name} ({bl.msg_rate:.1f} msg/s, {bl.throughput / 1048576:.2f} MiB/s) takes {s} to {a:.4f} "
                f"and {d} from {ud:.4f} to {bd:.4f}"
            )
            unloads.append(
                PlannedUnload(
                    s, name, d, reason, (d,),
                    f"least predicted usage after the move among the {len(dests)} least-used brokers",
                    {"sourceBefore": _r(us), "sourceAfter": _r(a), "destinationBefore": _r(ud), "destinationAfter": _r(bd)},
                )
            )

        after = {b: view.usage(b) for b in view.brokers}
        stats["maxUsageAfter"] = _r(max((after[b] for b in eligible), default=0.0))
        stats["brokers"] = {b: {"usage": _r(before[b]), "predictedUsage": _r(after[b])} for b in view.brokers}
        stats["warnings"] = warnings
        if now is not None and (unloads or splits):
            for u in unloads:
                mem.moves[u.bundle] = {"from": u.broker, "to": u.destination, "atMs": now}
            for sp in splits:  # children inherit their share of the parent's load as their peak
                mem.peaks.pop(sp.bundle, None)
                for child in sp.children or ():
                    feats = child_features.get(child)
                    if feats is not None:
                        mem.peaks[child] = {"msgRate": feats[0], "msgThroughputIn": feats[1], "msgThroughputOut": feats[2], "atMs": now}
            new_state = new_state.evolve(planner=mem.to_json())
        if not unloads and not splits:
            return skip(
                Reason.BALANCED if not warnings else Reason.UNKNOWN,
                f"busiest broker {max_before:.4f} > trigger {trigger:.4f} but no move or split helps"
                + (f"; {len(warnings)} warning(s)" if warnings else ""),
                stats,
            ), new_state
        detail = (
            f"{len(unloads)} move(s), {len(splits)} split(s): busiest broker {max_before:.4f} -> {stats['maxUsageAfter']:.4f} "
            f"(ideal {ideal:.4f}, target {target:.4f})"
        )
        return Decision(Label.SUCCESS, Reason.OVERLOADED, detail, tuple(unloads), tuple(splits), (), stats), new_state

    def _update_peaks(self, mem: PlannerMemory, inp: PlannerInput, now: int) -> None:
        """Remember the peak of bundles whose traffic swings; forget peaks not seen for ``peak_ms``."""
        st = self.settings
        peaks = {b: p for b, p in mem.peaks.items() if p["atMs"] >= now - st.peak_ms}
        swing = st.swing
        bundle_data = inp.bundle_data
        for data in inp.brokers.values():
            for name, s in data.last_stats.items():
                old = peaks.get(name)
                bd = bundle_data.get(name)
                swinging = False
                if bd is not None and bd.short_term_data.num_samples > 1:
                    t = bd.short_term_data
                    r1, r2 = s.msg_rate_in + s.msg_rate_out, t.msg_rate_in + t.msg_rate_out
                    i1, i2, o1, o2 = s.msg_throughput_in, t.msg_throughput_in, s.msg_throughput_out, t.msg_throughput_out
                    swinging = (
                        abs(r1 - r2) > swing * max(r1, r2) or abs(i1 - i2) > swing * max(i1, i2) or abs(o1 - o2) > swing * max(o1, o2)
                    )
                if old is None and not swinging:
                    continue
                cur = (s.msg_rate_in + s.msg_rate_out, s.msg_throughput_in, s.msg_throughput_out)
                prev = (old["msgRate"], old["msgThroughputIn"], old["msgThroughputOut"]) if old else (0.0, 0.0, 0.0)
                top = tuple(max(c, p) for c, p in zip(cur, prev))
                at = now if (swinging or old is None or any(c >= 0.8 * p for c, p in zip(cur, prev) if p > 0)) else old["atMs"]
                peaks[name] = {"msgRate": top[0], "msgThroughputIn": top[1], "msgThroughputOut": top[2], "atMs": at}
        mem.peaks = peaks

    # -------------------------------------------------------------------------------------------
    def _split(
        self,
        view: ClusterView,
        bundle: str,
        inp: PlannerInput,
        config: LoadBalancerConfig,
        counts: dict[str, int],
        target: float,
        warnings: list[str],
        topic_cache: dict[str, list[tuple[int, list[float]]]],
        child_features: dict[str, tuple[float, float, float]],
    ) -> SplitDecision | None:
        st = self.settings
        bl = view.bundles[bundle]
        ns, range_name = split_full_name(bundle)  # ns is namespace_of(bundle)
        rng = BundleRange.parse(range_name, bundle)
        limit = config.load_balancer_namespace_maximum_bundles
        topic_loads: list[tuple[int, list[float]]] | None = topic_cache.get(bundle)
        if topic_loads is None and (inp.bundle_topics or {}).get(bundle):
            topic_loads = []
            for topic, rates in inp.bundle_topics[bundle].items():  # type: ignore[index]
                f = features_of(rates.msg_rate, rates.msg_throughput_in, rates.msg_throughput_out, 1)
                topic_loads.append((topic_hash(topic), view.contribution(f)))
            topic_loads.sort(key=lambda t: t[0])
        if topic_loads == [] and bundle in topic_cache:
            warnings.append(f"{bundle}: a child of a split made without topic rates; not split again in this plan")
            return None
        if bl.topics <= 1 or (topic_loads is not None and len(topic_loads) == 1):
            warnings.append(f"{bundle} on {bl.broker}: a single hot topic carries it; no split or move can lower {bl.broker} further")
            return None
        if not rng.can_split():
            warnings.append(f"{bundle}: range cannot be split further")
            return None
        points: list[int]
        how: str
        if topic_loads:
            size = [view.usage_of(v, view.limit[bl.broker]) for _, v in topic_loads]
            total = sum(size) or 1.0
            top = max(range(len(size)), key=lambda i: size[i])
            if size[top] > 0.5 * total:
                if total - size[top] < st.min_split_gain:
                    warnings.append(
                        f"{bundle} on {bl.broker}: one topic carries {size[top] / total:.0%} of it; isolating it would free only "
                        f"{total - size[top]:.4f} of {bl.broker} (< {st.min_split_gain}): not split, no split or move can fix this topic"
                    )
                    return None
                h = topic_loads[top][0]
                points = [p for p in (h, h + 1) if rng.lower < p < rng.upper]
                how = f"isolate its hottest topic ({size[top] / total:.0%} of the bundle) at hash {format_boundary(h)}"
            else:
                load = view.usage_of(bl.vec, view.limit[bl.broker])
                parts = min(st.max_split_parts, max(2, math.ceil(load / max(target / 4, 1e-9))))
                points = []
                acc = 0.0
                j = 1
                for i in range(1, len(size)):
                    acc += size[i - 1]
                    if acc >= j * total / parts and j < parts:
                        p = topic_loads[i][0]
                        if rng.lower < p < rng.upper and (not points or p > points[-1]):
                            points.append(p)
                        j += 1
                how = f"{len(points) + 1} parts of equal load by topic hash"
        else:
            mid = rng.lower + (rng.upper - rng.lower) // 2
            points = [mid]
            how = "no topic rates given: range_equally_divide (load assumed even)"
        if not points:
            warnings.append(f"{bundle}: no split boundary separates its load; left as it is")
            return None
        if counts.get(ns, 0) + len(points) > limit:
            warnings.append(
                f"{bundle}: namespace {ns} has {counts.get(ns, 0)} bundles; splitting into {len(points) + 1} would exceed "
                f"loadBalancerNamespaceMaximumBundles={limit}"
            )
            return None
        children_ranges = split_range(rng, boundaries=points)
        children: list[BundleLoad] = []
        child_names = [bundle_full_name(ns, c.name) for c in children_ranges]
        if topic_loads:
            sums = []
            for c, child in zip(children_ranges, child_names):
                vec = [0.0] * 5
                mine = [(h, v) for h, v in topic_loads if c.contains(h)]
                topic_cache[child] = mine
                for _, v in mine:
                    for i in range(5):
                        vec[i] += v[i]
                sums.append(vec)
            tot = [sum(v[i] for v in sums) for i in range(5)]
            scale = [bl.vec[i] / tot[i] if tot[i] > 0 else 0.0 for i in range(5)]
            vecs = [[v[i] * scale[i] for i in range(5)] for v in sums]
        else:
            vecs = [[x / len(children_ranges) for x in bl.vec] for _ in children_ranges]
        n = len(children_ranges)
        parent_f = (bl.msg_rate, bl.feat_in, bl.feat_out)
        for child, vec in zip(child_names, vecs):
            share = [vec[i] / bl.vec[i] if bl.vec[i] > 0 else 1.0 / n for i in range(5)]
            # msg/s follows the CPU share, bytes in/out the NIC shares (the resources they drive)
            child_features[child] = (parent_f[0] * share[0], parent_f[1] * share[3], parent_f[2] * share[4])
            k = len(topic_cache[child]) if child in topic_cache else max(1, bl.topics // n)
            children.append(BundleLoad(child, bl.broker, vec, bl.msg_rate / n, bl.throughput / n, bl.clients // n, k))
        if not topic_loads:
            for child in child_names:  # no topic rates: do not split a guessed half again in this plan
                topic_cache[child] = []
        view.replace_bundle(bundle, children)
        counts[ns] = counts.get(ns, 0) + len(points)
        reason = (
            f"GlobalPlanner: {bundle} fits on no broker below target {target:.4f}; split to {how}; children placed in this plan"
        )
        return planned_split(bundle, bl.broker, reason, points, [ch.name for ch in children])


__all__ = ["split_candidates", "PLANNER_NAME", "GlobalPlanner", "PlannedUnload", "PlannerInput", "PlannerSettings"]
