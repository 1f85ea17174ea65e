"""``AvgShedder`` (``pulsar-broker/.../loadbalance/impl/AvgShedder.java``, newest version) - a shedder
*and* a placement strategy, paired so that what is shed lands where the shedder planned.

Shedding, per cycle:

1. Score = weighted max usage, 4-argument form without memory, * 100 (points, no history).
2. Brokers sorted by score ascending (``Comparator.comparingDouble``, stable: ties keep input order;
   an older version compared ``(int)(s1 - s2)``, i.e. scores within 1 point were equal).
3. Pair lowest with highest, second lowest with second highest... (``i <= j``; with an odd count the
   middle broker pairs with itself, diff 0). A pair whose score gap is below
   ``loadBalancerAvgShedderLowThreshold`` resets both brokers' hit counts; otherwise it becomes a
   candidate and ``hitLow`` is incremented for both, plus ``hitHigh`` when the gap is at least
   ``loadBalancerAvgShedderHighThreshold`` (else ``hitHigh`` is cleared for both).
4. No candidate pair -> clear all hit counts. A pair proceeds when any of its brokers has
   ``hitHigh >= loadBalancerAvgShedderHitCountHighThreshold`` or ``hitLow >= ...LowThreshold``;
   proceeding resets both brokers' counts.
5. To move: ``(maxMsgRate - minMsgRate) * maxUnloadPercentage`` if above ``minUnloadMessage``, else
   the same on throughput if above ``minUnloadMessageThroughput``, else skip the pair. Bundles of
   the high broker (not recently unloaded) largest first; each with ``0 < value <= remaining`` is
   taken, ``remaining -= value``, and ``bundleBrokerMap[bundleData] = lowBroker``.

   The planned destinations are keyed by **bundle name** and live for one shedding attempt: the map
   is cleared when planning starts and again when ``doLoadShedding`` has tried every unload
   (``onUnloadAttemptCompleted``) - apache/pulsar PR #26246 (merged); before it the map was keyed
   by ``BundleData`` value and never cleared.

Placement (``selectBrokerForBundle``): a bundle with a planned destination that is a candidate goes
there; otherwise - and on the load manager's overload retry (PR #26246: the retry bypasses the plan
so an overloaded planned broker is avoided) - a broker is drawn: sorted candidates indexed by
``abs(crc32(String(random int))) % n`` (we draw the int from the seeded RNG). The draw is not
remembered (the attempt-scoped map only holds shedding plans).

Source read: ``AvgShedder.java`` as of the ``@CustomLog`` version (comparingDouble sort) plus the
merged PR #26246 as its review thread describes it; ``ModularLoadManagerImpl`` at 009a9bf2 (which
calls ``selectBrokerForBundle`` and ``onUnloadAttemptCompleted``).
"""

from __future__ import annotations

import random
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pulsar_rebalance.core.decision import Placement, Reason, Unload, skip, success
from pulsar_rebalance.core.pulsar.shedders.base import (
    MB,
    ModularInput,
    broker_msg_rate,
    broker_throughput,
    short_term_msg_rate,
    short_term_throughput,
    sort_desc_stable,
    weighted_usage,
)
from pulsar_rebalance.core.pulsar.state import AvgShedderBinding

if TYPE_CHECKING:
    from collections.abc import Collection

    from pulsar_rebalance.core.decision import Decision
    from pulsar_rebalance.core.pulsar.config import LoadBalancerConfig
    from pulsar_rebalance.core.pulsar.state import StrategyState


