"""``UniformLoadShedder`` (``pulsar-broker/.../loadbalance/impl/UniformLoadShedder.java``, newest).

1. Over the brokers (input order), track separately the max/min broker-level msg rate (in+out) and
   the max/min throughput (in+out); ties keep the first seen (strict comparisons; max starts at -1,
   min at ``Integer.MAX_VALUE``).
2. A min within 1e-6 of zero becomes 1.0. ``rateDiff% = (max - min) * 100 / min``,
   ``thrMultiplier = max / min``; each trigger is enabled only when its threshold is > 0.
3. Msg-rate trigger wins over throughput. Required =
   ``(int)((max - min) * maxUnloadPercentage)`` (Java int: truncates, saturates at 2^31-1). Only if
   the max broker has more than one bundle and required >= ``minUnloadMessage`` /
   ``minUnloadMessageThroughput``: its bundles with a non-zero value, not recently unloaded,
   largest first; a bundle is taken if ``value <= required`` and then ``required -= (int) value``
   (``MutableInt.add(double)`` truncates); stop taking once ``maxUnloadBundleNumPerShedding``
   (-1 = no cap) bundles are selected. Bundles too big are skipped, smaller ones may still fit.

The newest Pulsar source has **no** zero-traffic filter (PR #21214, which adds it with its test
``testFilterOutNonTrafficBundlesForUnloading``, is not merged): a zero-traffic bundle fits any
``required`` and can be selected. The opt-in variant ``UniformLoadShedderSkipZeroTraffic`` applies
that PR's filter (``value > 0``); never the default.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pulsar_rebalance.core.decision import Reason, Unload, skip, success
from pulsar_rebalance.core.pulsar.shedders.base import (
    ModularInput,
    broker_msg_rate,
    broker_throughput,
    java_int,
    java_int_add,
    short_term_msg_rate,
    short_term_throughput,
    sort_desc_stable,
)

if TYPE_CHECKING:
    from pulsar_rebalance.core.decision import Decision
    from pulsar_rebalance.core.pulsar.config import LoadBalancerConfig
    from pulsar_rebalance.core.pulsar.state import StrategyState

EPS = 1e-6
_INTEGER_MAX_VALUE = float(2**31 - 1)


@dataclass(frozen=True)
class UniformLoadShedder:
    name: str = "UniformLoadShedder"
    skip_zero_traffic: bool = False
    """Opt-in (unmerged PR #21214): leave bundles without traffic out of the candidates."""

    def find_bundles_for_unloading(
        self, inp: ModularInput, config: LoadBalancerConfig, state: StrategyState
    ) -> tuple[Decision, StrategyState]:
        rate_over: str | None = None
        thr_over: str | None = None
        rate_under: str | None = None
        thr_under: str | None = None
        max_rate = -1.0
        max_thr = -1.0
        min_rate = _INTEGER_MAX_VALUE
        min_thr = _INTEGER_MAX_VALUE
        for name, data in inp.brokers.items():
            rate = broker_msg_rate(data)
            thr = broker_throughput(data)
            if rate > max_rate:
                rate_over, max_rate = name, rate
            if thr > max_thr:
                thr_over, max_thr = name, thr
            if rate < min_rate:
                rate_under, min_rate = name, rate
            if thr < min_thr:
                thr_under, min_thr = name, thr

        if -EPS <= min_rate <= EPS:
            min_rate = 1.0
        if -EPS <= min_thr <= EPS:
            min_thr = 1.0
        rate_diff_pct = ((max_rate - min_rate) * 100) / min_rate
        thr_multiplier = max_thr / min_thr
        rate_threshold = config.load_balancer_msg_rate_difference_shedder_threshold
        thr_threshold = config.load_balancer_msg_throughput_multiplier_difference_shedder_threshold
        rate_exceeded = rate_threshold > 0 and rate_diff_pct > rate_threshold
        thr_exceeded = thr_threshold > 0 and thr_multiplier > thr_threshold

        stats: dict[str, Any] = {
            "msgRate": {
                "maxBroker": rate_over,
                "max": max_rate,
                "minBroker": rate_under,
                "min": min_rate,
                "differencePercentage": rate_diff_pct,
                "threshold": rate_threshold,
                "exceeded": rate_exceeded,
            },
            "throughput": {
                "maxBroker": thr_over,
                "max": max_thr,
                "minBroker": thr_under,
                "min": min_thr,
                "multiplier": thr_multiplier,
                "threshold": thr_threshold,
                "exceeded": thr_exceeded,
            },
        }
        if not inp.brokers:
            return skip(Reason.NO_BROKERS, "no brokers in the load data", stats), state
        if not (rate_exceeded or thr_exceeded):
            return skip(
                Reason.BALANCED,
                f"msg-rate gap {rate_diff_pct:.1f}% <= {rate_threshold:g}% and throughput ratio "
                f"{thr_multiplier:.2f} <= {thr_threshold:g} (or trigger disabled)",
                stats,
            ), state

        pct = config.max_unload_percentage
        if rate_exceeded:
            required = java_int((max_rate - min_rate) * pct)
            broker, minimum, metric, unit = rate_over, config.min_unload_message, short_term_msg_rate, "msg/s"
            trigger = f"msg-rate gap {rate_diff_pct:.1f}% > {rate_threshold:g}% ({rate_over} vs {rate_under})"
        else:
            required = java_int((max_thr - min_thr) * pct)
            broker, minimum, metric, unit = (
                thr_over,
                config.min_unload_message_throughput,
                short_term_throughput,
                "bytes/s",
            )
            trigger = f"throughput ratio {thr_multiplier:.2f} > {thr_threshold:g} ({thr_over} vs {thr_under})"
        assert broker is not None  # brokers is non-empty
        stats["required"] = required
        stats["minimumRequired"] = minimum
        data = inp.brokers[broker]
        if len(data.bundles) <= 1:
            return skip(Reason.NO_BUNDLES, f"{trigger}, but {broker} has {len(data.bundles)} bundle(s)", stats), state
        if required < minimum:
            return skip(Reason.BALANCED, f"{trigger}, but required {required} {unit} < minimum {minimum}", stats), state

        cap = config.max_unload_bundle_num_per_shedding
        recent = inp.recently_unloaded_bundles
        candidates = [
            (b, v)
            for b, v in ((b, metric(bd)) for b, bd in inp.sheddable_bundles(broker))
            if b not in recent and (v > 0 or not self.skip_zero_traffic)
        ]
        selected: list[str] = []
        remaining = required
        for bundle, value in sort_desc_stable(candidates):
            if cap != -1 and len(selected) >= cap:
                break
            if value <= remaining:
                remaining = java_int_add(remaining, java_int(-value))
                selected.append(bundle)
        stats["remainingAfterSelection"] = remaining
        if not selected:
            return skip(Reason.NO_BUNDLES, f"{trigger}, but no bundle of {broker} fits {required} {unit}", stats), state
        why = f"Overloaded: {trigger}; unload up to {required} {unit} from {broker}"
        unloads = [Unload(broker, b, None, why) for b in selected]
        return success(Reason.OVERLOADED, f"{len(unloads)} bundle(s) from {broker}: {trigger}", unloads, stats), state
