"""``ThresholdShedder`` (``pulsar-broker/.../loadbalance/impl/ThresholdShedder.java``, newest version
with lower-boundary shedding) - Pulsar's default modular shedding strategy.

Per cycle:

1. Each broker's usage ``u`` = weighted max resource usage (5-argument form, fraction). Its history
   ``h = u`` on first sight, else ``h = h_prev * history + (1 - history) * u`` (EMA, kept in
   :class:`StrategyState`; brokers that disappear keep their entry, as in Pulsar). ``avg`` = mean of h.
2. ``avg == 0`` -> nothing. A broker with ``h < avg + threshold`` is not overloaded.
3. Else ``minimumThroughputToOffload = (thrIn + thrOut) * (h - avg - threshold + 0.05)``; below
   ``loadBalancerBundleUnloadMinThroughputThreshold`` MiB/s -> skip. With more than one bundle, its
   bundles (not recently unloaded, not system namespaces) are taken largest short-term throughput
   first until the marked traffic reaches the minimum (at least one bundle is always taken).
4. Lower-boundary shedding (``lowerBoundarySheddingEnabled``, only if step 3 selected nothing):
   the average is **recomputed by applying the EMA a second time with the same sample** (Pulsar
   calls ``getBrokerAvgUsage`` again - a quirk we reproduce; it moves history twice as fast). The
   broker with the highest h above ``avg - threshold`` and more than one bundle sheds
   ``throughput * threshold * 0.5`` if some broker is below ``avg - threshold``.

The opt-in variant ``ThresholdShedderSingleEma`` applies the EMA once per cycle in step 4 (the
history as it was after step 1); it is not Pulsar's behaviour and never the default.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pulsar_rebalance.core.decision import Reason, Unload, skip, success
from pulsar_rebalance.core.pulsar.shedders.base import (
    ADDITIONAL_THRESHOLD_PERCENT_MARGIN,
    MB,
    ModularInput,
    broker_throughput,
    fmt_mib,
    short_term_throughput,
    sort_desc_stable,
    weighted_usage,
)

if TYPE_CHECKING:
    from pulsar_rebalance.core.decision import Decision
    from pulsar_rebalance.core.pulsar.config import LoadBalancerConfig
    from pulsar_rebalance.core.pulsar.state import StrategyState

LOWER_BOUNDARY_THRESHOLD_MARGIN = 0.5


def _update_avg(
    inp: ModularInput, config: LoadBalancerConfig, hist: dict[str, float]
) -> tuple[float, dict[str, float]]:
    """``getBrokerAvgUsage``: apply one EMA step to every broker; returns (avg, current samples)."""
    history = config.load_balancer_history_resource_percentage
    total = 0.0
    count = 0
    samples: dict[str, float] = {}
    for broker, data in inp.brokers.items():
        usage = weighted_usage(data, config, with_memory=True)
        samples[broker] = usage
        prev = hist.get(broker)
        value = usage if prev is None else prev * history + (1 - history) * usage
        hist[broker] = value
        total += value
        count += 1
    return (total / count if count > 0 else 0.0), samples


def _select(inp: ModularInput, broker: str, minimum: float) -> tuple[list[tuple[str, float]], float]:
    """``filterAndSelectBundle``: largest first until ``minimum`` bytes/s are marked (at least one)."""
    recent = inp.recently_unloaded_bundles
    candidates = [(b, short_term_throughput(bd)) for b, bd in inp.sheddable_bundles(broker) if b not in recent]
    selected: list[tuple[str, float]] = []
    marked = 0.0
    for bundle, thr in sort_desc_stable(candidates):
        if marked < minimum or not selected:
            selected.append((bundle, thr))
            marked += thr
        else:
            break
    return selected, marked


@dataclass(frozen=True)
class ThresholdShedder:
    """Pulsar's ThresholdShedder; ``double_ema_on_lower_boundary=False`` is the opt-in variant."""

    name: str = "ThresholdShedder"
    double_ema_on_lower_boundary: bool = True

    def find_bundles_for_unloading(
        self, inp: ModularInput, config: LoadBalancerConfig, state: StrategyState
    ) -> tuple[Decision, StrategyState]:
        threshold = config.load_balancer_broker_threshold_shedder_percentage / 100.0
        min_thr = config.load_balancer_bundle_unload_min_throughput_threshold * MB
        hist = dict(state.threshold_avg_usage)
        avg, samples = _update_avg(inp, config, hist)
        broker_stats: dict[str, dict[str, Any]] = {b: {"usage": samples[b], "avgUsage": hist[b]} for b in inp.brokers}
        stats: dict[str, Any] = {
            "avgUsage": avg,
            "threshold": threshold,
            "overloadedAbove": avg + threshold,
            "minThroughputToOffloadBytes": min_thr,
            "brokers": broker_stats,
        }
        new_state = state.evolve(threshold_avg_usage=hist)
        if not inp.brokers:
            return skip(Reason.NO_BROKERS, "no brokers in the load data", stats), new_state
        if avg == 0:
            return skip(Reason.BALANCED, "average max resource usage is 0: nothing to shed", stats), new_state

        unloads: list[Unload] = []
        notes: list[str] = []
        blocked_by_bundles = False
        for broker, data in inp.brokers.items():
            current = hist.get(broker, 0.0)
            bs = broker_stats[broker]
            if current < avg + threshold:
                bs["status"] = "not overloaded"
                continue
            percent = current - avg - threshold + ADDITIONAL_THRESHOLD_PERCENT_MARGIN
            throughput = broker_throughput(data)
            minimum = throughput * percent
            bs["minThroughputToOffload"] = minimum
            if minimum < min_thr:
                bs["status"] = "overloaded, below min throughput"
                notes.append(f"{broker}: to offload {fmt_mib(minimum)} < min {fmt_mib(min_thr)}")
                continue
            n_bundles = len(data.bundles)
            if n_bundles > 1:
                selected, marked = _select(inp, broker, minimum)
                if not selected:
                    bs["status"] = "overloaded, no sheddable bundle"
                    blocked_by_bundles = True
                    continue
                bs["status"] = "overloaded, shedding"
                why = (
                    f"Overloaded: {broker} usage {current:.4f} >= avg {avg:.4f} + threshold {threshold:.4f}; "
                    f"offload >= {fmt_mib(minimum)} (marked {fmt_mib(marked)})"
                )
                unloads.extend(Unload(broker, b, None, why) for b, _ in selected)
            else:
                bs["status"] = "overloaded, sole bundle" if n_bundles == 1 else "overloaded, no bundles"
                blocked_by_bundles = True
                notes.append(f"{broker}: overloaded with {n_bundles} bundle(s), no shedding")

        if unloads:
            detail = f"{len(unloads)} bundle(s) from {len({u.broker for u in unloads})} broker(s) above avg {avg:.4f} + {threshold:.4f}"
            return success(Reason.OVERLOADED, detail, unloads, stats), new_state

        if config.lower_boundary_shedding_enabled:
            decision, hist2 = self._lower_boundary(inp, config, hist, threshold, min_thr, stats)
            new_state = state.evolve(threshold_avg_usage=hist2)
            if decision is not None:
                return decision, new_state
            notes.append(str(stats.get("lowerBoundary", {}).get("detail", "")))

        reason = Reason.NO_BUNDLES if blocked_by_bundles else Reason.BALANCED
        detail = (
            f"no broker above avg {avg:.4f} + threshold {threshold:.4f}"
            if not notes
            else "; ".join(n for n in notes if n)
        )
        return skip(reason, detail or "nothing to shed", stats), new_state

    def _lower_boundary(
        self,
        inp: ModularInput,
        config: LoadBalancerConfig,
        hist: dict[str, float],
        threshold: float,
        min_thr: float,
        stats: dict[str, Any],
    ) -> tuple[Decision | None, dict[str, float]]:
        """``tryLowerBoundaryShedding``; returns (decision or None, history after this step)."""
        if self.double_ema_on_lower_boundary:
            hist = dict(hist)
            avg, _ = _update_avg(inp, config, hist)  # Pulsar's second EMA application (quirk)
        else:
            avg = sum(hist.get(b, 0.0) for b in inp.brokers) / len(inp.brokers)
        lb: dict[str, Any] = {"avgUsage": avg, "lowerBound": avg - threshold}
        stats["lowerBoundary"] = lb
        max_usage = avg - threshold
        max_broker = ""
        has_below = False
        for broker, data in inp.brokers.items():
            current = hist.get(broker, 0.0)
            if current > max_usage and len(data.bundles) > 1:
                max_usage = current
                max_broker = broker
            if current < avg - threshold:
                has_below = True
        max_data = inp.brokers.get(max_broker)
        if max_data is None:
            lb["detail"] = "lower boundary: no broker above the lower bound with more than one bundle"
            return None, hist
        if not has_below:
            lb["detail"] = f"lower boundary: no broker below avg {avg:.4f} - threshold {threshold:.4f}"
            return None, hist
        minimum = broker_throughput(max_data) * threshold * LOWER_BOUNDARY_THRESHOLD_MARGIN
        lb.update({"broker": max_broker, "minThroughputToOffload": minimum})
        if min_thr > minimum:
            lb["detail"] = f"lower boundary: {max_broker} would shed {fmt_mib(minimum)} < min {fmt_mib(min_thr)}"
            return None, hist
        selected, marked = _select(inp, max_broker, minimum)
        if not selected:
            lb["detail"] = f"lower boundary: {max_broker} has no sheddable bundle"
            return None, hist
        why = (
            f"Underloaded: a broker is below avg {avg:.4f} - threshold {threshold:.4f}; {max_broker} "
            f"(usage {max_usage:.4f}) sheds >= {fmt_mib(minimum)} (marked {fmt_mib(marked)})"
        )
        unloads = [Unload(max_broker, b, None, why) for b, _ in selected]
        lb["detail"] = why
        detail = f"lower-boundary shedding: {len(unloads)} bundle(s) from {max_broker}"
        return success(Reason.UNDERLOADED, detail, unloads, stats), hist