@dataclass(frozen=True)
class AvgShedder:
    name: str = "AvgShedder"

    def find_bundles_for_unloading(
        self, inp: ModularInput, config: LoadBalancerConfig, state: StrategyState
    ) -> tuple[Decision, StrategyState]:
        low = float(config.load_balancer_avg_shedder_low_threshold)
        high = float(config.load_balancer_avg_shedder_high_threshold)
        hit_high_thr = config.load_balancer_avg_shedder_hit_count_high_threshold
        hit_low_thr = config.load_balancer_avg_shedder_hit_count_low_threshold
        hit_high = dict(state.avg_hit_high)
        hit_low = dict(state.avg_hit_low)
        bindings: dict[str, AvgShedderBinding] = {}  # cleared when planning starts (PR #26246)

        scores = {b: weighted_usage(d, config, with_memory=False) * 100 for b, d in inp.brokers.items()}
        ordered = sorted(scores, key=lambda b: scores[b])  # stable: ties keep input order

        pairs: list[tuple[str, str]] = []
        i, j = 0, len(ordered) - 1
        while i <= j:
            hi_b, lo_b = ordered[j], ordered[i]
            diff = scores[hi_b] - scores[lo_b]
            if diff < low:
                for b in (hi_b, lo_b):
                    hit_high.pop(b, None)
                    hit_low.pop(b, None)
            else:
                pairs.append((lo_b, hi_b))
                hit_low[lo_b] = hit_low.get(lo_b, 0) + 1
                hit_low[hi_b] = hit_low.get(hi_b, 0) + 1
                if diff < high:
                    hit_high.pop(hi_b, None)
                    hit_high.pop(lo_b, None)
                else:
                    hit_high[lo_b] = hit_high.get(lo_b, 0) + 1
                    hit_high[hi_b] = hit_high.get(hi_b, 0) + 1
            i += 1
            j -= 1

        pair_stats: list[dict[str, Any]] = []
        stats: dict[str, Any] = {
            "scores": scores,
            "sortedBrokers": ordered,
            "lowThreshold": low,
            "highThreshold": high,
            "pairs": pair_stats,
        }

        def finish(decision: Decision) -> tuple[Decision, StrategyState]:
            stats["hitCountForHigh"] = dict(hit_high)
            stats["hitCountForLow"] = dict(hit_low)
            return decision, state.evolve(
                avg_hit_high=hit_high, avg_hit_low=hit_low, avg_scores=scores, avg_bundle_broker=bindings
            )

        if not inp.brokers:
            return finish(skip(Reason.NO_BROKERS, "no brokers in the load data", stats))
        if not pairs:
            hit_high.clear()
            hit_low.clear()
            return finish(skip(Reason.BALANCED, f"no broker pair with a score gap >= {low:g} points", stats))

        min_msg = float(config.min_unload_message)
        min_thr = float(config.min_unload_message_throughput)
        pct = config.max_unload_percentage
        recent = inp.recently_unloaded_bundles
        selected: list[tuple[str, str, str]] = []  # (source, bundle, why)
        for lo_b, hi_b in pairs:
            gap = scores[hi_b] - scores[lo_b]
            ps: dict[str, Any] = {"low": lo_b, "high": hi_b, "scoreGap": gap}
            pair_stats.append(ps)
            triggered = (
                hit_high.setdefault(lo_b, 0) >= hit_high_thr
                or hit_high.setdefault(hi_b, 0) >= hit_high_thr
                or hit_low.setdefault(lo_b, 0) >= hit_low_thr
                or hit_low.setdefault(hi_b, 0) >= hit_low_thr
            )
            # Pulsar evaluates four computeIfAbsent(..., 0) calls joined by && over negations: they run
            # in this order until one is satisfied; setdefault reproduces the zero entries it creates.
            ps["hitCounts"] = {
                "highOfLow": hit_high.get(lo_b),
                "highOfHigh": hit_high.get(hi_b),
                "lowOfLow": hit_low.get(lo_b),
                "lowOfHigh": hit_low.get(hi_b),
            }
            if not triggered:
                ps["status"] = "waiting for hit count"
                continue
            for b in (lo_b, hi_b):
                hit_high.pop(b, None)
                hit_low.pop(b, None)
            lo_d, hi_d = inp.brokers[lo_b], inp.brokers[hi_b]
            msg_req = (broker_msg_rate(hi_d) - broker_msg_rate(lo_d)) * pct
            thr_req = (broker_throughput(hi_d) - broker_throughput(lo_d)) * pct
            if msg_req > min_msg:
                by_rate, remaining, unit = True, msg_req, "msg/s"
            elif thr_req > min_thr:
                by_rate, remaining, unit = False, thr_req, "bytes/s"
            else:
                ps["status"] = (
                    f"gap too small: {msg_req:.1f} msg/s <= {min_msg:g} and {thr_req / MB:.2f} MiB/s <= {min_thr / MB:.2f}"
                )
                continue
            ps["toMove"] = remaining
            ps["unit"] = unit
            metric = short_term_msg_rate if by_rate else short_term_throughput
            candidates = [(b, metric(bd)) for b, bd in inp.sheddable_bundles(hi_b) if b not in recent]
            why = (
                f"Overloaded: {hi_b} score {scores[hi_b]:.2f} vs {lo_b} {scores[lo_b]:.2f} (gap {gap:.2f}); "
                f"move {remaining:.2f} {unit} to {lo_b}"
            )
            count = 0
            for bundle, traffic in sort_desc_stable(candidates):
                if traffic > 0 and traffic <= remaining:
                    bindings[bundle] = AvgShedderBinding(bundle, lo_b)
                    selected.append((hi_b, bundle, why))
                    remaining += -traffic
                    count += 1
            ps["status"] = f"shedding {count} bundle(s)"

        if not selected:
            waiting = all(p.get("status") == "waiting for hit count" for p in pair_stats)
            reason = Reason.HIT_COUNT if waiting else Reason.NO_BUNDLES
            detail = "pairs found but hit counts below thresholds" if waiting else "triggered pairs had nothing to move"
            return finish(skip(reason, detail, stats))
        unloads = [
            Unload(src, bundle, bindings[bundle].broker if bindings[bundle].broker != src else None, why)
            for src, bundle, why in selected
        ]
        return finish(success(Reason.OVERLOADED, f"{len(unloads)} bundle(s) in {len(pairs)} pair(s)", unloads, stats))


def select_broker(
    *,
    bundle: str,
    candidates: Collection[str],
    state: StrategyState,
    rng: random.Random,
    bypass_planned: bool = False,
) -> tuple[Placement, StrategyState]:
    """``AvgShedder.selectBrokerForBundle``: the planned broker if it is a candidate, else a random one.

    ``bypass_planned``: the load manager's overload retry, which ignores the plan (PR #26246).
    """
    binding = state.avg_bundle_broker.get(bundle)
    if binding is not None and binding.broker in candidates and not bypass_planned:
        return Placement(
            bundle, binding.broker, (binding.broker,), "planned by AvgShedder in this shedding attempt"
        ), state
    if not candidates:
        return Placement(bundle, None, (), "no candidate brokers"), state
    ordered = sorted(candidates)
    java_random_int = rng.randint(-(2**31), 2**31 - 1)
    hashcode = zlib.crc32(str(java_random_int).encode("utf-8"))
    index = abs(hashcode) % len(ordered)
    broker = ordered[index]
    if binding is None:
        why = "no planned broker"
    elif bypass_planned:
        why = f"overload retry bypasses the planned broker {binding.broker}"
    else:
        why = f"planned broker {binding.broker} is not a candidate"
    return Placement(
        bundle, broker, tuple(ordered), f"{why}: random pick (crc32 of a random int) among candidates"
    ), state


@dataclass(frozen=True)
class AvgShedderPlacement:
    """AvgShedder as a placement strategy (``loadBalancerLoadPlacementStrategy``): :func:`select_broker`,
    reading the plans its shedder left in the state."""

    name: str = "AvgShedder"

    def select_broker(
        self,
        *,
        bundle: str,
        candidates: Collection[str],
        state: StrategyState,
        rng: random.Random,
        bypass_planned: bool = False,
    ) -> tuple[Placement, StrategyState]:
        return select_broker(bundle=bundle, candidates=candidates, state=state, rng=rng, bypass_planned=bypass_planned)
